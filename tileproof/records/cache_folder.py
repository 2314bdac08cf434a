"""The tree's local cache folder (``.tileproof-cache``, ignored by git): where the catalog keeps its index and a
fleet merge stages its files, and the one rule for when a folder there may be used at all (:func:`refusal`)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

FOLDER = ".tileproof-cache"
DATABASE = "index.sqlite"
DATABASE_FILES = (DATABASE, f"{DATABASE}-wal", f"{DATABASE}-shm", f"{DATABASE}-journal", ".gitignore")
"""The files the index folder holds (SQLite's own beside the database): each a regular file, or absent."""

Tracked = Callable[[Path, str], "str | None"]
"""What git tracks under a folder of the tree at a root (the folder relative to it): the first such path, or None
(``runner.git_history.tracked_under``)."""


def ignored_folder(folder: Path) -> Path:
    """``folder``, made when missing, holding a ``.gitignore`` of ``*`` (git never shows or commits it)."""
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# tileproof's local cache (the verified-file index, merge staging): never committed\n*\n")
    return folder


def refusal(root: Path, folder: Path, tracked: Tracked | None) -> str | None:
    """Why the index folder ``folder`` of the tree at ``root`` is not used (one line), or None. Inside the tree it
    must be a plain folder below plain folders (a committed link would have the index read and written elsewhere)
    that git tracks nothing under (``tracked``; None: not asked); anywhere, the files it holds
    (:data:`DATABASE_FILES`) are regular files or absent. Nothing is made before this is asked."""
    root, folder = Path(os.path.abspath(root)), Path(os.path.abspath(folder))
    inside = folder == root or root in folder.parents
    if inside:
        rel = folder.relative_to(root)
        for depth in range(1, len(rel.parts) + 1):
            part = Path(*rel.parts[:depth])
            try:
                st = os.lstat(root / part)
            except FileNotFoundError:
                break
            except OSError as e:
                return f"{root / part}: cannot be examined ({e.strerror}); not used"
            if stat.S_ISLNK(st.st_mode):
                return (f"{root / part}: is a link (to {os.readlink(root / part)}), not a folder; nothing is read or "
                        "written through it (fix: remove the link, and `git rm` it if committed)")
            if not stat.S_ISDIR(st.st_mode):
                return f"{root / part}: is not a folder; not used (fix: remove it)"
    for name in DATABASE_FILES:
        try:
            st = os.lstat(folder / name)
        except FileNotFoundError:
            continue
        except OSError as e:
            return f"{folder / name}: cannot be examined ({e.strerror}); not used"
        if not stat.S_ISREG(st.st_mode):
            return (f"{folder / name}: is not a regular file (a link or another kind); nothing is read or written "
                    f"through it (fix: delete {folder})")
    if inside and tracked is not None:
        found = tracked(root, folder.relative_to(root).as_posix())
        if found is not None:
            return (f"{found}: tracked by git (an index is never committed: one made elsewhere is never used); not "
                    f"used (fix: git rm -r --cached {folder.relative_to(root).as_posix()}, and commit)")
    return None
