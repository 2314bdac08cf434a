"""Submitting a plan to Slurm and waiting for it: the arrays, then the ``afterany`` merge job.

The plan is written before any job exists (tasks read it); ``submitted.json``
(each array's job id, or sbatch's refusal) before the merge job, which reads
it. A kind sbatch refuses is that kind's row of the matrix (``refused``); the
other kinds go on. Nothing here queues or schedules: Slurm does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from tileproof.fleet import sbatch
from tileproof.fleet.plan import PLAN_FILE, SUBMITTED_FILE, ArrayResult, Plan, Submitted
from tileproof.records.errors import TileproofError
from tileproof.records.store import write_once
from tileproof.runner import slurm


@dataclass(frozen=True)
class Launched:
    """What submit did: each array's answer, and the merge job's id."""

    submitted: Submitted
    merge_job: str | None
    """None when every array was refused (nothing to merge)."""


def write_model(path: Path, model) -> None:
    write_once(path, (model.model_dump_json(indent=2) + "\n").encode())


def submit(plan: Plan) -> Launched:
    """Write the plan and scripts, submit one array per kind, then the merge job after all of them."""
    folder = Path(plan.folder)
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    write_model(folder / PLAN_FILE, plan)
    results = []
    for array in plan.arrays:
        path = folder / "scripts" / f"{array.kind}.sbatch"
        write_once(path, sbatch.array_script(plan, array).encode())
        got = slurm.sbatch(path, cwd=folder)
        results.append(ArrayResult(kind=array.kind, job_id=got.job_id, refused=got.refused))
    submitted = Submitted(fleet_version=1, arrays=results)
    write_model(folder / SUBMITTED_FILE, submitted)
    ids = [r.job_id for r in results if r.job_id]
    if not ids:
        return Launched(submitted=submitted, merge_job=None)
    path = folder / "scripts" / "merge.sbatch"
    write_once(path, sbatch.merge_script(plan, ids).encode())
    merge = slurm.sbatch(path, cwd=folder)
    if merge.job_id is None:
        raise TileproofError(f"{path}: sbatch refused the merge job: {merge.refused} (the arrays "
                             f"{', '.join(ids)} still run; merge later: tileproof fleet finish --plan "
                             f"{folder / PLAN_FILE})")
    return Launched(submitted=submitted, merge_job=merge.job_id)


def wait(job_id: str, timeout_s: float, poll_s: float = 2.0, say=print) -> slurm.JobState:
    """Poll the job's state until it ends; a job still running at the timeout is an error (it keeps running)."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        state = slurm.job_state(job_id)
        if state != last:
            say(f"fleet: merge job {job_id}: {state}")
            last = state
        if state in slurm.ENDED:
            return state
        if time.monotonic() > deadline:
            raise TileproofError(f"merge job {job_id}: still {state} after {timeout_s:.0f} s (it keeps running; "
                                 "its matrix appears in the fleet folder: tileproof fleet show --plan ...)")
        time.sleep(poll_s)
