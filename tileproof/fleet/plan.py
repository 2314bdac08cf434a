"""From "these lessons on these GPU kinds" to a typed job plan: pure, nothing started.

One Slurm job array per GPU kind (a kind's tasks share its ``--constraint`` and
``--gres``, which is what an array can express), one array task per lesson; the
task with index ``i`` of kind ``k`` runs lesson ``lessons[i]`` in its own git
worktree at ``tasks/<k>/<lesson>/checkout`` of the same commit and writes its
records there only. A dependent job merges them all (``afterany``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from tileproof.records.cluster import Cluster, GpuKind
from tileproof.records.errors import TileproofError
from tileproof.records.models import Model

PLAN_FILE = "plan.json"
SUBMITTED_FILE = "submitted.json"
MATRIX_FILE = "matrix.json"


class Task(Model):
    """One (lesson, GPU kind): one array task."""

    kind: str
    index: int = Field(ge=0)
    """``SLURM_ARRAY_TASK_ID`` within its kind's array."""
    lesson: str
    programs: list[str]
    """The lesson's programs at plan time: one run record each is expected."""
    folder: str
    """Relative to the fleet folder: ``tasks/<kind>/<lesson>``; the worktree is its ``checkout/``."""


class KindArray(Model):
    """One job array: every lesson on one kind."""

    kind: str
    spec: GpuKind
    tasks: list[Task]


class Plan(Model):
    """What ``tileproof fleet submit`` asks of Slurm, written to ``<folder>/plan.json`` before any job."""

    fleet_version: Literal[1]
    fleet_id: str
    repo: str
    """Absolute path of the repository the tasks check out and the merge writes into."""
    commit: str
    """The commit every task's worktree checks out."""
    python: str
    """The interpreter every job starts (``python -m tileproof fleet ...``)."""
    folder: str
    """Absolute fleet folder: plan, scripts, logs, task worktrees, the matrix."""
    cluster: Cluster
    run_args: list[str] = []
    """Extra arguments for each task's ``tileproof run`` (e.g. ``--timeout 600``)."""
    arrays: list[KindArray]

    def task(self, kind: str, index: int) -> Task:
        array = next((a for a in self.arrays if a.kind == kind), None)
        if array is None or not 0 <= index < len(array.tasks):
            raise TileproofError(f"{self.folder}/{PLAN_FILE}: no task {kind}[{index}] in this plan "
                                 f"(fix: run the array that tileproof fleet submit wrote)")
        return array.tasks[index]

    def checkout(self, task: Task) -> Path:
        return Path(self.folder) / task.folder / "checkout"


class ArrayResult(Model):
    """What sbatch answered for one kind's array."""

    kind: str
    job_id: str | None
    """The array's job id; None when sbatch refused it."""
    refused: str | None
    """sbatch's error line when it refused the array (e.g. no node has the feature)."""


class Submitted(Model):
    """``<folder>/submitted.json``: written after the arrays, before the merge job."""

    fleet_version: Literal[1]
    arrays: list[ArrayResult]


@dataclass(frozen=True)
class Checkout:
    """What every task of a fleet runs: the repository, the commit its worktrees check out, and the Python that
    runs ``tileproof`` there (unless the cluster file names one)."""

    repo: Path
    commit: str
    python: str


def make_plan(*, cluster: Cluster, lesson_programs: dict[str, list[str]], kinds: list[str], source: Checkout,
              folder: Path, fleet_id: str, run_args: list[str] | None = None) -> Plan:
    """lessons x kinds → one array per kind; unknown kinds and lessons without programs are errors."""
    unknown = [k for k in kinds if k not in cluster.kinds]
    if unknown:
        raise TileproofError(f"--kind {unknown[0]}: not in cluster {cluster.name!r} "
                             f"(fix: one of {', '.join(cluster.kinds)}, or add it to the cluster file)")
    empty = [lid for lid, progs in lesson_programs.items() if not progs]
    if empty:
        raise TileproofError(f"lessons/{empty[0]}.md: programs: empty; nothing to run (fix: list its programs)")
    if not lesson_programs:
        raise TileproofError("no lessons selected (fix: name lessons, or add lessons/<id>.md)")
    arrays = [
        KindArray(kind=k, spec=cluster.kinds[k], tasks=[
            Task(kind=k, index=i, lesson=lid, programs=progs, folder=f"tasks/{k}/{lid}")
            for i, (lid, progs) in enumerate(lesson_programs.items())
        ])
        for k in (kinds or list(cluster.kinds))
    ]
    return Plan(fleet_version=1, fleet_id=fleet_id, repo=str(source.repo), commit=source.commit,
                python=cluster.python or source.python,
                folder=str(folder), cluster=cluster, run_args=list(run_args or []), arrays=arrays)
