"""Exceptions whose ``str()`` is the one line a user sees."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})


def one_line(text: str) -> str:
    """``text`` with every line break escaped (``\\n``): a file's own bytes never split a message."""
    return text.translate(_LINE_BREAKS)


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
