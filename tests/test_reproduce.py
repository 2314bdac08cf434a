"""``tileproof reproduce RUN_ID``: the comparison by diff's rules (pure, FIXTURE records), the command on a CPU box
with a fake nvidia-smi (a real run session over the course's programs, which cannot pass without a GPU), every
exit code, and on a real GPU the committed record run again (skipped without one)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from conftest import REPO, clone_at, gpu
from test_fleet_devices import fake_host
from test_perf_claims import bench_record, case

from tileproof.__main__ import main
from tileproof.commands import reproduce as reproduce_cmd
from tileproof.judge import reproduce
from tileproof.records import store

L4 = dict(name="NVIDIA L4", uuid="GPU-f1c7ee00-0000-4000-8000-000000000089", cc="8.9", driver="580.65.06")
KEY = "matmul/grouped/4096x4096x4096/128x256x64+warps8"


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


course = load("course", REPO / "tests" / "data" / "fleet" / "course.py")
audit_tree = course.audit_tree()


def timed(ms: float, key: str = KEY, spread: float = 0.005):
    return case(key, spread=spread).model_copy(update={"median_ms": ms})


# --- the comparison ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ms, spread, reproduced", [(0.22, 0.005, True), (0.2222, 0.005, True),
                                                     (0.30, 0.005, False), (0.30, 0.30, True)],
                         ids=["same", "within-noise", "slower-beyond-noise", "slower-but-noisy"])
def test_a_bench_record_reproduced_or_not(ms, spread, reproduced):
    cited = bench_record(1, [timed(0.22)])
    result = reproduce.compare(cited, bench_record(2, [timed(ms, spread=spread)]))
    assert result.reproduced is reproduced, result.why_not
    lines = reproduce.lines(result)
    assert lines[0].startswith(f"reproduce {cited.run_id} (kernels/bench/matmul_bench.py, NVIDIA H200, cc 9.0) here "
                               "as FIXTURE-")
    assert lines[0].endswith("reproduced") is reproduced


def test_another_gpu_class_is_shown_not_judged():
    result = reproduce.compare(bench_record(1, [timed(0.22)]), bench_record(2, [timed(0.50)], gpu=L4))
    assert result.reproduced and not result.same_class
    assert "another GPU class: the times are shown, not judged" in "\n".join(reproduce.lines(result))
    assert ("GPU", "NVIDIA H200 cc 9.0", "NVIDIA L4 cc 8.9") in [(f.name, f.before, f.after) for f in
                                                                 result.environment]


def test_a_case_not_timed_here_or_a_failed_bench_does_not_reproduce():
    cited = bench_record(1, [timed(0.22), timed(0.3, key="matmul/cublas/4096x4096x4096")])
    result = reproduce.compare(cited, bench_record(2, [timed(0.22)]))
    assert result.why_not == ["matmul/cublas/4096x4096x4096: not measured here"]
    failed = reproduce.compare(bench_record(1, [timed(0.22)]), bench_record(2, [timed(0.22)], verdict="failed"))
    assert failed.why_not == ["the run here is failed"]


def test_a_run_record_reproduced_or_not(tmp_path):
    root = tmp_path / "t"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "softmax.py").write_text("# FIXTURE\n")
    when = datetime(2026, 12, 1, tzinfo=timezone.utc)
    env = audit_tree.environment(root, store.new_run_id("session", when))
    there = audit_tree.run_record(root, env, "kernels/softmax.py", checks=["softmax"], lessons=[], when=when)
    again = audit_tree.run_record(root, env, "kernels/softmax.py", checks=["softmax"], lessons=[],
                                  when=when + timedelta(hours=1))
    result = reproduce.compare(there, again)
    assert result.reproduced and [(c.check, c.cited, c.here, c.judged) for c in result.checks] == [
        ("softmax", True, True, "within-noise")]
    failing = audit_tree.run_record(root, env, "kernels/softmax.py", checks=["softmax"], lessons=[],
                                    when=when + timedelta(hours=2), passed=False)
    assert reproduce.compare(there, failing).why_not == ["the run here is failed",
                                                         f"softmax: passed in {there.run_id}, failed here"]
    with pytest.raises(ValueError, match="is not a run of"):
        reproduce.compare(there, bench_record(1, [timed(0.22)]))


# --- the command ------------------------------------------------------------------------------------------------


@pytest.fixture
def course_with_records(tmp_path):
    """The miniature course, committed, with one simulated H200 host's passing records committed too."""
    root = course.course_repo(tmp_path / "course")
    course.host_records(root, 1)
    course.git(root, "add", "-A")
    course.git(root, "commit", "-q", "-m", "records")
    return root


