"""One side of ``tileproof diff``: a tree read into a ``judge.diff.Snapshot``, and a commit's tree read the same way.

``read(root, label)`` gathers through ``gather.tree.Tree`` (every record, each examined once under the tree's own
trust state and history) and each lesson's one verdict; ``at_commit(repo, commit)`` reads a detached checkout of
a commit (``runner.worktree.checkout``, removed afterwards), so a commit is judged exactly as a checkout of it
would be. ``resolve(repo, rev)`` names the commit a reviewer means.
"""

from __future__ import annotations

from pathlib import Path

from tileproof.claims.matrix import claim_matrix
from tileproof.claims.status import claims_records
from tileproof.gather.tree import Tree
from tileproof.judge import diff
from tileproof.records import lessons, store
from tileproof.records.errors import TileproofError
from tileproof.records.history_check import NoHistory
from tileproof.records.models import BenchRecord
from tileproof.records.safe_read import read_file
from tileproof.runner import git_history, worktree

WORKING_TREE = "working tree"


class BadRevision(TileproofError):
    """A name ``diff`` cannot take as one commit of the repository."""


def resolve(repo: Path, rev: str) -> str:
    """The full id of the commit ``rev`` names: a full id, an abbreviation of exactly one commit, or a ref
    (``HEAD``, a branch, a tag). ``diff`` decides no trust, so it takes what git takes; what it compared is
    printed by full id. One line otherwise."""
    if isinstance(git_history.object_format(repo), NoHistory):
        raise BadRevision(f"{repo}: no git history to find {rev!r} in (fix: run in a clone of the repository)")
    prefix = rev.lower()
    if 4 <= len(prefix) < 40 and all(ch in "0123456789abcdef" for ch in prefix):
        found = git_history.commits_by_prefix(repo, prefix)
        if len(found) > 1:
            raise BadRevision(f"{rev}: abbreviates {len(found)} commits ({', '.join(f[:12] for f in found)}) "
                              f"(fix: give more digits)")
        if len(found) == 1 and not git_history.refs_named(repo, rev):
            return found[0]
    full = git_history.resolve_commit(repo, rev)
    if full is None:
        raise BadRevision(f"{rev}: names no commit of this repository (fix: a commit id, a branch, a tag or HEAD; "
                          f"git log --oneline lists them)")
    return full


def _digests(root: Path) -> dict[str, str]:
    """Run id → sha256 of its file under runs/, read through the one reader (a link or oversized file: one line)."""
    folder = Path(root) / store.RUNS
    return {name.removesuffix(".json"): store.sha256_bytes(read_file(folder / name, "record", f"runs/{name}"))
            for name in store.record_names(root)}


def read(root: Path, label: str = WORKING_TREE, trust_root: str | None = None) -> diff.Snapshot:
    """The tree at ``root`` as ``diff`` compares it."""
    root = Path(root)
    tree = Tree.load(root, trust_root, every=True)
    states = {}
    for lesson in lessons.load_all(root):
        states[lesson.id] = diff.lesson_state(tree.verdict(lesson))
    matrix = claim_matrix(claims_records(root, tree.records))
    claims = {(doc, claim, str(release)): (cell.verdict, cell.run_id)
              for (doc, claim), row in matrix.cells.items() for release, cell in row.items()}
    bench = [e for e in tree.records if isinstance(e.record, BenchRecord)]
    return diff.Snapshot(label, states, _digests(root), claims, bench)


def at_commit(repo: Path, commit: str, trust_root: str | None = None) -> diff.Snapshot:
    """The tree of ``commit`` (a full id), read from a temporary checkout of it."""
    with worktree.checkout(repo, commit) as path:
        return read(path, commit, trust_root)
