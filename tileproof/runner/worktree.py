"""git for fleet tasks: a worktree of one commit per task, and the files a task added there."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tileproof.records.errors import TileproofError


class WorktreeError(TileproofError):
    """git could not make or read a task's worktree."""


def _git(*args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True)
    except OSError as e:
        raise WorktreeError(f"git: cannot start ({e}) (fix: install git)") from None


def head(repo: Path) -> str:
    proc = _git("-C", str(repo), "rev-parse", "--verify", "HEAD")
    if proc.returncode != 0:
        raise WorktreeError(f"{repo}: not a git checkout with a commit (fix: run from the repository, commit first)")
    return proc.stdout.strip()


def add(repo: Path, path: Path, commit: str) -> None:
    """``git worktree add --detach PATH COMMIT``; an existing worktree there is an error."""
    proc = _git("-C", str(repo), "worktree", "add", "--detach", str(path), commit)
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise WorktreeError(f"{path}: git worktree add failed: {why} (fix: remove the folder and rerun the task)")


def untracked(checkout: Path, folders: list[str]) -> list[str]:
    """Files under ``folders`` that git does not track (ignored ones included): what the task wrote."""
    proc = _git("-C", str(checkout), "ls-files", "--others", "-z", "--", *folders)
    if proc.returncode != 0:
        raise WorktreeError(f"{checkout}: git ls-files failed: {proc.stderr.strip()}")
    return sorted(p for p in proc.stdout.split("\0") if p)
