"""The one reader for every file tileproof takes as input.

Records, transcripts, lessons, claims files and the tolerance table are read through :func:`read_bytes` (or
:func:`read_text`, :func:`read_evidence`), which accepts only a regular file inside the repository, under the size
cap of its kind (:data:`LIMITS`); :func:`parse_json` and :func:`parse_yaml` cap nesting and YAML's node count. Every
refusal is one :class:`InputRefused` line whose ``kind`` names the audit finding (:data:`RULES`). :func:`stream`
hands out the same file's bytes in chunks, checked the same way, for a caller that hashes without holding the file
whole (the history check). The rules: docs/threat-model.md, "Untrusted input files".
"""

from __future__ import annotations

import copy
import errno
import json
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml

from tileproof.records.errors import InputProblem, InputRefused, RecordError

InputKind = Literal["record", "evidence", "lesson", "claims", "tolerances", "build", "lock", "left", "handover",
                    "settings"]
"""What an input file is; it sets the size cap and whether links are allowed. ``left``: a file a program
left in its scratch folder (its check report, the exception its launcher wrote, a bench results file);
``handover``: an output or input array it handed over (``records.handover``); ``settings``: the course's
``pyproject.toml`` (``records.course``)."""

MIB = 1 << 20
LIMITS: dict[InputKind, int] = {
    "record": 8 * MIB,
    "evidence": 64 * MIB,
    "lesson": 4 * MIB,
    "claims": 4 * MIB,
    "tolerances": 1 * MIB,
    "build": 16 * MIB,
    "lock": 1 * MIB,
    "left": 16 * MIB,
    "handover": 65 * MIB,
    "settings": 1 * MIB,
}
"""Largest file of each kind tileproof reads (the largest committed record is 0.2 MiB; a handed-over array is at
most ``records.handover.CAP_BYTES``, 64 MiB, plus its ``.npy`` header)."""

CHUNK = 1 * MIB
"""Most bytes read at once (:func:`stream` hands them out one chunk at a time)."""

NO_LINKS: frozenset[InputKind] = frozenset({"record", "evidence", "left", "handover"})
"""Kinds that may not be a symbolic link nor sit under one: runs/ and evidence/ hold plain files, and a
program leaves and hands over plain files."""

ONE_NAME: frozenset[InputKind] = frozenset({"left", "handover"})
"""Kinds that may not be a hard link either: a file a program leaves is one it wrote, never a second name of
another file (``/etc/shadow`` linked into its scratch folder)."""

MAX_DEPTH = 64
"""Deepest nesting of lists and mappings accepted in JSON or YAML input."""

MAX_NODES = 200_000
"""Most YAML nodes accepted, counting each alias as the whole node it repeats."""

RULES: dict[InputProblem, str] = {
    "missing": "an input file does not exist",
    "symlink": "a file in runs/ or evidence/ is a symbolic link (records and transcripts must be plain files)",
    "special-file": "an input is a FIFO, socket, device or directory instead of a regular file",
    "outside-repo": "an input path, or the file a link points to, lies outside the repository",
    "too-large": "an input file is larger than the cap for its kind",
    "not-utf8": "an input text file is not valid UTF-8",
    "too-deep": "a JSON or YAML input nests deeper, or expands to more nodes, than tileproof reads",
    "unreadable": "an input file cannot be opened or read (permissions, I/O error, replaced while opened)",
}
"""Finding id → what it catches, one per :data:`InputProblem` (the audit lists them)."""

_TYPES = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _real_root(root: str) -> str:
    """``root`` with every link resolved; a relative root is taken from the working directory of now (one process
    may run commands from several: the cache keys absolute paths only)."""
    return _real_path(os.path.abspath(root))


@lru_cache(maxsize=64)
def _real_path(absolute: str) -> str:
    return os.path.realpath(absolute)


