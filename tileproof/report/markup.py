"""Escaping and links, the same for every section of both reports.

Links are relative to the folder the report is written to (``link``), so the
page works from a checkout, a CI artifact or a browser's ``file://``.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from urllib.parse import quote

from tileproof.records.errors import one_line


def link(root: Path, base: Path, path: str) -> str:
    """``path`` (repo-relative) relative to the report's folder ``base``, POSIX separators."""
    return Path(os.path.relpath(Path(root) / path, base)).as_posix()


def md(text: object) -> str:
    """Text for a Markdown table cell: pipes escaped, no markup, one line, its control characters escaped as every
    printed line's are (``records.errors.one_line``: a name with a line break is written ``\\n``, never cut)."""
    return one_line(str(text)).replace("|", "\\|").replace("<", "&lt;")


def mdlink(label: str, href: str) -> str:
    return f"[{md(label)}]({quote(href)})"


def e(text: object) -> str:
    """Text escaped for HTML (attributes included), its control characters escaped as every printed line's are
    (``records.errors.one_line``)."""
    return html.escape(one_line(str(text)), quote=True)


def a(label: str, href: str) -> str:
    return f'<a href="{e(quote(href))}">{e(label)}</a>'


KNOWN_BADGES = frozenset({"passed", "failed", "error", "timeout", "gated", "no-gpu", "confirmed", "refuted",
                          "supported", "unverifiable-here", "unchecked", "published", "draft"})
BADGE_CLASS = {"confirmed": "passed", "supported": "passed", "published": "passed", "refuted": "failed",
               "unverifiable-here": "other", "unchecked": "other", "draft": "gated", "no-record": "other",
               "not-run": "other", "stale": "gated"}


def badge(word: str) -> str:
    """A coloured label for a verdict or outcome (an unknown word is a failure's colour)."""
    cls = BADGE_CLASS.get(word, word if word in KNOWN_BADGES else "failed")
    return f'<span class="v v-{cls}">{e(word)}</span>'
