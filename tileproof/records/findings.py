"""A finding: one thing wrong with one file, by the rule it breaks. The audit, ``lint-kernels``, the lesson
check (``tileproof check``) and the history check all report these.

A finding names the file at fault, the rule (a stable id a test or a reviewer can read back), why, and the fix
when the tool gives it apart from the reason; a lint finding also points at its line and column. It prints as
one line, control characters escaped (``records.errors.one_line``): a file name with a line break in it never
splits a finding in two.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tileproof.records.errors import encodable, one_line


@dataclass(frozen=True, order=True)
class Finding:
    """One finding; findings sort by file, then place, then rule and reason."""

    file: str
    """The file at fault, as the repository names it (``runs/<id>.json``, ``lessons/x.md``, ``HEAD``...)."""
    line: int = field(default=0, kw_only=True)
    """The 1-based line it points at; 0 for a finding about the whole file."""
    col: int = field(default=0, kw_only=True)
    """The 1-based column on ``line``; 0 with ``line``."""
    rule: str
    """The rule's stable id (``record-seal``, ``TP003``, ``generated-stale``...)."""
    reason: str
    """Why, in one line."""
    fix: str = ""
    """What to do about it, when the tool says so apart from ``reason``; empty otherwise."""

    def __post_init__(self) -> None:
        """A file name that is not UTF-8 (from a folder's listing or git's, decoded as ``os.fsdecode`` decodes
        it) is kept with its bad bytes written out (``records.errors.encodable``), so that every report a
        finding goes into (Markdown, HTML, JSON, JUnit) can hold it."""
        for name in ("file", "reason", "fix"):
            text = getattr(self, name)
            if not text.isascii():
                object.__setattr__(self, name, encodable(text))

    def __str__(self) -> str:
        """``file: rule: reason (fix: ...)``; a finding at a place prints as compilers and linters print
        theirs, ``file:line:col: RULE reason (fix: ...)``, so editors jump to it."""
        fix = f" (fix: {self.fix})" if self.fix else ""
        if self.line:
            return one_line(f"{self.file}:{self.line}:{self.col}: {self.rule} {self.reason}{fix}")
        return one_line(f"{self.file}: {self.rule}: {self.reason}{fix}")
