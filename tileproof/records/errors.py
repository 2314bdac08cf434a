"""Exceptions whose ``str()`` is the one line a user sees."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

CONTROLS = "".join(map(chr, [*range(0x20), *range(0x7F, 0xA0)])) + "\u2028\u2029\u202a\u202b\u202c\u202d\u202e" \
    "\u2066\u2067\u2068\u2069"
"""Every character escaped in a printed line: C0 and C1 controls and DEL (line breaks, tabs, the
terminal's escape), the Unicode line and paragraph separators and the bidirectional overrides
(which make a line read in another order than it is written)."""

_UNENCODABLE = str.maketrans({c: f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else repr(c)[1:-1]
                              for c in map(chr, range(0xD800, 0xE000))})
"""Lone surrogates, which no UTF-8 output can hold: the ones ``os.fsdecode`` makes of a file name's
bytes that are not UTF-8 (U+DC80 to U+DCFF, ``surrogateescape``) written as those bytes (``\\xff``),
any other as Python writes it (``\\ud800``)."""

_ESCAPED = str.maketrans({c: repr(c)[1:-1] for c in CONTROLS} | _UNENCODABLE)


def one_line(text: str) -> str:
    """``text`` with every control character escaped as Python writes it (``\\n``, ``\\x1b``), and every
    lone surrogate as :data:`_UNENCODABLE` says: the one function every printed line that holds a file
    name or a file's own bytes goes through, so that no name splits, repaints or reorders a line, nor
    ends the command in an encoding error."""
    return text.translate(_ESCAPED)


def encodable(text: str) -> str:
    """``text`` with its lone surrogates escaped (:data:`_UNENCODABLE`), everything else as it is: a
    file name that is not UTF-8, as ``os.fsdecode`` or git's output decoded with ``surrogateescape``
    gives it, in a form a UTF-8 report (Markdown, HTML, JSON) can hold."""
    return text if text.isascii() else text.translate(_UNENCODABLE)


def utf8_problem(name: str) -> str | None:
    """Why the file name ``name`` (as ``os.fsdecode`` gives it) is not valid UTF-8, naming its first bad
    byte; None when it is."""
    if name.isascii():
        return None
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = ord(name[e.start])
        first = f"byte 0x{bad - 0xDC00:02x}" if 0xDC80 <= bad <= 0xDCFF else f"U+{bad:04X}"
        return f"its name is not valid UTF-8 ({first})"
    return None


class TileproofError(Exception):
    """Any error tileproof reports as one line and exit status 2."""

    def __str__(self) -> str:
        return one_line(super().__str__())


class RecordError(TileproofError):
    """A record, lesson or config file that cannot be read as expected."""

    def __init__(self, path: Path | str, field: str, problem: str, fix: str):
        self.path, self.field, self.problem, self.fix = str(path), field, problem, fix
        super().__init__(str(self))

    def __reduce__(self):  # pickled as its fields (a forked helper's error raised in the main process)
        return type(self), (self.path, self.field, self.problem, self.fix)

    def __str__(self) -> str:
        where = f"{self.path}: {self.field}: " if self.field else f"{self.path}: "
        return one_line(f"{where}{self.problem} (fix: {self.fix})")


class NotKept(TileproofError):
    """An error after which nothing a session wrote is kept: ``store.whole`` removes its records and
    transcripts, and the line says so."""


class DiskFull(NotKept):
    """A record or transcript could not be written: no space (or quota) left where it goes."""

    def __init__(self, path: Path | str, strerror: str):
        self.path, self.strerror = str(path), strerror
        super().__init__(str(self))

    def __reduce__(self):
        return type(self), (self.path, self.strerror)

    def __str__(self) -> str:
        return one_line(f"{self.path}: cannot be written ({self.strerror}) (fix: free space on the file system "
                        f"that holds it, then run again)")


class KeyExposed(NotKept):
    """A record is not signed: the key that would sign it was in what a program printed or left."""


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

    def __reduce__(self):
        return type(self), (self.path, self.kind, self.problem, self.fix, self.field)
