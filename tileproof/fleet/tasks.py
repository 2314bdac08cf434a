"""What the jobs themselves do: one array task runs its lesson in its own worktree; the merge job
merges every task's records into the repository, runs the audit and writes the matrix."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from tileproof.fleet import matrix as mx
from tileproof.fleet.merge import Source, merge
from tileproof.fleet.plan import MATRIX_FILE, SUBMITTED_FILE, Plan, Submitted
from tileproof.records import store
from tileproof.records.errors import RecordError, TileproofError
from tileproof.records.models import SlurmJob
from tileproof.runner import children, slurm, worktree
from tileproof.runner.capture import slurm_job
from tileproof.toolchain.build import BUILD_DIR

RECORD_FOLDERS = [store.RUNS, store.EVIDENCE]


def read_model(path: Path, model):
    try:
        return model.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise RecordError(path, "", "is missing", "run tileproof fleet submit, which writes it") from None
    except ValidationError as e:
        err = e.errors()[0]
        raise RecordError(path, ".".join(str(p) for p in err["loc"]), err["msg"],
                          "the fleet folder is written by tileproof fleet submit; resubmit") from None


def load_plan(path: Path) -> Plan:
    return read_model(path, Plan)


def run_task(plan: Plan, kind: str, index: int) -> int:
    """Check out the plan's commit in the task's own worktree and ``tileproof run`` its lesson there."""
    task = plan.task(kind, index)
    checkout = plan.checkout(task)
    checkout.parent.mkdir(parents=True, exist_ok=True)
    if (checkout / ".git").exists():  # Slurm requeued the task: its earlier records stay, a new session adds
        if worktree.head(checkout) != plan.commit:
            raise TileproofError(f"{checkout}: a worktree of another commit is there (fix: remove it; "
                                 f"the plan runs {plan.commit[:12]})")
    else:
        worktree.add(Path(plan.repo), checkout, plan.commit)
    share_build(Path(plan.repo), checkout)
    job = slurm_job()
    under = "" if job is None else (f"; Slurm job {job.job_id} (array {job.array_job_id} task {job.array_task_id})"
                                    f", GPUs {','.join(map(str, job.job_gpus or [])) or 'none'}")
    print(f"fleet task {kind}[{index}]: lesson {task.lesson} in {checkout} at {plan.commit[:12]}{under}", flush=True)
    done = children.tileproof(["run", task.lesson, "--root", str(checkout), *run_args(plan.run_args, job)],
                              cwd=checkout, deadline_s=task_deadline_s(plan.cluster.time_limit_s()),
                              python=plan.python, pythonpath=checkout, echo=True)
    if done.exit_code is None:
        print(f"fleet task {kind}[{index}]: tileproof run {done.last_line()}", flush=True)
    return done.status


TASK_GRACE_S = 120.0
"""How long past the cluster's time limit a task's own deadline for its ``tileproof run`` lies: under Slurm the
limit is Slurm's to enforce (the task then ends ``TIMEOUT``, a gap the matrix names); the deadline is the
backstop for a task run where nothing enforces it."""


def task_deadline_s(time_limit_s: float | None) -> float | None:
    """The deadline of a task's ``tileproof run``: the cluster's time limit plus ``TASK_GRACE_S``; None for none."""
    return None if time_limit_s is None else time_limit_s + TASK_GRACE_S


def run_args(extra: list[str], job: SlurmJob | None) -> list[str]:
    """A task's ``tileproof run`` options: the plan's, ``--record-no-gpu`` (a task on a node without a usable
    GPU records each program's gate: a named cell, never a task that left nothing), and the GPU(s) Slurm gave
    the job (``--device N``; several: ``--devices N,M``) unless the plan names a device itself."""
    args = list(extra)
    if "--record-no-gpu" not in args:
        args.append("--record-no-gpu")
    gpus = job.job_gpus if job is not None else None
    if gpus and not any(a.split("=")[0] in ("--device", "--devices") for a in args):
        args += ["--device", str(gpus[0])] if len(gpus) == 1 else ["--devices", ",".join(map(str, gpus))]
    return args


def share_build(repo: Path, checkout: Path) -> None:
    """The task's ``build/`` is the repository's (a link): the C++ binaries compiled at this commit are found
    there by the digests of the compile records the commit holds, and a build on demand takes the same
    ``build/.lock`` as every other tileproof building there."""
    link, target = checkout / BUILD_DIR, repo / BUILD_DIR
    if link.is_symlink() or link.exists():
        return
    target.mkdir(exist_ok=True)
    link.symlink_to(target.resolve(), target_is_directory=True)


def task_states(job_id: str | None) -> dict[int, slurm.JobState]:
    """How Slurm ended each task of an array (empty for a refused kind, or where Slurm no longer knows). Asked
    by the merge job only: a ``finish`` run by hand outside Slurm leaves the cells' task states unknown."""
    if job_id is None:
        return {}
    try:
        return slurm.array_task_states(job_id)
    except slurm.SlurmError as e:
        print(f"fleet finish: array {job_id}: no task states ({e})", flush=True)
        return {}


def task_files(plan: Plan, task) -> Source | None:
    """What a task wrote in its worktree (untracked files under runs/ and evidence/); None: it never started."""
    checkout = plan.checkout(task)
    if not (checkout / ".git").exists():
        return None
    return Source(base=checkout, only=tuple(worktree.untracked(checkout, RECORD_FOLDERS)))


def own_runs(source: Source) -> list[Path]:
    return [source.base / f for f in source.only or () if f.startswith(f"{store.RUNS}/") and f.endswith(".json")]


def finish(plan: Plan) -> mx.Matrix:
    """Merge every task's records into the repository, audit it, and write ``matrix.json``."""
    folder = Path(plan.folder)
    submitted = read_model(folder / SUBMITTED_FILE, Submitted)
    refused = {a.kind: a.refused for a in submitted.arrays if a.refused}
    cells, sources = [], []
    in_slurm = slurm_job() is not None  # the merge job: Slurm still knows how the tasks ended
    for array in plan.arrays:
        ended = task_states(next((a.job_id for a in submitted.arrays if a.kind == array.kind), None)) \
            if in_slurm else {}
        for task in array.tasks:
            if array.kind in refused:
                cells.append(mx.refused(task.lesson, array.kind, refused[array.kind]))
                continue
            source = task_files(plan, task)
            if source is None:
                cells.append(mx.Cell(lesson=task.lesson, kind=array.kind, outcome="gap",
                                     detail=f"the task never started (no worktree at {plan.checkout(task)})"))
                continue
            sources.append(source)
            records, bad = mx.load_task_records(own_runs(source))
            cells.append(mx.with_task_state(mx.cell(task.lesson, array.kind, task.programs, records, bad,
                                                    array.spec.compute_capability), ended.get(task.index)))
    repo = Path(plan.repo)
    done = merge(repo, sources)
    audit = children.tileproof(["audit", "--root", str(repo)], cwd=repo, deadline_s=children.AUDIT_DEADLINE_S,
                               python=plan.python)
    result = mx.Matrix(matrix_version=mx.MATRIX_VERSION,
                       lessons=list(dict.fromkeys(t.lesson for a in plan.arrays for t in a.tasks)),
                       kinds=[a.kind for a in plan.arrays], cells=cells, merged=len(done.writes),
                       audit_exit=audit.status, audit_line=audit.summary("audit: "))
    tmp = folder / f".{MATRIX_FILE}.tmp"
    tmp.write_text(result.model_dump_json(indent=2) + "\n")
    tmp.replace(folder / MATRIX_FILE)  # derived: rewritten by each finish, unlike records
    return result
