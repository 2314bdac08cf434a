"""Merging records from many hosts: conflict-free by construction, never overwriting, gaps shown.

Real files and real git (worktrees, branches, ``git merge``); records written
through ``tileproof.records.store`` exactly as ``run`` writes them.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from pydantic import ValidationError

from tileproof.fleet import matrix as mx
from tileproof.fleet import tasks
from tileproof.fleet.merge import MergeConflict, Source, merge, plan_merge
from tileproof.fleet.plan import SUBMITTED_FILE, ArrayResult, Checkout, Submitted, make_plan
from tileproof.records import batch_write
from tileproof.records.cluster import Cluster, GpuKind
from tileproof.records.errors import TileproofError
from tileproof.records.models import RunRecord, SlurmJob

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("fleet_course", REPO / "tests" / "data" / "fleet" / "course.py")
course = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(course)


def cli(monkeypatch, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``tileproof ARGS`` run from ``cwd`` as the command line runs it (conftest.run_cli), with no TILEPROOF_
    variable of this environment (a CI runner's trust root) and this checkout's tileproof on PYTHONPATH for the
    processes it starts (``fleet merge``'s audit)."""
    for key in [k for k in os.environ if k.startswith("TILEPROOF_")]:
        monkeypatch.delenv(key)
    code, out, err = run_cli(*args, cwd=cwd, env={"PYTHONPATH": str(REPO)})
    return subprocess.CompletedProcess(["tileproof", *args], code, out, err)


def audit(monkeypatch, root: Path) -> subprocess.CompletedProcess:
    return cli(monkeypatch, "audit", "--root", str(root), cwd=root)


def host_tree(base: Path, repo: Path, name: str) -> Path:
    """A simulated host's checkout: the course's lessons and programs (what records digest)."""
    root = base / name
    for folder in ("lessons", "kernels"):
        shutil.copytree(repo / folder, root / folder)
    return root


@pytest.fixture(scope="module")
def course_template(tmp_path_factory):
    """The course repository (``course.course_repo``), built and committed once per module."""
    return course.course_repo(tmp_path_factory.mktemp("template") / "course")


@pytest.fixture
def repo(tmp_path, course_template):
    """A private copy of the course repository, its git history included."""
    return Path(shutil.copytree(course_template, tmp_path / "course", symlinks=True))


def test_fifty_hosts_merge_with_no_conflict_and_audit_clean(tmp_path, repo, monkeypatch):
    hosts = [host_tree(tmp_path / "hosts", repo, f"host{h:02d}") for h in range(50)]
    written = sum(course.host_records(h, i, which=("H200", "A100", "T4")[i % 3]) for i, h in enumerate(hosts))
    done = merge(repo, [Source(base=h) for h in hosts])
    assert len(list((repo / "runs").glob("*.json"))) == written == 150
    assert done.same == 0
    assert len(done.writes) == written + 50 * (3 + 2 * 3)  # records + transcripts
    assert done.skipped == []
    again = merge(repo, [Source(base=h) for h in hosts])  # a second merge is a no-op
    assert not again.writes
    assert again.same == len(done.writes)
    result = audit(monkeypatch, repo)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "150 records" in result.stdout


def test_same_name_different_bytes_is_a_loud_error_and_nothing_is_written(tmp_path, repo):
    a, b = host_tree(tmp_path, repo, "a"), host_tree(tmp_path, repo, "b")
    course.host_records(a, 0)
    course.host_records(b, 1)
    victim = sorted((a / "runs").glob("*run*.json"))[0]
    (b / "runs" / victim.name).write_bytes(victim.read_bytes().replace(b'"passed"', b'"failed"', 1))
    before = sorted(p.relative_to(repo) for p in repo.rglob("*") if ".git" not in p.parts)
    with pytest.raises(MergeConflict, match=rf"runs/{victim.name}: .* differ.*nothing was merged"):
        merge(repo, [Source(base=a), Source(base=b)])
    assert sorted(p.relative_to(repo) for p in repo.rglob("*") if ".git" not in p.parts) == before


