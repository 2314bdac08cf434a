"""Writing many record files once, with one durable barrier instead of one ``fsync`` per file.

``store.write_once`` fsyncs each file before linking it to its name: right for one record, and an fsync per
file for a fleet merge. :func:`copy_once` keeps its promises for a batch:

1. every file is copied to a staging folder first (``<root>/.tileproof-cache/merge/<token>/<n>/``, a
   folder per ``CHUNK`` files, on the tree's own file system, ignored by git), mode 0644, nothing fsynced;
2. one ``os.sync()``: every staged byte is on disk before any final name exists;
3. each staged file is hard-linked to its final name (``os.link`` fails when the name exists: nothing
   is ever overwritten; a name a concurrent writer made with the same bytes is that writer's, and
   different bytes are a :class:`store`-style refusal, one line), and its staging name removed;
4. one more ``os.sync()``: the new names are on disk.

A crash before step 3 leaves no final name (the staging folder is ignored, and can be deleted); a crash
during or after it leaves only complete files under their names (their bytes were durable first). Either
way a rerun of the same merge completes it: a file already in place with the same bytes is a no-op.

The cost of a batch is the kernel's (creating the inodes and folders), not the disk's: two barriers, whatever
the number of files. Where the time goes at fleet scale: docs/benchmarks.md, "A merge's writes (fleet_scale)".
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from tileproof.records.cache_folder import FOLDER, ignored_folder, refusal
from tileproof.records.errors import TileproofError

STAGING = "merge"
FILE_MODE = 0o644
CHUNK = 1000
"""Files staged in one folder of the staging folder (``<staging>/<n>/``): 400 folders of 1,000 names, not
one folder of 400,000 (creating files only: 7.9 s of system time against 11.9 s)."""


def copy_once(root: Path, pairs: Iterable[tuple[str, Path | str]], same: Callable[[Path, Path], bool]) -> int:
    """Copy each (path relative to ``root``, source file) to ``root/path``, once, as the module docstring
    says; ``same``: whether two files hold the same bytes (a name made meanwhile by another writer).
    Returns how many files were written."""
    pairs = list(pairs)
    if not pairs:
        return 0
    refused = refusal(Path(root), Path(root) / FOLDER, None)  # a committed link would stage outside the tree
    if refused is not None:
        raise TileproofError(f"merge staging: {refused}")
    staging = ignored_folder(Path(root) / FOLDER) / STAGING / secrets.token_hex(8)
    staging.mkdir(parents=True)
    base, stage = os.fspath(root), os.fspath(staging)
    try:
        staged = [(os.path.join(stage, str(i // CHUNK), str(i)), os.path.join(base, rel), os.fspath(src))
                  for i, (rel, src) in enumerate(pairs)]
        _stage_all([staged[i:i + CHUNK] for i in range(0, len(staged), CHUNK)], _umask_narrows())
        os.sync()  # every staged byte durable before any final name exists
        _make_folders(sorted({os.path.dirname(dest) for _tmp, dest, _src in staged}))
        written = sum(_place(tmp, dest, same) for tmp, dest, _src in staged)
        os.sync()  # the new names durable
        return written
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stage_all(chunks: list[list[tuple[str, str, str]]], chmod: bool) -> None:
    """Each chunk's sources staged into a folder of its own, one file after another. Not in threads: the
    time is the kernel's, creating inodes under locks every thread shares (the inode hash's), so threads only
    add CPU and wall time (docs/benchmarks.md, "A merge's writes (fleet_scale)")."""
    for chunk in chunks:
        os.mkdir(os.path.dirname(chunk[0][0]))
        for tmp, _dest, src in chunk:
            _stage(src, tmp, chmod)


def _umask_narrows() -> bool:
    """Whether this process's umask takes bits from ``FILE_MODE`` (then each staged file is chmodded):
    Linux says the umask in /proc; where it cannot be read, assume it does."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return bool(int(line.split()[1], 8) & FILE_MODE)
    except (OSError, ValueError):
        pass
    return True


def _make_folders(folders: list[str]) -> None:
    """Each folder made where missing, as ``os.makedirs(exist_ok=True)`` would, but one ``mkdir`` for a
    folder whose parent this call already made or found (sorted: parents come first)."""
    there: set[str] = set()
    for folder in folders:
        if os.path.dirname(folder) in there:
            try:
                os.mkdir(folder)
            except FileExistsError:
                if not os.path.isdir(folder):
                    raise
        else:
            os.makedirs(folder, exist_ok=True)
        there.add(folder)


def _stage(src: str, tmp: str, chmod: bool = True) -> None:
    """``src``'s bytes into the new file ``tmp`` (mode 0644; ``chmod``: the umask may have narrowed it):
    copied by the kernel (``copy_file_range``), or read and written where it cannot."""
    fd_in = os.open(src, os.O_RDONLY)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            if chmod:
                os.fchmod(fd, FILE_MODE)
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
