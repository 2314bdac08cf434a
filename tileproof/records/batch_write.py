"""Writing many record files once, with one durable barrier instead of one ``fsync`` per file.

``store.write_once`` fsyncs each file before linking it to its name: right for one record, and 400,000
fsyncs for a fleet merge. :func:`copy_once` keeps its promises for a batch:

1. every file is copied to a staging folder first (``<root>/.tileproof-cache/merge/<token>/``, on the
   tree's own file system, ignored by git), mode 0644, nothing fsynced;
2. one ``os.sync()``: every staged byte is on disk before any final name exists;
3. each staged file is hard-linked to its final name (``os.link`` fails when the name exists: nothing
   is ever overwritten; a name a concurrent writer made with the same bytes is that writer's, and
   different bytes are a :class:`store`-style refusal, one line), and its staging name removed;
4. one more ``os.sync()``: the new names are on disk.

A crash before step 3 leaves no final name (the staging folder is ignored, and can be deleted); a crash
during or after it leaves only complete files under their names (their bytes were durable first). Either
way a rerun of the same merge completes it: a file already in place with the same bytes is a no-op.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from tileproof.records.errors import TileproofError
from tileproof.records.file_index import FOLDER, ignored_folder

STAGING = "merge"
FILE_MODE = 0o644


def copy_once(root: Path, pairs: Iterable[tuple[str, Path]], same: Callable[[Path, Path], bool]) -> int:
    """Copy each (path relative to ``root``, source file) to ``root/path``, once, as the module docstring
    says; ``same``: whether two files hold the same bytes (a name made meanwhile by another writer).
    Returns how many files were written."""
    pairs = list(pairs)
    if not pairs:
        return 0
    staging = ignored_folder(Path(root) / FOLDER) / STAGING / secrets.token_hex(8)
    staging.mkdir(parents=True)
    base, stage = os.fspath(root), os.fspath(staging)
    try:
        staged = [(os.path.join(stage, str(i)), os.path.join(base, rel), os.fspath(src))
                  for i, (rel, src) in enumerate(pairs)]
        for tmp, _dest, src in staged:
            _stage(src, tmp)
        os.sync()  # every staged byte durable before any final name exists
        for folder in sorted({os.path.dirname(dest) for _tmp, dest, _src in staged}):
            os.makedirs(folder, exist_ok=True)
        written = sum(_place(tmp, dest, same) for tmp, dest, _src in staged)
        os.sync()  # the new names durable
        return written
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stage(src: str, tmp: str) -> None:
    """``src``'s bytes into the new file ``tmp`` (mode 0644): copied by the kernel (``copy_file_range``),
    or read and written where it cannot."""
    fd_in = os.open(src, os.O_RDONLY)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)  # the umask may have narrowed it
            try:
                while os.copy_file_range(fd_in, fd, 1 << 30):
                    pass
            except OSError:  # a file system or kernel without it: the bytes the call did not copy, by hand
                while chunk := os.read(fd_in, 1 << 20):
                    os.write(fd, chunk)
        finally:
            os.close(fd)
    finally:
        os.close(fd_in)


def _place(tmp: str, dest: str, same: Callable[[Path, Path], bool]) -> int:
    try:
        os.link(tmp, dest)
    except FileExistsError:
        if same(Path(tmp), Path(dest)):
            return 0  # another writer put the same bytes there meanwhile
        raise TileproofError(f"{dest}: already exists with other bytes; records and evidence are never "
                             "overwritten (fix: find which host changed it after writing, and restore it)") from None
    finally:
        os.unlink(tmp)
    return 1