def test_a_file_already_in_the_tree_is_never_overwritten(tmp_path, repo):
    a = host_tree(tmp_path, repo, "a")
    course.host_records(a, 0)
    merge(repo, [Source(base=a)])
    record = sorted((repo / "runs").glob("*run*.json"))[0]
    original = record.read_bytes()
    (a / "runs" / record.name).write_bytes(original + b" ")
    with pytest.raises(MergeConflict, match="differs from the one already in"):
        merge(repo, [Source(base=a)])
    assert record.read_bytes() == original


def test_reports_and_killed_writers_temp_files_are_not_merged(tmp_path, repo):
    a = host_tree(tmp_path, repo, "a")
    course.host_records(a, 0)
    (a / "evidence" / "AUDIT.md").write_text("a host's own audit report\n")
    (a / "runs" / ".20261101T000000Z-run-0badc0de.json.x1y2.tmp").write_text("{half")
    plan = plan_merge(repo, [Source(base=a)])
    assert not any("AUDIT.md" in w or w.endswith(".tmp") for w in plan.writes)
    assert sorted(s.rsplit(": ", 1)[1] for s in plan.skipped) == ["incomplete write (temp file)", "not a record file"]


def test_git_merge_of_branches_each_adding_records_has_no_conflict(tmp_path, repo, monkeypatch):
    branches = []
    for h in range(8):
        name = f"host{h}"
        wt = tmp_path / "wt" / name
        course.git(repo, "worktree", "add", "-q", "-b", name, str(wt))
        course.host_records(wt, h, sessions=2)
        course.git(wt, "add", "-A", "runs", "evidence")
        course.git(wt, "commit", "-q", "-m", f"records from {name}")
        branches.append(name)
    for name in branches:  # one merge per host, as a maintainer would take them
        course.git(repo, "merge", "-q", "--no-edit", name)
    assert course.git(repo, "status", "--porcelain") == ""
    assert len(list((repo / "runs").glob("*.json"))) == 8 * 2 * 3
    result = audit(monkeypatch, repo)
    assert result.returncode == 0, result.stdout[-3000:]


# --- the matrix ----------------------------------------------------------------


def _records(root: Path, which: str = "H200", drop: str | None = None, close: bool = True):
    course.host_records(root, 0, which=which)
    files = sorted((root / "runs").glob("*.json"))
    if drop == "session" or not close:
        files = [f for f in files if "-session-" not in f.name]
    if drop == "run":
        files = [f for f in files if "-session-" in f.name] + [f for f in files if "-run-" in f.name][:1]
    return mx.load_task_records(files)


def test_matrix_cell_passes_only_with_every_record_closed_on_the_right_gpu(tmp_path, repo):
    progs = list(course.PROGRAMS)
    for name, kwargs, cc, outcome in [
        ("ok", {}, "9.0", "passed"),
        ("any", {}, None, "passed"),
        ("wrong", {}, "10.0", "wrong-gpu"),
        ("t4", {"which": "T4"}, "7.5", "gated"),
        ("died", {"close": False}, "9.0", "gap"),
        ("half", {"drop": "run"}, "9.0", "gap"),
    ]:
        records, bad = _records(host_tree(tmp_path, repo, name), **kwargs)
        got = mx.cell("both", "k", progs, records, bad, cc)
        assert got.outcome == outcome, (name, got)
    assert "no closing record" in mx.cell("both", "k", progs, *_records(host_tree(tmp_path, repo, "d2"), close=False),
                                           "9.0").detail


def test_a_toolchain_absent_run_is_its_own_outcome_never_a_pass(tmp_path, repo):
    # run records of run_version 2 and up may say toolchain-absent (a Julia program on a node without
    # Julia): the cell shows it (a failed program outranks it) and the matrix does not pass.
    progs = list(course.PROGRAMS)
    records, bad = _records(host_tree(tmp_path, repo, "nojulia"))
    absent = [r.model_copy(update={"verdict": "toolchain-absent"}) if isinstance(r, RunRecord) and r.program == progs[0]
              else r for r in records]
    got = mx.cell("both", "k", progs, absent, bad, "9.0")
    assert got.outcome == "toolchain-absent", got
    assert "1 toolchain-absent" in got.detail, got
    failed = [r.model_copy(update={"verdict": "error"}) if isinstance(r, RunRecord) and r.program == progs[1] else r
              for r in absent]
    assert mx.cell("both", "k", progs, failed, bad, "9.0").outcome == "failed"
    matrix = mx.Matrix(matrix_version=1, lessons=["both"], kinds=["k"], cells=[got], merged=0, audit_exit=0,
                       audit_line="ok")
    assert not matrix.passed()
    assert "toolchain-absent" in "\n".join(mx.render(matrix))


