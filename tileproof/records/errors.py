"""Exceptions whose ``str()`` is the one line a user sees."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

CONTROLS = "".join(map(chr, [*range(0x20), *range(0x7F, 0xA0)])) + "\u2028\u2029\u202a\u202b\u202c\u202d\u202e" \
    "\u2066\u2067\u2068\u2069"
"""Every character escaped in a printed line: C0 and C1 controls and DEL (line breaks, tabs, the
terminal's escape), the Unicode line and paragraph separators and the bidirectional overrides
(which make a line read in another order than it is written)."""

_ESCAPED = str.maketrans({c: repr(c)[1:-1] for c in CONTROLS})


def one_line(text: str) -> str:
    """``text`` with every control character escaped as Python writes it (``\\n``, ``\\x1b``): the
    one function every printed line that holds a file name or a file's own bytes goes through, so
    that no name splits, repaints or reorders a line."""
    return text.translate(_ESCAPED)


class TileproofError(Exception):
    """Any error tileproof reports as one line and exit status 2."""

    def __str__(self) -> str:
        return one_line(super().__str__())


class RecordError(TileproofError):
    """A record, lesson or config file that cannot be read as expected."""

    def __init__(self, path: Path | str, field: str, problem: str, fix: str):
        self.path, self.field, self.problem, self.fix = str(path), field, problem, fix
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}: {self.field}: " if self.field else f"{self.path}: "
        return one_line(f"{where}{self.problem} (fix: {self.fix})")


class ToolchainError(TileproofError):
    """The tile toolchain is missing, mixed, or unsafe to use."""


InputProblem = Literal["missing", "symlink", "special-file", "outside-repo", "too-large", "not-utf8", "too-deep",
                       "unreadable"]
"""Why ``records.safe_read`` refused an input file; each is a named audit finding."""


class InputRefused(RecordError):
    """An input file refused before parsing: a link, special file, outside the repo, too big, not UTF-8, too deep."""

    def __init__(self, path: Path | str, kind: InputProblem, problem: str, fix: str, field: str = ""):
        self.kind: InputProblem = kind
        super().__init__(path, field, problem, fix)
