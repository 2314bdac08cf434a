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
from tileproof.runner import children, worktree

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
    print(f"fleet task {kind}[{index}]: lesson {task.lesson} in {checkout} at {plan.commit[:12]}", flush=True)
    done = children.tileproof(["run", task.lesson, "--root", str(checkout), *plan.run_args], cwd=checkout,
                              deadline_s=plan.cluster.time_limit_s(), python=plan.python, pythonpath=checkout,
                              echo=True)
    if done.exit_code is None:
        print(f"fleet task {kind}[{index}]: tileproof run {done.last_line()}", flush=True)
    return done.status


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
    for array in plan.arrays:
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
            cells.append(mx.cell(task.lesson, array.kind, task.programs, records, bad, array.spec.compute_capability))
    repo = Path(plan.repo)
    done = merge(repo, sources)
    audit = children.tileproof(["audit", "--root", str(repo)], cwd=repo, deadline_s=children.AUDIT_DEADLINE_S,
                               python=plan.python)
    result = mx.Matrix(matrix_version=1, lessons=list(dict.fromkeys(t.lesson for a in plan.arrays for t in a.tasks)),
                       kinds=[a.kind for a in plan.arrays], cells=cells, merged=len(done.writes),
                       audit_exit=audit.status, audit_line=audit.last_line())
    tmp = folder / f".{MATRIX_FILE}.tmp"
    tmp.write_text(result.model_dump_json(indent=2) + "\n")
    tmp.replace(folder / MATRIX_FILE)  # derived: rewritten by each finish, unlike records
    return result
