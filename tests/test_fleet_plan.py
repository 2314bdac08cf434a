"""The pure half of the fleet: cluster files, the job plan, the sbatch scripts, the device fan-out plan."""

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

from tileproof.fleet import sbatch
from tileproof.fleet.devices import child_args, plan_devices
from tileproof.fleet.plan import Checkout, make_plan
from tileproof.records.cluster import load_cluster
from tileproof.records.errors import RecordError, TileproofError
from tileproof.records.parsers import parse_gpu_query

REPO = Path(__file__).resolve().parents[1]
CI_CLUSTER = REPO / ".ci" / "slurm-cluster.yaml"
_spec = importlib.util.spec_from_file_location("fleet_course", REPO / "tests" / "data" / "fleet" / "course.py")
course = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(course)

SITE = """\
cluster_version: 1
name: uni
partition: gpu
time_limit: "02:00:00"
mem: 16G
kinds:
  sm_80: {gres: "gpu:a100:1", compute_capability: "8.0"}
  sm_90: {constraint: "h100|h200", gres: "gpu:1", compute_capability: "9.0", partition: hopper}
  t4: {gres: "gpu:t4:1", compute_capability: "7.5"}
"""


def plan_for(tmp_path, text=SITE, kinds=()):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return make_plan(cluster=load_cluster(path),
                     lesson_programs={"a": ["kernels/a.py"], "b": ["kernels/b.py", "cpp/b.cu"]},
                     kinds=list(kinds), source=Checkout(tmp_path / "repo", "c0ffee" * 6 + "abcd", "/opt/py/bin/python"),
                     folder=tmp_path / "fleet", fleet_id="F1")


def test_one_array_per_kind_one_task_per_lesson(tmp_path):
    plan = plan_for(tmp_path)
    assert [a.kind for a in plan.arrays] == ["sm_80", "sm_90", "t4"]
    assert [(t.index, t.lesson, t.folder) for t in plan.arrays[1].tasks] == [(0, "a", "tasks/sm_90/a"),
                                                                             (1, "b", "tasks/sm_90/b")]
    assert plan.task("sm_90", 1).programs == ["kernels/b.py", "cpp/b.cu"]
    with pytest.raises(TileproofError, match=r"no task sm_90\[2\]"):
        plan.task("sm_90", 2)
    assert [a.kind for a in plan_for(tmp_path, kinds=["t4"]).arrays] == ["t4"]


def test_kinds_become_constraint_and_gres_lines(tmp_path):
    plan = plan_for(tmp_path)
    text = sbatch.array_script(plan, plan.arrays[1])
    lines = text.splitlines()
    assert lines[0] == "#!/bin/sh"
    assert "#SBATCH --array=0-1" in lines
    assert "#SBATCH --constraint=h100|h200" in lines
    assert "#SBATCH --gres=gpu:1" in lines
    assert "#SBATCH --partition=hopper" in lines
    assert "#SBATCH --mem=16G" in lines
    assert lines[-1].endswith('--kind sm_90 --index "$SLURM_ARRAY_TASK_ID"')
    assert lines[-1].startswith("exec /opt/py/bin/python -m tileproof fleet task --plan ")
    a100 = sbatch.array_script(plan, plan.arrays[0]).splitlines()
    assert "#SBATCH --gres=gpu:a100:1" in a100
    assert "#SBATCH --partition=gpu" in a100
    assert not any("--constraint" in ln for ln in a100)
    merge = sbatch.merge_script(plan, ["11", "12"]).splitlines()
    assert "#SBATCH --dependency=afterany:11:12" in merge
    assert merge[-1].endswith("fleet finish --plan " + str(tmp_path / "fleet" / "plan.json"))


def test_the_ci_cluster_file_loads_and_unknown_kinds_are_one_line(tmp_path):
    cluster = load_cluster(CI_CLUSTER)
    assert set(cluster.kinds) == {"cpu", "sm_90", "sm_100"}
    assert cluster.kinds["sm_90"].constraint == "sm_90"
    with pytest.raises(TileproofError, match=r"--kind sm_75: not in cluster 'uni' \(fix: one of sm_80, sm_90, t4"):
        plan_for(tmp_path, kinds=["sm_75"])