def test_a_task_slurm_cut_short_is_named_in_its_cell_and_a_task_that_ended_by_itself_is_not():
    gap = mx.Cell(lesson="l", kind="k", outcome="gap", detail="0/1 programs recorded; none for kernels/a.py")
    timed_out = mx.with_task_state(gap, "TIMEOUT")
    assert (timed_out.outcome, timed_out.task_state) == ("gap", "TIMEOUT")
    assert timed_out.detail == "Slurm ended the task TIMEOUT (its time limit): 0/1 programs recorded; none for " \
                               "kernels/a.py"
    assert mx.with_task_state(gap, "NODE_FAIL").detail.startswith("Slurm ended the task NODE_FAIL: 0/1")
    no_gpu = mx.Cell(lesson="l", kind="k", outcome="no-gpu", detail="1 no-gpu")
    assert mx.with_task_state(no_gpu, "FAILED").detail == "1 no-gpu"  # run's exit 1: its records say why
    passed = mx.Cell(lesson="l", kind="k", outcome="passed", detail="1 passed")
    assert mx.with_task_state(passed, "TIMEOUT").detail == "1 passed"  # every record closed before the kill
    assert mx.with_task_state(gap, None) is gap


def test_a_matrix_of_version_1_still_reads_and_never_holds_task_states():
    cell = {"lesson": "l", "kind": "k", "outcome": "gap", "detail": "d", "runs": []}
    old = {"matrix_version": 1, "lessons": ["l"], "kinds": ["k"], "cells": [cell], "merged": 0, "audit_exit": 0,
           "audit_line": "ok"}
    assert mx.Matrix.model_validate(old).cells[0].task_state is None
    with pytest.raises(ValidationError, match="before matrix_version 2 hold no task_state"):
        mx.Matrix.model_validate({**old, "cells": [{**cell, "task_state": "TIMEOUT"}]})
    assert mx.Matrix.model_validate({**old, "matrix_version": 2, "cells": [{**cell, "task_state": "TIMEOUT"}]})


def _job(gpus):
    return SlurmJob(job_id="5", array_job_id="4", array_task_id=1, cluster="c", node="n", job_gpus=gpus,
                    step_gpus=None, cuda_visible_devices=None if gpus is None else ",".join(map(str, gpus)))


@pytest.mark.parametrize("extra, job, want", [
    ([], None, ["--record-no-gpu"]),
    ([], _job(None), ["--record-no-gpu"]),
    ([], _job([1]), ["--record-no-gpu", "--device", "1"]),
    ([], _job([2, 3]), ["--record-no-gpu", "--devices", "2,3"]),
    (["--timeout", "60"], _job([0]), ["--timeout", "60", "--record-no-gpu", "--device", "0"]),
    (["--record-no-gpu", "--device", "0"], _job([1]), ["--record-no-gpu", "--device", "0"]),
    (["--devices=all"], _job([1]), ["--devices=all", "--record-no-gpu"]),
], ids=["outside-slurm", "no-gres", "one-gpu", "two-gpus", "plan-args-kept", "plan-device-wins", "plan-devices-wins"])
def test_a_task_runs_on_the_gpus_slurm_gave_it_and_always_records_its_gates(extra, job, want):
    assert tasks.run_args(extra, job) == want


def test_a_record_that_does_not_load_is_its_own_outcome(tmp_path):
    bad = tmp_path / "runs" / "x.json"
    bad.parent.mkdir()
    bad.write_text("{")
    records, problems = mx.load_task_records([bad])
    cell = mx.cell("l", "k", ["kernels/a.py"], records, problems, None)
    assert cell.outcome == "bad-record"
    assert "not valid JSON" in cell.detail


