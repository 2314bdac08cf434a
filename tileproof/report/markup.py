"""Escaping and links, the same for every section of both reports.

Where a file link points (relative to the page, or a repository URL) is ``report.page.Links``'s to say;
``quoted`` writes any href percent-encoded, keeping a URL's scheme and host.
"""

from __future__ import annotations

import html
from urllib.parse import quote, urlsplit

from tileproof.records.errors import one_line


def quoted(href: str) -> str:
    """An href as both reports write it: its path percent-encoded, a URL's scheme and host kept."""
    if href.startswith("#"):
        return "#" + quote(href[1:])
    parts = urlsplit(href)
    if parts.scheme:
        return f"{parts.scheme}://{parts.netloc}{quote(parts.path)}"
    return quote(href)


def md(text: object) -> str:
    """Text for a Markdown table cell: pipes escaped, no markup, one line, its control characters escaped as every
    printed line's are (``records.errors.one_line``: a name with a line break is written ``\\n``, never cut)."""
    return one_line(str(text)).replace("|", "\\|").replace("<", "&lt;")


def mdlink(label: str, href: str) -> str:
    return f"[{md(label)}]({quoted(href)})"


def e(text: object) -> str:
    """Text escaped for HTML (attributes included), its control characters escaped as every printed line's are
    (``records.errors.one_line``)."""
    return html.escape(one_line(str(text)), quote=True)


def a(label: str, href: str) -> str:
    return f'<a href="{e(quoted(href))}">{e(label)}</a>'


KNOWN_BADGES = frozenset({"passed", "failed", "error", "timeout", "gated", "no-gpu", "confirmed", "refuted",
                          "supported", "unverifiable-here", "unchecked", "published", "draft"})
BADGE_CLASS = {"confirmed": "passed", "supported": "passed", "published": "passed", "refuted": "failed",
               "unverifiable-here": "other", "unchecked": "other", "draft": "gated", "no-record": "other",
               "not-run": "other", "stale": "gated"}


def badge(word: str) -> str:
    """A coloured label for a verdict or outcome (an unknown word is a failure's colour)."""
    cls = BADGE_CLASS.get(word, word if word in KNOWN_BADGES else "failed")
    return f'<span class="v v-{cls}">{e(word)}</span>'