@pytest.mark.parametrize("text, where", [
    ("cluster_version: 2\nname: x\nkinds: {a: {}}\n", "cluster_version: is 2"),
    ("cluster_version: 1\nname: x\nkinds: {}\n", "kinds: "),
    ("cluster_version: 1\nname: x\nkinds: {a: {gpus: 1}}\n", "kinds.a.gpus: Extra inputs"),
    ("cluster_version: 1\nname: x\ntime_limit: soon\nkinds: {a: {}}\n", "time_limit: "),
    ("cluster_version: 1\nname: x\nkinds: {'a b': {}}\n", "kinds.a b: a kind name may hold only"),
    ("[1, 2]\n", "expected a mapping"),
])
def test_a_bad_cluster_file_is_one_line_naming_the_field(tmp_path, text, where):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(RecordError) as e:
        load_cluster(path)
    assert str(e.value).startswith(f"{path}: ")
    assert where in str(e.value)
    assert "(fix: " in str(e.value)
    assert "\n" not in str(e.value)


def test_devices_all_is_every_gpu_nvidia_smi_lists():
    one = parse_gpu_query((REPO / "tests" / "data" / "gpu" / "nvidia-smi-query.csv").read_text())
    assert plan_devices("all", one) == [0]
    with pytest.raises(TileproofError, match="nvidia-smi lists no GPU 1 .fix: one of 0, or 'all'"):
        plan_devices("0,1", one)
    assert plan_devices("all", None) == [0]  # no driver: device 0 alone, which records its no-GPU gate
    assert plan_devices("3,1", None) == [3, 1]
    for bad in ("", "1,1", "x", "-1"):
        with pytest.raises(TileproofError, match="--devices"):
            plan_devices(bad, one)
    assert child_args(["l1"], ["vector_add"], 60.0, Path("/r"), 2) == [
        "l1", "--program", "vector_add", "--timeout", "60.0", "--root", "/r", "--device", "2"]


@pytest.mark.slow(reason="real child tileproof processes, one per device: the fan-out across processes is the point")
def test_devices_fan_out_leaves_one_record_per_program_and_gpu(tmp_path):
    """Real child runs on this machine (no GPU): each device's session records its programs' gates. The command
    itself runs in this process (conftest.run_cli); its children are the processes in question."""
    repo = course.course_repo(tmp_path / "course")
    code, out, err = run_cli("run", "--devices", "0,1", "--record-no-gpu", "--root", str(repo), cwd=repo,
                             env={"PYTHONPATH": str(REPO)})
    proc = subprocess.CompletedProcess([], code, out, err)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # never a pass without a GPU
    runs = [json.loads(p.read_text()) for p in (repo / "runs").glob("*-run-*.json")]
    got = sorted((r["program"], r["environment"]["env"]["CUDA_VISIBLE_DEVICES"], r["verdict"]) for r in runs)
    assert got == sorted((p, d, "no-gpu") for p in course.PROGRAMS for d in ("0", "1"))
    assert len(list((repo / "runs").glob("*-session-*.json"))) == 2
    assert "[gpu 1]" in proc.stdout
    assert "0/2 GPUs passed every program" in proc.stdout


def test_slurm_job_states_are_a_closed_set():
    from tileproof.runner.slurm import ENDED, SlurmError, _state

    assert _state("CANCELLED by 0", "scontrol") == "CANCELLED"
    assert "CANCELLED" in ENDED
    assert _state("COMPLETED", "sacct") == "COMPLETED"
    assert _state("RUNNING", "sacct") not in ENDED
    with pytest.raises(SlurmError, match="job state 'DONE-ISH' is not one tileproof knows"):
        _state("DONE-ISH", "sacct")


SLURM_DATA = REPO / "tests" / "data" / "fleet" / "slurm"


def test_how_slurm_ended_each_array_task_is_read_from_scontrols_lines():
    """Real ``scontrol show job -o`` of a three-task array (exit 0, exit 3, past its one-minute limit), while
    running and after; tests/test_fleet_slurm.py asks a live cluster the same."""
    from tileproof.runner.slurm import CUT_SHORT, task_states_accounted, task_states_shown

    running = task_states_shown((SLURM_DATA / "scontrol-show-job-array-running.txt").read_text(), "1")
    assert running == {0: "COMPLETED", 1: "FAILED", 2: "PENDING"}
    ended = task_states_shown((SLURM_DATA / "scontrol-show-job-array-ended.txt").read_text(), "1")
    assert ended == {0: "COMPLETED", 1: "FAILED", 2: "TIMEOUT"}
    assert [s for s in ended.values() if s in CUT_SHORT] == ["TIMEOUT"]
    # sacct's --parsable2 lines (JobID|State) once the controller has forgotten the array; a range is pending
    assert task_states_accounted("1_0|COMPLETED\n1_2|TIMEOUT\n1_[3-4]|PENDING\n12_0|FAILED\n", "1") == {
        0: "COMPLETED", 2: "TIMEOUT"}


