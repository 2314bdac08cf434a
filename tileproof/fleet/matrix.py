"""The lesson x GPU-kind matrix: what each task's records show, a missing one shown as a gap.

A cell reads only the records its task left (one folder per task or per CI
runner). It is ``passed`` only when every program of the lesson has a run
record, every one of them passed, its session was closed, and (where the kind
names one) the GPU's compute capability is the kind's. Anything missing is a
``gap``, never a pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import model_validator

from tileproof.records import store
from tileproof.records.errors import RecordError
from tileproof.records.models import Model, RunRecord, SessionRecord
from tileproof.runner.slurm import CUT_SHORT, JobState

CellOutcome = Literal["passed", "failed", "gated", "no-gpu", "toolchain-absent", "wrong-gpu", "gap", "refused",
                      "bad-record", "unverified"]
"""``refused``: the engine would not run this kind (e.g. no node has the feature);
``gap``: the task left fewer records than the lesson has programs, or no closing
session record (it died or never started); ``bad-record``: a record did not load;
``toolchain-absent``: a program's toolchain was not on the node (the run verdict of that name); ``unverified``: a
program passed by its own word only (tileproof could not recompute a check from what it handed over)."""

_ORDER: tuple[CellOutcome, ...] = ("refused", "bad-record", "gap", "wrong-gpu", "failed", "toolchain-absent",
                                   "unverified", "gated", "no-gpu", "passed")
"""Worst first: a cell shows the worst of its programs."""


class Cell(Model):
    lesson: str
    kind: str
    outcome: CellOutcome
    detail: str
    """One line: verdict counts, or what is missing and why."""
    runs: list[str] = []
    """The run ids the cell rests on."""
    task_state: JobState | None = None
    """From matrix_version 2: the state Slurm ended the cell's array task in (``TIMEOUT``: its time limit),
    as the merge job found it; None where no Slurm task ran it (a CI artifact, a refused kind) or Slurm no
    longer knew the task."""


MATRIX_VERSION: Final = 2
"""``Matrix.matrix_version`` written now: 2 may hold each cell's ``task_state``; 1 (still read) never does."""


class Matrix(Model):
    """``<fleet folder>/matrix.json``, written by the merge job."""

    matrix_version: Literal[1, 2]
    lessons: list[str]
    kinds: list[str]
    cells: list[Cell]
    merged: int
    """Files written into runs/ and evidence/ by the merge."""
    audit_exit: int | None
    """``tileproof audit``'s exit status after the merge; None when it did not run."""
    audit_line: str

    @model_validator(mode="after")
    def _fits_version(self) -> Matrix:
        if self.matrix_version < 2 and any(c.task_state is not None for c in self.cells):
            raise ValueError("matrices before matrix_version 2 hold no task_state")
        return self

    def passed(self) -> bool:
        return self.audit_exit == 0 and all(c.outcome == "passed" for c in self.cells)


def load_task_records(runs: list[Path]) -> tuple[list, list[str]]:
    """Records from a task's own files, and one line per file that did not load."""
    records, bad = [], []
    for path in runs:
        try:
            records.append(store.load_record(path))
        except RecordError as e:
            bad.append(str(e))
    return records, bad


def cell(lesson: str, kind: str, programs: list[str], records: list, bad: list[str],
         compute_capability: str | None) -> Cell:
    """One (lesson, kind) from the records its task left."""
    if bad:
        return Cell(lesson=lesson, kind=kind, outcome="bad-record", detail=bad[0])
    newest: dict[str, RunRecord] = {}
    for r in records:
        if isinstance(r, RunRecord) and r.program in programs and (r.program not in newest
                                                                     or r.created > newest[r.program].created):
            newest[r.program] = r
    closed = {r.session_id for r in records if isinstance(r, SessionRecord)}
    runs = [newest[p].run_id for p in programs if p in newest]
    missing = [p for p in programs if p not in newest]
    if missing:
        return Cell(lesson=lesson, kind=kind, outcome="gap", runs=runs,
                    detail=f"{len(newest)}/{len(programs)} programs recorded; none for {missing[0]}")
    open_ = sorted({r.environment.session_id for r in newest.values()} - closed)
    if open_:
        return Cell(lesson=lesson, kind=kind, outcome="gap", runs=runs,
                    detail=f"session {open_[0]} has no closing record (the task died mid-run)")
    outcomes = {p: _outcome(r, compute_capability) for p, r in newest.items()}
    worst = min(outcomes.values(), key=_ORDER.index)
    counts: dict[str, int] = {}
    for r in newest.values():
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    detail = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    if worst == "wrong-gpu":
        p = next(p for p, o in outcomes.items() if o == "wrong-gpu")
        gpu = newest[p].environment.gpu
        assert gpu is not None, "_outcome gives wrong-gpu only for a record with a GPU"
        detail = f"{p} ran on {gpu.name} cc {gpu.compute_capability}; kind {kind} is cc {compute_capability}"
    return Cell(lesson=lesson, kind=kind, outcome=worst, detail=detail, runs=runs)


def _outcome(r: RunRecord, compute_capability: str | None) -> CellOutcome:
    gpu = r.environment.gpu
    if gpu is not None and compute_capability is not None and gpu.compute_capability != compute_capability:
        return "wrong-gpu"
    verdict = r.verdict
    match verdict:  # every run verdict is named: mypy reports a missing return when a new one is not
        case "failed" | "error" | "timeout" | "checker-disagrees":
            return "failed"
        case "passed" | "gated" | "no-gpu" | "toolchain-absent" | "unverified":
            return verdict


def with_task_state(c: Cell, state: JobState | None) -> Cell:
    """The cell with the state Slurm ended its task in; a cell that is not a pass whose task Slurm cut short
    (``slurm.CUT_SHORT``: a task killed at its time limit is a gap named ``TIMEOUT``) says so first."""
    if state is None:
        return c
    detail = c.detail
    if c.outcome != "passed" and state in CUT_SHORT:
        detail = f"Slurm ended the task {state}{' (its time limit)' if state == 'TIMEOUT' else ''}: {detail}"
    return c.model_copy(update={"task_state": state, "detail": detail})


def refused(lesson: str, kind: str, why: str) -> Cell:
    return Cell(lesson=lesson, kind=kind, outcome="refused", detail=why)


def render(m: Matrix) -> list[str]:
    """The matrix as a table (lessons down, kinds across), then one line per cell that is not a pass."""
    at = {(c.lesson, c.kind): c for c in m.cells}
    rows = [["LESSON", *m.kinds]] + [[lid, *(at[(lid, k)].outcome for k in m.kinds)] for lid in m.lessons]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    out += [f"  {c.lesson} x {c.kind}: {c.outcome}: {c.detail}" for c in m.cells if c.outcome != "passed"]
    out.append(f"audit: exit {m.audit_exit}: {m.audit_line}" if m.audit_exit is not None else "audit: did not run")
    return out
