"""git worktrees: one commit per fleet task (and the files a task added there); a commit's tree to read (``checkout``,
for ``diff``)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tileproof.records.errors import TileproofError
from tileproof.runner.query import Answer, ask

GIT_TIMEOUT_S = 600.0
"""``git worktree add`` checks a whole tree out; one that takes longer is stopped."""


class WorktreeError(TileproofError):
    """git could not make or read a task's worktree."""


def _git(*args: str) -> Answer:
    return ask(["git", *args], timeout=GIT_TIMEOUT_S, fix="install git")


def head(repo: Path) -> str:
    proc = _git("-C", str(repo), "rev-parse", "--verify", "HEAD")
    if proc.exit_code != 0:
        raise WorktreeError(f"{repo}: not a git checkout with a commit (fix: run from the repository, commit first)")
    return proc.text().strip()


def add(repo: Path, path: Path, commit: str) -> None:
    """``git worktree add --detach PATH COMMIT``; an existing worktree there is an error."""
    proc = _git("-C", str(repo), "worktree", "add", "--detach", str(path), commit)
    if proc.exit_code != 0:
        raise WorktreeError(f"{path}: git worktree add failed: {proc.last_error()} "
                            "(fix: remove the folder and rerun the task)")


def untracked(checkout: Path, folders: list[str]) -> list[str]:
    """Files under ``folders`` that git does not track (ignored ones included): what the task wrote."""
    proc = _git("-C", str(checkout), "ls-files", "--others", "-z", "--", *folders)
    if proc.exit_code != 0:
        raise WorktreeError(f"{checkout}: git ls-files failed: {proc.last_error()}")
    return sorted(p for p in proc.text().split("\0") if p)


def remove(repo: Path, path: Path) -> None:
    """``git worktree remove --force PATH``, then ``git worktree prune``: the checkout and git's note of it gone."""
    _git("-C", str(repo), "worktree", "remove", "--force", str(path))
    _git("-C", str(repo), "worktree", "prune")


@contextlib.contextmanager
def checkout(repo: Path, commit: str) -> Iterator[Path]:
    """A detached checkout of ``commit`` (a full id) in a temporary folder beside nothing of ``repo``'s tree,
    removed on leaving: a tree to read, with the repository's history behind it."""
    with tempfile.TemporaryDirectory(prefix="tileproof-at-") as parent:
        path = Path(parent) / commit[:12]
        add(repo, path, commit)
        try:
            yield path
        finally:
            remove(repo, path)