def test_finish_merges_what_tasks_wrote_and_shows_a_dead_task_as_a_gap(tmp_path, repo):
    """The merge job's work without Slurm: real worktrees, one task complete, one died mid-run,
    one never started; a refused kind."""
    cluster = Cluster(cluster_version=1, name="t",
                      kinds={"sm_90": GpuKind(constraint="sm_90", compute_capability="9.0"),
                             "big": GpuKind(gres="gpu:b200:1")})
    folder = tmp_path / "fleet"
    lessons = {lid: progs for lid, progs in course.LESSONS.items()}
    lessons["fleet-both"] = list(course.PROGRAMS)
    plan = make_plan(cluster=cluster, lesson_programs=lessons, kinds=[],
                     source=Checkout(repo, course.git(repo, "rev-parse", "HEAD").strip(), sys.executable),
                     folder=folder, fleet_id="t")
    folder.mkdir()
    (folder / SUBMITTED_FILE).write_text(Submitted(fleet_version=1, arrays=[
        ArrayResult(kind="sm_90", job_id="1", refused=None),
        ArrayResult(kind="big", job_id=None, refused="sbatch: error: Invalid generic resource (gres) specification"),
    ]).model_dump_json())
    sm90 = plan.arrays[0].tasks
    for task in sm90[:2]:  # the third task (fleet-both) never started
        course.git(repo, "worktree", "add", "-q", "--detach", str(plan.checkout(task)), plan.commit)
    done, died = plan.checkout(sm90[0]), plan.checkout(sm90[1])
    course.host_records(done, 0)   # both programs + the session (the host ran everything)
    course.host_records(died, 1)
    for f in (died / "runs").glob("*-session-*.json"):
        f.unlink()                  # the task died before its session record
    result = tasks.finish(plan)
    at = {(c.lesson, c.kind): c for c in result.cells}
    assert at[("fleet-vector-add", "sm_90")].outcome == "passed"
    assert at[("fleet-online-softmax", "sm_90")].outcome == "gap"
    assert "never started" in at[("fleet-both", "sm_90")].detail
    assert {at[(lid, "big")].outcome for lid in lessons} == {"refused"}
    assert not result.passed()
    merged = {p.name for p in (repo / "runs").glob("*.json")}
    wrote = {p.name for p in (done / "runs").glob("*.json")} | {p.name for p in (died / "runs").glob("*.json")}
    assert wrote - {".gitkeep"} <= merged  # what the dead task wrote is kept
    assert result.audit_exit == 1  # the audit sees the unclosed session: the gap is not hidden
    assert (folder / "matrix.json").is_file()
    table = "\n".join(mx.render(result))
    assert "fleet-online-softmax x sm_90: gap" in table


@pytest.mark.slow(reason="a real worktree of the plan's commit and a real tileproof run in it")
def test_a_task_runs_its_lesson_in_its_own_worktree_and_a_requeued_task_adds_to_it(tmp_path, repo):
    """What an array task does, without Slurm: a real worktree of the plan's commit, a real ``tileproof run``."""
    cluster = Cluster(cluster_version=1, name="t", kinds={"cpu": GpuKind()})
    plan = make_plan(cluster=cluster, lesson_programs=dict(course.LESSONS), kinds=[],
                     source=Checkout(repo, course.git(repo, "rev-parse", "HEAD").strip(), sys.executable),
                     folder=tmp_path / "fleet", fleet_id="t")
    plan = plan.model_copy(update={"run_args": ["--record-no-gpu"]})
    assert tasks.run_task(plan, "cpu", 1) == 1  # no GPU here: the run records no-gpu and fails
    checkout = plan.checkout(plan.task("cpu", 1))
    assert course.git(checkout, "rev-parse", "HEAD").strip() == plan.commit
    assert (checkout / "build").is_symlink()
    assert (checkout / "build").resolve() == (repo / "build").resolve()
    assert tasks.run_task(plan, "cpu", 1) == 1  # requeued: same worktree, a second session
    own = tasks.own_runs(tasks.task_files(plan, plan.task("cpu", 1)))
    assert len([p for p in own if "-session-" in p.name]) == 2
    assert len(own) == 4
    assert not list((repo / "runs").glob("*-run-*.json"))  # nothing written outside the task's worktree
    course.git(checkout, "checkout", "-q", "--detach", "HEAD~0")
    (checkout / "x").write_text("x")
    course.git(checkout, "add", "x")
    course.git(checkout, "commit", "-q", "-m", "other")
    with pytest.raises(TileproofError, match="a worktree of another commit is there"):
        tasks.run_task(plan, "cpu", 1)