def _inside(real: str, real_root: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def relative(root: Path | str, path: Path | str) -> str:
    """``path`` as a POSIX path relative to ``root`` (lexically: no link is followed).

    A relative ``path`` is taken relative to ``root``. Raises ``outside-repo``
    for an absolute path elsewhere or one that climbs out with ``..``.
    """
    root_s, path_s = os.fspath(root), os.fspath(path)
    if "\0" in path_s:
        raise InputRefused(path_s, "unreadable", "the path holds a NUL byte, which no file name can",
                           "name the file without control characters")
    if os.path.isabs(path_s):
        for base in (os.path.abspath(root_s), _real_root(root_s)):
            rel = os.path.relpath(os.path.normpath(path_s), base)
            if rel != os.pardir and not rel.startswith(os.pardir + os.sep):
                break
        else:
            raise InputRefused(path_s, "outside-repo", f"is outside the repository {root_s}",
                               "keep every input inside the repository")
    else:
        rel = os.path.normpath(path_s)
    rel = rel.replace(os.sep, "/")
    if rel in ("", ".") or rel == ".." or rel.startswith("../"):
        raise InputRefused(path_s, "outside-repo", f"is not a file inside the repository {root_s}",
                           "name a file inside the repository")
    return rel


def _kind_of(mode: int) -> str | None:
    return next((name for test, name in _TYPES if test(mode)), None)


def _resolve(root: str, rel: str, kind: InputKind, shown: str) -> tuple[str, os.stat_result]:
    """(path to open, its lstat) after checking every component below ``root``."""
    real_root = _real_root(root)
    cur = real_root
    parts = rel.split("/")
    for i, part in enumerate(parts):
        here = cur + os.sep + part
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            raise InputRefused(shown, "missing", "file is missing", "restore it from git") from None
        except NotADirectoryError:
            raise InputRefused(shown, "missing", f"'{'/'.join(parts[:i])}' is not a folder",
                               "restore it from git") from None
        except OSError as e:
            raise InputRefused(shown, "unreadable", f"cannot be read ({e.strerror})", "check its permissions") from None
        if stat.S_ISLNK(st.st_mode):
            here, st = _follow(here, real_root, "/".join(parts[:i + 1]), kind, shown)
        cur = here
    return cur, st


def _follow(here: str, real_root: str, link: str, kind: InputKind, shown: str) -> tuple[str, os.stat_result]:
    """(target, its stat) of the link ``here``, where links are allowed and stay inside the repository."""
    if kind in NO_LINKS:
        raise InputRefused(shown, "symlink", f"'{link}' is a symbolic link",
                           "replace it with the regular file it stands for (records and evidence are never links)")
    target = os.path.realpath(here)
    if not _inside(target, real_root):
        raise InputRefused(shown, "outside-repo", f"'{link}' is a link to {target}, outside the repository",
                           "keep every input inside the repository")
    try:
        return target, os.stat(target)
    except OSError:
        raise InputRefused(shown, "missing", f"'{link}' is a dangling link", "restore the file it points to") from None


def read_bytes(root: Path | str, path: Path | str, kind: InputKind, shown: str | None = None) -> bytes:
    """The bytes of one regular file inside ``root``, or one :class:`InputRefused` line.

    ``path``: relative to ``root`` or absolute under it; ``shown``: how errors
    name the file (default: its path relative to ``root``).
    """
    rel = relative(root, path)
    return _read(os.fspath(root), rel, kind, shown or rel)


def _open(root: str, rel: str, kind: InputKind, shown: str) -> tuple[int, os.stat_result]:
    """(an open descriptor, its ``fstat``) of one regular file inside ``root``, checked as the module says:
    every component from ``lstat`` (a link is followed only where the kind allows it), no special
    file ever opened, the cap on the size ``lstat`` reports, ``O_NOFOLLOW | O_NONBLOCK``, and the
    file opened the one ``lstat`` saw. The caller closes the descriptor."""
    target, st = _resolve(root, rel, kind, shown)
    if not stat.S_ISREG(st.st_mode):
        kind_text = _kind_of(st.st_mode) or "not a regular file"
        raise InputRefused(shown, "special-file", f"is {kind_text}, not a regular file",
                           "replace it with a regular file")
    if kind in ONE_NAME and st.st_nlink != 1:
        raise InputRefused(shown, "special-file", f"is a hard link ({st.st_nlink} names for one file), "
                           "not a file of its own", "write the file itself, never a link to another")
    cap = LIMITS[kind]
    if st.st_size > cap:
        raise InputRefused(shown, "too-large", f"is {st.st_size} bytes; a {kind} file may have at most {cap}",
                           "keep the file under the cap (a bigger one is not what tileproof wrote)")
    try:
        fd = os.open(target, _FLAGS)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise InputRefused(shown, "symlink", "became a symbolic link while being opened",
                               "replace it with a regular file") from None
        raise InputRefused(shown, "unreadable", f"cannot be opened ({e.strerror})", "check its permissions") from None
    try:
        now = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise InputRefused(shown, "unreadable", f"cannot be read ({e.strerror})", "check the file system") from None
    if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or (
            kind in ONE_NAME and now.st_nlink != 1):
        os.close(fd)
        raise InputRefused(shown, "unreadable", "was replaced while being opened", "read it again when it is stable")
    return fd, now


def _chunks(fd: int, size: int, cap: int, shown: str, kind: InputKind) -> Iterator[bytes]:
    """The bytes of ``fd`` in chunks, at most ``cap`` of them: one byte more is ``too-large``."""
    left = cap + 1
    try:
        while left > 0:
            chunk = os.read(fd, min(left, max(size + 1, 1 << 16), CHUNK))
            if not chunk:
                return
            left -= len(chunk)
            if left <= 0:
                raise InputRefused(shown, "too-large",
                                   f"grew past {cap} bytes while being read; a {kind} file may have at most {cap}",
                                   "keep the file under the cap")
            yield chunk
    except OSError as e:
        raise InputRefused(shown, "unreadable", f"cannot be read ({e.strerror})", "check the file system") from None


def _read(root: str, rel: str, kind: InputKind, shown: str) -> bytes:
    fd, st = _open(root, rel, kind, shown)
    try:
        return b"".join(_chunks(fd, st.st_size, LIMITS[kind], shown, kind))
    finally:
        os.close(fd)


@contextmanager
def stream(root: Path | str, path: Path | str, kind: InputKind, shown: str | None = None,
           ) -> Iterator[tuple[int, Iterator[bytes]]]:
    """(size ``fstat`` reports, the file's bytes in chunks of at most :data:`CHUNK`) of one regular file
    inside ``root``, checked exactly as :func:`read_bytes` checks it, for a caller that hashes a file
    without holding it whole (the history check). Refusals are the same :class:`InputRefused` lines,
    raised on entry or while iterating (a file that grows past its cap)."""
    rel = relative(root, path)
    fd, st = _open(os.fspath(root), rel, kind, shown or rel)
    try:
        yield st.st_size, _chunks(fd, st.st_size, LIMITS[kind], shown or rel, kind)
    finally:
        os.close(fd)


def check_file(root: Path | str, path: Path | str, kind: InputKind, shown: str | None = None) -> None:
    """Every check :func:`read_bytes` makes before it reads, and nothing read: the file is opened the
    way the reader opens it and closed. Raises the same :class:`InputRefused` line."""
    rel = relative(root, path)
    fd, _st = _open(os.fspath(root), rel, kind, shown or rel)
    os.close(fd)


def listed_file_passes(path: str, dev: int, ino: int, kind: InputKind) -> bool:
    """Whether :func:`check_file` would accept the file at ``path``, answered with one open instead of
    its ``lstat`` of every component, for a caller that listed the file itself: ``ino`` is the inode
    its folder's listing gave (``os.DirEntry.inode()``), and the caller vouches that its type there
    was a regular file and that every folder between the repository and it is a real folder on
    device ``dev`` (``records.walk.entries`` enters only folders listed as folders).

    The file is opened the way the reader opens it (so an open that fails, for permissions or
    anything else, is seen here as it is there) and must then be that inode on that device, a
    regular file within its kind's cap. Never a refusal: False means "ask :func:`check_file`", which
    words the refusal, or finds none (a file on another device, a listing whose inode numbers differ
    from ``fstat``'s)."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    return stat.S_ISREG(st.st_mode) and st.st_ino == ino and st.st_dev == dev and st.st_size <= LIMITS[kind]


def decode(data: bytes, shown: str) -> str:
    """Strict UTF-8, or one ``not-utf8`` line naming the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputRefused(shown, "not-utf8", f"not UTF-8 (byte 0x{data[e.start]:02x})",
                           "save the file as UTF-8 text", field=f"byte {e.start}") from None


def read_text(root: Path | str, path: Path | str, kind: InputKind, shown: str | None = None) -> str:
    """:func:`read_bytes` decoded as strict UTF-8."""
    shown = shown or relative(root, path)
    return decode(read_bytes(root, path, kind, shown), shown)


def read_evidence(root: Path | str, relpath: str) -> bytes:
    """One transcript under ``evidence/``: a plain file, never a link, at most 64 MiB."""
    rel = relative(root, relpath)
    if not rel.startswith("evidence/"):
        raise InputRefused(relpath, "outside-repo", "is not under evidence/", "reference transcripts under evidence/")
    return _read(os.fspath(root), rel, "evidence", rel)


def read_file(path: Path | str, kind: InputKind, shown: str | None = None, root: Path | str | None = None) -> bytes:
    """:func:`read_bytes` for a caller that knows a file's path but not the repository.

    ``root`` defaults to the folder ``path`` is in: the file must then be a
    regular file there (a link only to a sibling; no link at all for records).
    """
    path = Path(path)
    return read_bytes(root if root is not None else path.parent, path.absolute(), kind, shown or str(path))


def read_file_text(path: Path | str, kind: InputKind, shown: str | None = None) -> str:
    """:func:`read_file` decoded as strict UTF-8."""
    shown = shown or str(path)
    return decode(read_file(path, kind, shown), shown)


# --- nesting ---------------------------------------------------------------------------


def _too_deep(shown: str, what: str) -> InputRefused:
    return InputRefused(shown, "too-deep", what, "flatten the data; tileproof never writes it this deep")


def check_depth(value: Any, shown: str) -> Any:
    """``value`` unchanged, or ``too-deep`` when lists/dicts nest past :data:`MAX_DEPTH` (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_DEPTH:
            raise _too_deep(shown, f"nests more than {MAX_DEPTH} levels deep")
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return value


def parse_json(text: str, shown: str, fix: str = "restore it from git") -> Any:
    """JSON text → value; a syntax error or excess nesting is one line."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(shown, f"line {e.lineno}", f"not valid JSON ({e.msg})", fix) from None
    except RecursionError:
        raise _too_deep(shown, f"nests more than {MAX_DEPTH} levels deep") from None
    except ValueError as e:  # e.g. an integer longer than Python converts
        raise RecordError(shown, "", f"not valid JSON ({str(e).splitlines()[0]})", fix) from None
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # each level opens one, so no deeper than that: the walk
        return value                                    # is spared (a record holds about 35; 100,000 are read)
    return check_depth(value, shown)


class _CappedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that counts depth and alias-expanded nodes while composing."""

    def __init__(self, stream: str, shown: str):
        super().__init__(stream)
        self.shown, self.depth = shown, 0
        self.sizes: dict[int, int] = {}

    def fetch_flow_collection_start(self, TokenClass):
        """``[`` or ``{``: refused at once past MAX_DEPTH flow levels, before PyYAML's scanner looks ahead
        over the whole line (each pending level is checked at every token: quadratic in the nesting)."""
        if self.flow_level >= MAX_DEPTH:
            raise _too_deep(self.shown, f"nests more than {MAX_DEPTH} levels deep")
        super().fetch_flow_collection_start(TokenClass)

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if id(node) not in self.sizes:  # an alias inside the node it names
                raise _too_deep(self.shown, "an alias refers to a node that contains it")
            return node
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _too_deep(self.shown, f"nests more than {MAX_DEPTH} levels deep")
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        self.sizes[id(node)] = 1 + self._children(node)
        return node

    def _children(self, node) -> int:
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for kv in node.value for n in kv]
        else:
            return 0
        total = 0
        for child in children:
            size = self.sizes.get(id(child))
            if size is None:  # an alias of a node still being composed: it contains itself
                raise _too_deep(self.shown, "an alias refers to a node that contains it")
            total += size
            if total > MAX_NODES:
                raise _too_deep(self.shown, f"expands (aliases included) to more than {MAX_NODES} nodes")
        return total


PARSED_KEPT = 64
"""Distinct YAML texts whose parsed value :func:`parse_yaml` keeps (``functools.lru_cache``)."""
PARSED_KEPT_CHARS = 1 * MIB
"""Longer texts are parsed every time, never kept."""


@lru_cache(maxsize=PARSED_KEPT)
def _kept(text: str) -> Any:
    """The value of ``text``, kept by the text itself (never by a name or path); a text that fails
    raises and is not kept."""
    return _compose(text, "")


def parse_yaml(text: str, shown: str) -> Any:
    """YAML text → value with ``safe_load`` semantics, nesting and size capped.

    Syntax errors stay ``yaml.YAMLError`` (callers name the line their way); a
    scalar Python cannot build (a 13th month, a 5,000-digit int) becomes one
    too; excess nesting is ``too-deep``.

    The value of a text parsed before is kept and each caller gets its own deep copy;
    a text that fails is parsed again under the caller's ``shown``, so every error names it.
    """
    if len(text) <= PARSED_KEPT_CHARS:
        try:
            return copy.deepcopy(_kept(text))
        except (yaml.YAMLError, InputRefused):
            pass  # parsed again below, so that the error names this caller's file
    return _compose(text, shown)


def _compose(text: str, shown: str) -> Any:
    loader = _CappedLoader(text, shown)
    try:
        return loader.get_single_data()
    except (ValueError, OverflowError) as e:
        what = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise yaml.YAMLError(f"a value cannot be built ({what})") from None
    finally:
        loader.dispose()


# --- build/ ----------------------------------------------------------------------------


def check_build_dir(root: Path | str, name: str = "build") -> Path:
    """``root/name``, refused with one line when it is not a folder inside the repository.

    A committed ``build`` link to elsewhere would make compile write outside the
    repository; a missing folder is fine (compile creates it).
    """
    path = Path(root) / name
    real_root = _real_root(os.fspath(root))
    if os.path.lexists(path):
        real = os.path.realpath(path)
        if not _inside(real, real_root):
            raise InputRefused(name, "outside-repo", f"resolves to {real}, outside the repository",
                               f"remove the '{name}' link; compile creates {name}/ itself")
        if not os.path.isdir(real):
            raise InputRefused(name, "special-file", "is not a folder", f"remove it; compile creates {name}/ itself")
    return path
