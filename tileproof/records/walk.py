"""Walking runs/ and evidence/ without following anything: every entry listed from its folder, a refused one
handed to the caller's ``refuse`` (``InputRefused``: the path and why), never skipped; and reading one record file
through ``safe_read``."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator

from tileproof.records import store
from tileproof.records.errors import InputRefused, utf8_problem
from tileproof.records.safe_read import LIMITS, read_bytes

Refuse = Callable[[str, InputRefused], None]
"""Told of each entry refused by the walk: its root-relative path and why."""

NAME_FIX = "give it a UTF-8 name"
"""The fix of a name that is not valid UTF-8."""


def entries(root: str, folder: str, refuse: Refuse) -> Iterator[tuple[str, os.DirEntry]]:
    """(root-relative POSIX path, ``os.DirEntry``) of every entry under ``root/folder`` that is not a folder.

    Nothing is followed or opened here: ``os.scandir`` reports each entry's type
    from the directory itself, a link (to a folder too) is yielded as an entry
    (``safe_read`` then refuses it), and a folder that cannot be listed is
    handed to ``refuse`` (``input-unreadable``), never skipped silently. Every folder below
    ``folder`` that the walk enters was listed as a folder, not a link, by the one above it. An entry
    whose path is not valid UTF-8 (``os.fsdecode``'s surrogates) is handed to it too
    (``input-not-utf8``), and not yielded: no reader, index or report
    downstream has to hold a name it cannot encode (no file tileproof writes has one)."""
    stack = [folder]
    while stack:
        rel = stack.pop()
        try:
            listing = os.scandir(os.path.join(root, rel))
        except FileNotFoundError:
            continue
        except OSError as err:
            refuse(rel, InputRefused(rel, "unreadable", f"cannot be listed ({err.strerror})", "check its permissions"))
            continue
        with listing:
            for entry in listing:
                path = f"{rel}/{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    stack.append(path)
                elif (problem := utf8_problem(path)) is not None:
                    refuse(path, InputRefused(path, "not-utf8", problem, NAME_FIX))
                else:
                    yield path, entry


def walk(root: str, folder: str, refuse: Refuse,
         stats: dict[str, os.stat_result] | None = None) -> Iterator[str]:
    """Every entry under ``root/folder`` that is not a folder, as a root-relative POSIX path (:func:`entries`).
    ``stats``: filled with each entry's ``lstat`` (what the catalog's index compares with its entries),
    when given."""
    for path, entry in entries(root, folder, refuse):
        if stats is not None:
            with contextlib.suppress(OSError):  # gone since it was listed: its reader says so
                stats[path] = entry.stat(follow_symlinks=False)
        yield path


def read_record(root: str, name: str) -> bytes:
    """One record file ``runs/<name>`` through ``safe_read`` (a plain file, never a link, at most 8 MiB)."""
    return read_bytes(root, f"{store.RUNS}/{name}", "record")


def vouches(st: os.stat_result) -> bool:
    """Whether a record file's ``lstat`` may vouch for its content (below a real runs/): a regular file within the
    record cap (any other is read, and refused)."""
    return stat.S_ISREG(st.st_mode) and st.st_size <= LIMITS["record"]


def real_folders(root: str, folder: str) -> bool:
    """Whether every component of ``folder`` under ``root`` is a real folder (no link), as ``safe_read`` checks
    each file's path: only then does a walk's ``lstat`` vouch for the files below it."""
    parts = folder.split("/")
    try:
        return all(stat.S_ISDIR(os.lstat(os.path.join(root, *parts[:i + 1])).st_mode) for i in range(len(parts)))
    except OSError:
        return False