@pytest.mark.slow(reason="real runner checkouts, fleet collect in each, one merge: the CI path")
def test_ci_runners_collect_then_merge_prints_the_matrix(tmp_path, repo, monkeypatch):
    """The workflow's path: each runner's checkout -> ``fleet collect`` -> artifact; ``fleet merge`` of them all."""
    artifacts = tmp_path / "artifacts"
    for i, kind in enumerate(("sm_90", "sm_80")):
        wt = tmp_path / "runners" / kind
        course.git(repo, "worktree", "add", "-q", "--detach", str(wt))
        course.host_records(wt, i, which="H200" if kind == "sm_90" else "A100")
        got = cli(monkeypatch, "fleet", "collect", "--out", str(artifacts / f"records-{kind}"), "--root", str(wt),
                  cwd=wt)
        # 3 records, 9 transcripts
        assert got.returncode == 0, got.stdout + got.stderr
        assert "12 files into" in got.stdout, got.stdout + got.stderr
        assert len(list((artifacts / f"records-{kind}" / "runs").glob("*.json"))) == 3  # 2 runs + session
    merged = cli(monkeypatch, "fleet", "merge", str(artifacts / "records-sm_90"), str(artifacts / "records-sm_80"),
                 "--root", str(repo), cwd=repo)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "LESSON" in merged.stdout
    assert "records-sm_90" in merged.stdout
    assert "audit: exit 0" in merged.stdout
    assert len(list((repo / "runs").glob("*.json"))) == 6
    # a runner that died before its session record: its column is a gap and the merge says so
    dead = tmp_path / "runners" / "sm_120"
    course.git(repo, "worktree", "add", "-q", "--detach", str(dead))
    course.host_records(dead, 9)
    for f in (dead / "runs").glob("*-session-*.json"):
        f.unlink()
    assert cli(monkeypatch, "fleet", "collect", "--out", str(artifacts / "records-sm_120"), "--root", str(dead),
               cwd=dead).returncode == 0
    again = cli(monkeypatch, "fleet", "merge", *(str(artifacts / f"records-{k}") for k in ("sm_90", "sm_80", "sm_120")),
                "--root", str(repo), cwd=repo)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "fleet-vector-add x records-sm_120: gap: session" in again.stdout
    assert "11 files written, 24 already there" in again.stdout  # the dead runner's 2 runs + their transcripts


def test_a_merge_syncs_twice_not_once_per_file(tmp_path, repo, monkeypatch):
    """Every file staged, one os.sync, linked, one more os.sync; no per-file fsync."""
    a = host_tree(tmp_path, repo, "a")
    course.host_records(a, 0)
    calls = {"sync": 0, "fsync": 0}
    monkeypatch.setattr(batch_write.os, "sync", lambda: calls.__setitem__("sync", calls["sync"] + 1))
    monkeypatch.setattr(batch_write.os, "fsync", lambda fd: calls.__setitem__("fsync", calls["fsync"] + 1))
    done = merge(repo, [Source(base=a)])
    assert len(done.writes) > 5
    assert calls == {"sync": 2, "fsync": 0}
    for rel, src in done.writes.items():
        assert (repo / rel).read_bytes() == Path(src).read_bytes()
        assert (repo / rel).stat().st_mode & 0o777 == 0o644
    assert not list((repo / ".tileproof-cache" / batch_write.STAGING).iterdir())  # nothing staged is left