def run_of(root: Path, program: str) -> str:
    return next(p.stem for p in sorted((root / "runs").glob("*-run-*.json"))
                if store.load_record(p).program == program)


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow(reason="a real run session over a lesson program, on a fake GPU")
def test_on_a_cpu_box_with_a_fake_gpu_the_record_does_not_reproduce(course_with_records, tmp_path, monkeypatch,
                                                                     capsys):
    """nvidia-smi answers as an H200, so the session starts and the program runs for real; with no GPU behind it
    the program cannot pass: not reproduced, exit 1, and the new record is under runs/ like any other."""
    root = course_with_records
    fake_host(tmp_path, monkeypatch, 2)  # a host of two H200s, as the fleet tests' fake answers
    cited = run_of(root, "kernels/vector_add.py")
    before = set((root / "runs").iterdir())
    code, out, _err = cli(capsys, "reproduce", cited, "--root", str(root), "--timeout", "120")
    assert code == 1, out
    (head,) = [line for line in out.splitlines() if line.startswith("reproduce ")]  # after the session's own lines
    assert head.startswith(f"reproduce {cited} (kernels/vector_add.py, NVIDIA H200, cc 9.0) here as ")
    assert "NOT REPRODUCED: the run here is " in head
    assert "vector_add: passed in " in head
    made = {p.name for p in set((root / "runs").iterdir()) - before}
    assert any("-run-" in n for n in made) and any("-session-" in n for n in made)


def test_a_fresh_record_that_passes_reproduces(course_with_records, monkeypatch, capsys):
    """The runner is the only part a CPU box cannot play: given the run a GPU would make, the command compares."""
    root = course_with_records
    cited_id = run_of(root, "kernels/vector_add.py")
    cited = store.load_record(store.record_path(root, cited_id))

    def on_a_gpu(root_, rec, _args):
        env = audit_tree.environment(root_, store.new_run_id("session"))
        return audit_tree.run_record(root_, env, rec.program, checks=["vector_add"], lessons=[],
                                     when=datetime.now(timezone.utc))
    monkeypatch.setattr(reproduce_cmd, "run_here", on_a_gpu)
    code, out, _err = cli(capsys, "reproduce", cited_id, "--root", str(root))
    assert code == 0, out
    assert out.splitlines()[0].endswith(": reproduced")
    assert "  check vector_add: passed -> passed" in out
    assert cited.program == "kernels/vector_add.py"


def test_without_a_gpu_nothing_runs(course_with_records, tmp_path, monkeypatch, capsys):
    root = course_with_records
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    before = sorted((root / "runs").iterdir())
    code, out, _err = cli(capsys, "reproduce", run_of(root, "kernels/vector_add.py"), "--root", str(root))
    assert code == 1 and out.startswith("reproduce: no usable GPU: ")
    assert sorted((root / "runs").iterdir()) == before


def test_bad_run_ids_are_one_line_and_exit_2(course_with_records, capsys):
    root = course_with_records
    code, _out, err = cli(capsys, "reproduce", "20261101T000000Z-run-00000000", "--root", str(root))
    assert code == 2 and err.count("\n") == 1 and "no record of that id" in err
    session_id = next(p.stem for p in (root / "runs").glob("*-session-*.json"))
    code, _out, err = cli(capsys, "reproduce", session_id, "--root", str(root))
    assert code == 2 and "a session record; reproduce runs a run or bench record's program" in err
    # a record whose bytes changed after sealing: it does not count
    path = store.record_path(root, run_of(root, "kernels/vector_add.py"))
    raw = json.loads(path.read_text())
    raw["step"]["duration_s"] += 1.0
    path.write_text(json.dumps(raw))
    code, _out, err = cli(capsys, "reproduce", path.stem, "--root", str(root))
    assert code == 2 and "it does not count (seal broken)" in err


COMMITTED_H200_RUN = "20261204T195611Z-run-bc0b0606"
"""kernels/tile_matmul_softmax.py on the H200 (cc 9.0), 2026-12-04: what day79-cutile cites."""


@gpu
@pytest.mark.slow(reason="runs a lesson program on the GPU")
def test_the_committed_record_reproduces_on_this_gpu(tmp_path, capsys):
    """On an H200 (or any GPU of cc 9.0 with the lock's toolchain): the committed record's program runs again and
    its checks pass. Elsewhere a GPU's other class is shown, not judged, and the checks must still pass."""
    root = clone_at(tmp_path / "repo", subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True,
                                                      capture_output=True, text=True).stdout.strip())
    code, out, _err = cli(capsys, "reproduce", COMMITTED_H200_RUN, "--root", str(root))
    assert code == 0, out
