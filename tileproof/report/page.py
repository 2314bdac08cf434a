"""What a report page knows besides the audit: which tree was audited, when, and where its file links point.

``Audited``: the commit the working tree stood on, whether tracked files differed from it and when
the audit ran (``commands.audit`` fills it from ``runner.capture.git_state``). ``Links``: every file link of
both reports goes through :meth:`Links.file`. Two ways, one chosen per page and stated in its header:

- **relative** (the default): a path relative to the folder the report is written to, so the page works
  from a checkout, a CI artifact that keeps the tree, or ``file://``; the header names the repository
  root as seen from the page (``..`` for ``evidence/audit.html``), so a reader who moved the page knows
  where the links expect the tree.
- **a repository URL** (``audit --link-base URL``): ``URL`` with ``{commit}`` replaced by the audited
  commit's full id, then the repo-relative path, e.g.
  ``https://github.com/OWNER/REPO/blob/{commit}/``: the page keeps working when it is moved, mailed or
  attached to a pull request. A dirty tree's uncommitted files are not at that commit; the header says so.

In-page links are ``#anchors`` of the page itself in both modes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path
from urllib.parse import urlsplit

from tileproof.judge.audit.result import AuditResult
from tileproof.records.errors import TileproofError
from tileproof.report.causes import FindingsView, grouped

COMMIT_FIELD = "{commit}"


class BadLinkBase(TileproofError):
    """``--link-base`` refused: one line naming the option, what was expected and the fix (exit 2)."""


@dataclass(frozen=True)
class Audited:
    """The tree the audit read, as a reviewer needs it said first."""

    commit: str | None
    """HEAD's full id; None outside a git checkout."""
    dirty: bool
    """Tracked files differed from HEAD (uncommitted changes were audited too)."""
    at: datetime
    """When the audit ran (UTC)."""


def check_link_base(url: str) -> str:
    """``--link-base`` as given, or the one line that refuses it: an http(s) URL with a host, ending in ``/``."""
    parts = urlsplit(url.replace(COMMIT_FIELD, "0"))
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise BadLinkBase(f"--link-base {url!r}: not an http(s) URL with a host (fix: e.g. "
                           f"https://github.com/OWNER/REPO/blob/{COMMIT_FIELD}/)")
    if not url.endswith("/"):
        raise BadLinkBase(f"--link-base {url!r}: must end with '/', the repo-relative path is appended "
                          f"(fix: {url}/)")
    if parts.query or parts.fragment:
        raise BadLinkBase(f"--link-base {url!r}: has a query or fragment, the repo-relative path is appended "
                          f"(fix: the URL of the repository's files, e.g. https://HOST/OWNER/REPO/blob/{COMMIT_FIELD}/)")
    return url


@dataclass(frozen=True)
class Links:
    """Where the page's file links point (see the module docstring)."""

    root: Path
    """The repository root."""
    base: Path
    """The folder the page is written to."""
    url: str | None = None
    """The repository URL at the audited commit (``{commit}`` filled in); None: relative links."""
    at_commit: bool = False
    """Whether ``url`` names the audited commit (it held ``{commit}``)."""

    @classmethod
    def of(cls, root: Path, base: Path, link_base: str | None = None, commit: str | None = None) -> Links:
        """Relative links, or ``link_base`` (checked: :func:`check_link_base`) with ``{commit}`` filled in."""
        if link_base is None:
            return cls(Path(root), Path(base))
        url = check_link_base(link_base)
        if COMMIT_FIELD in url:
            if commit is None:
                raise BadLinkBase(f"--link-base {url!r} names {COMMIT_FIELD}, and the tree is not a git checkout "
                                   f"(fix: a URL without {COMMIT_FIELD}, or audit a checkout)")
            return cls(Path(root), Path(base), url.replace(COMMIT_FIELD, commit), True)
        return cls(Path(root), Path(base), url)

    def file(self, path: str) -> str:
        """The href of a repo-relative ``path`` (unquoted; the renderers quote it)."""
        if self.url is not None:
            return self.url + path
        return Path(os.path.relpath(self.root / path, self.base)).as_posix()

    def root_from_page(self) -> str:
        """The repository root as seen from the page's folder (``..``), POSIX separators."""
        return Path(os.path.relpath(self.root, self.base)).as_posix()

    def describe(self, audited: Audited | None) -> str:
        """One line for the header: where file links point, and what a reader must keep for them to work."""
        if self.url is not None and not self.at_commit:
            return (f"File links point at {self.url}, a URL that names no commit: it shows the files as they are "
                    f"there when opened, which may not be the audited ones.")
        if self.url is not None:
            dirty = (" The working tree was dirty: files it changed or added are not at that commit."
                     if audited is not None and audited.commit is not None and audited.dirty else "")
            return f"File links point at {self.url} (the repository at the audited commit).{dirty}"
        return (f"File links are relative to this page: they expect the repository root at "
                f"'{self.root_from_page()}' from the page's folder (moved alone, the page keeps its in-page "
                f"links only; audit --link-base URL writes links that survive a move).")


@dataclass(frozen=True)
class Context:
    """Everything a section's view is built from."""

    result: AuditResult
    links: Links
    audited: Audited | None = None
    """None for a page built without it (the header then says so)."""

    @cached_property
    def causes(self) -> FindingsView:
        """The findings under their root causes (``report.causes``), grouped once for every section."""
        return grouped(self.result.findings, self.result.lessons)