def test_a_merge_killed_midway_is_completed_by_running_it_again(tmp_path, repo, monkeypatch):
    """Half the links made, then the merge dies: every file in place is whole, and a rerun writes the rest."""
    a = host_tree(tmp_path, repo, "a")
    course.host_records(a, 0)
    real_link, made = batch_write.os.link, []

    def dies_halfway(src, dst):
        if len(made) >= 5:
            raise KeyboardInterrupt("killed")
        made.append(dst)
        real_link(src, dst)

    monkeypatch.setattr(batch_write.os, "link", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        merge(repo, [Source(base=a)])
    monkeypatch.setattr(batch_write.os, "link", real_link)
    placed = [Path(p) for p in made]
    assert placed
    assert all(p.read_bytes() == (a / p.relative_to(repo)).read_bytes() for p in placed)
    again = merge(repo, [Source(base=a)])
    assert again.same == len(placed)
    assert again.writes
    assert not merge(repo, [Source(base=a)]).writes  # complete now
    result = audit(monkeypatch, repo)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_a_name_made_meanwhile_by_another_writer_is_never_overwritten(tmp_path, repo):
    """Between the plan and the link another writer made a name: the same bytes are fine, others refused."""
    a = host_tree(tmp_path, repo, "a")
    course.host_records(a, 0)
    record = sorted((a / "runs").glob("*run*.json"))[0]
    rel = f"runs/{record.name}"
    (repo / "runs").mkdir(exist_ok=True)
    (repo / rel).write_bytes(b"another writer's bytes")
    with pytest.raises(TileproofError, match="already exists with other bytes"):
        batch_write.copy_once(repo, [(rel, record)], lambda x, y: x.read_bytes() == y.read_bytes())
    assert (repo / rel).read_bytes() == b"another writer's bytes"
    (repo / rel).write_bytes(record.read_bytes())
    assert batch_write.copy_once(repo, [(rel, record)], lambda x, y: x.read_bytes() == y.read_bytes()) == 0


def test_merge_never_stages_through_a_linked_cache_folder(tmp_path):
    """``.tileproof-cache`` committed as a link to a folder outside the tree: the merge refuses in one line before
    it stages anything, and writes nothing there nor under runs/."""
    root, outside = tmp_path / "tree", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / ".tileproof-cache").symlink_to(outside)
    source = tmp_path / "record.json"
    source.write_text("{}")
    with pytest.raises(TileproofError, match="is a link"):
        batch_write.copy_once(root, [("runs/x.json", source)], lambda x, y: True)
    assert list(outside.iterdir()) == [] and not (root / "runs").exists()


def test_merge_leaves_a_lesson_without_programs_out_of_the_matrix_and_says_so(tmp_path, repo, monkeypatch):
    """A note whose numbers are all bench claims (``programs: []``) has no task, so no cell: before, its empty
    program list reached the matrix (``min`` of no outcomes) and the merge stopped with a traceback."""
    note = (REPO / "lessons" / "day79-cutile-performance.md").read_text()
    note = note.replace("id: day79-cutile-performance", "id: note", 1).replace("status: published", "status: draft", 1)
    (repo / "lessons" / "note.md").write_text(note)
    course.git(repo, "add", "-A")
    course.git(repo, "commit", "-q", "-m", "a draft note without programs")
    wt = tmp_path / "runners" / "sm_90"
    course.git(repo, "worktree", "add", "-q", "--detach", str(wt))
    course.host_records(wt, 0)
    artifact = tmp_path / "artifacts" / "records-sm_90"
    assert cli(monkeypatch, "fleet", "collect", "--out", str(artifact), "--root", str(wt), cwd=wt).returncode == 0
    merged = cli(monkeypatch, "fleet", "merge", str(artifact), "--root", str(repo), cwd=repo)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "fleet: lessons/note.md lists no programs: no task for it" in merged.stderr
    rows = [ln.split()[0] for ln in merged.stdout.splitlines() if ln and not ln.startswith(("fleet merge:", "audit:"))]
    assert rows == ["LESSON", *sorted(course.LESSONS)], merged.stdout