@pytest.mark.parametrize("poll", ["0", "-1"])
def test_submit_refuses_a_poll_that_is_not_positive_before_submitting_anything(tmp_path, capsys, poll):
    from tileproof.__main__ import main

    out = tmp_path / "fleet"
    code = main(["fleet", "submit", "--cluster", str(CI_CLUSTER), "--root", str(tmp_path), "--out", str(out),
                 "--wait", "--poll", poll])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert f"--poll {float(poll)}: expected seconds > 0 (fix: e.g. --poll 2)" in err
    assert not out.exists()


def _fake_clients(tmp_path: Path, monkeypatch, **scripts: str) -> None:
    """Slurm's client commands as small shell scripts first on PATH."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def test_sbatch_answers_a_job_id_or_its_refusal_and_is_stopped_when_it_hangs(tmp_path, monkeypatch):
    """sbatch is a short query (runner.query): a job id, sbatch's own refusal line, or one line at its deadline."""
    from tileproof.runner import slurm
    from tileproof.runner.query import QueryError

    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/sh\n")
    _fake_clients(tmp_path, monkeypatch, sbatch='case "$2" in *job*) echo "4242;tp" ;; esac')
    assert slurm.sbatch(script, cwd=tmp_path) == slurm.Submission(job_id="4242", refused=None)
    (tmp_path / "fakebin" / "sbatch").write_text(
        "#!/bin/sh\necho 'sbatch: error: warming up' >&2\n"
        "echo 'sbatch: error: Batch job submission failed: Invalid feature specification' >&2\nexit 1\n")
    assert slurm.sbatch(script, cwd=tmp_path).refused == \
        "sbatch: error: Batch job submission failed: Invalid feature specification"
    (tmp_path / "fakebin" / "sbatch").write_text("#!/bin/sh\nexec sleep 600\n")
    monkeypatch.setattr(slurm, "SUBMIT_TIMEOUT_S", 0.5)
    with pytest.raises(QueryError, match=r"sbatch --parsable .*job\.sbatch: no answer in 0\.5 s"):
        slurm.sbatch(script, cwd=tmp_path)


def test_a_job_s_state_comes_from_scontrol_then_sacct(tmp_path, monkeypatch):
    from tileproof.runner import slurm

    _fake_clients(tmp_path, monkeypatch,
                  scontrol='[ "$4" = 7 ] && echo "JobId=7 JobName=x JobState=RUNNING Reason=None" && exit 0\n'
                           'echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1',
                  sacct='[ "$6" = 8 ] && echo "COMPLETED" && exit 0\necho "sacct: error: no accounting" >&2; exit 1')
    assert slurm.job_state("7") == "RUNNING"
    assert slurm.job_state("8") == "COMPLETED"
    with pytest.raises(slurm.SlurmError, match=r"job 9: neither scontrol nor sacct knows its state "
                                               r"\(sacct: error: no accounting\)"):
        slurm.job_state("9")


def test_a_cluster_s_time_limit_is_read_as_slurm_reads_it(tmp_path):
    """The deadline of a fleet task's ``tileproof run`` child (fleet.tasks.run_task)."""
    cluster = load_cluster(CI_CLUSTER)
    for limit, seconds in [("01:00:00", 3600), ("90", 5400), ("90:30", 5430), ("2-0", 172800), ("2-3:04", 183840),
                           ("1-00:00:01", 86401), ("0", None)]:
        assert cluster.model_copy(update={"time_limit": limit}).time_limit_s() == seconds, limit


def test_a_default_submit_leaves_out_a_lesson_without_programs_and_says_so(tmp_path, capsys):
    """A note whose numbers are all bench claims (``programs: []``) has no task; named, it is refused."""
    from tileproof.__main__ import main

    repo = course.course_repo(tmp_path / "course")
    note = (REPO / "lessons" / "day79-cutile-performance.md").read_text()
    (repo / "lessons" / "note.md").write_text(note.replace("id: day79-cutile-performance", "id: note", 1))
    args = ["fleet", "submit", "--cluster", str(CI_CLUSTER), "--root", str(repo), "--dry-run"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "fleet: lessons/note.md lists no programs: no task for it" in err
    tasks = [ln for ln in out.splitlines() if ln.startswith("# ")]
    assert tasks
    assert all("note" not in ln.split(": ", 1)[1].split(", ") for ln in tasks)
    assert sorted(tasks[0].split(": ", 1)[1].split(", ")) == sorted(course.LESSONS)
    assert main([*args, "--lesson", "note"]) == 2
    assert "lessons/note.md: programs: empty; nothing to run (fix: list its programs)" in capsys.readouterr().err
