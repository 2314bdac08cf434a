"""The run command end to end in a temp copy: no-GPU here, passed on a GPU."""

import shutil
from pathlib import Path

import pytest
from conftest import cli_args, gpu, no_gpu, run_cli
from one_freeze import pip_freeze_once  # noqa: F401  # used by pytestmark
from own_processes import left, named_sleep

from tileproof.commands import run as run_cmd
from tileproof.records.errors import TileproofError
from tileproof.records.models import RUN_VERSION, RunRecord, SessionRecord
from tileproof.records.store import load_records, seal_of
from tileproof.runner.process import containment, isolation

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("pip_freeze_once")



@pytest.fixture
def tree(tmp_path):
    for folder in ("kernels", "lessons"):
        shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "cpp").mkdir()
    return tmp_path


def args(root, *program, record_no_gpu=True, timeout=300.0):
    names = [a for p in program for a in ("--program", p)]
    return cli_args("run", "--root", str(root), "--timeout", str(timeout), *names,
                    *(["--record-no-gpu"] if record_no_gpu else []))


def run(root, *program, record_no_gpu=True):
    return run_cmd.run(args(root, *program, record_no_gpu=record_no_gpu))


@no_gpu
def test_no_gpu_run_is_recorded_and_fails(tree, capsys):
    assert run(tree, "vector_add") == 1
    out = capsys.readouterr().out
    assert "no usable GPU" in out
    records = load_records(tree)
    runs = [r for r in records if isinstance(r, RunRecord)]
    sessions = [r for r in records if isinstance(r, SessionRecord)]
    assert [r.verdict for r in runs] == ["no-gpu"]
    assert sessions
    assert sessions[0].runs == [runs[0].run_id]
    rec = runs[0]
    assert rec.seal == seal_of(rec)
    # started through tileproof's launcher (toolchain/launch.py), which keeps the exception that ends it
    assert rec.step.argv[1].endswith("tileproof/toolchain/launch.py")
    assert rec.step.argv[3].endswith("kernels/vector_add.py")
    assert rec.step.exit_code == 1
    assert rec.step.stdout.path.endswith("vector_add-gate-stdout.txt")
    assert rec.report
    assert rec.report.gate == "no-gpu"
    # run_version 3 and up: the program and the helper it imports, whole; the tolerance table per entry, never
    # whole; 4: the cuda-tile release it imported, and no failure (the gate refused, nothing raised); 5: no outside
    # check (the gate refused: nothing was computed, nothing handed over)
    assert {s.path for s in rec.sources} >= {"kernels/vector_add.py", "kernels/harness.py"}
    assert rec.run_version == RUN_VERSION
    assert rec.outside is None
    assert "kernels/tolerances.py" not in {s.path for s in rec.sources}
    assert rec.cuda_tile is not None
    assert rec.cuda_tile.in_range
    assert rec.failure is None
    assert (tree / rec.environment.pip_freeze.path).read_text()
    assert "CUDA_HOME" not in rec.environment.env


@no_gpu
def test_no_gpu_run_writes_nothing_unless_asked(tree, capsys):
    before = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    assert run(tree, "vector_add", record_no_gpu=False) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    assert out[0].startswith("run: no usable GPU")
    assert "--record-no-gpu" in out[0]
    assert sorted(p.relative_to(tree) for p in tree.rglob("*")) == before
    assert not (tree / "runs").exists()
    assert not (tree / "evidence").exists()


@no_gpu
def test_no_gpu_run_is_refused_by_the_cli(tree):
    """The command line itself (its ``main``, from the tree): one line, exit 1, nothing written."""
    code, out, err = run_cli("run", "--root", str(tree), "--program", "vector_add", cwd=tree)
    assert code == 1, err
    assert out.strip().startswith("run: no usable GPU")
    assert len(out.strip().splitlines()) == 1
    assert not (tree / "runs").exists()
    assert not (tree / "evidence").exists()


def test_unknown_program_is_one_line(tree):
    with pytest.raises(TileproofError, match="no such program") as e:
        run(tree, "vectr_add")
    assert "\n" not in str(e.value)


@gpu
def test_vector_add_passes_on_this_gpu(tree):
    assert run(tree, "vector_add") == 0
    runs = [r for r in load_records(tree) if isinstance(r, RunRecord)]
    assert [r.verdict for r in runs] == ["passed"]
    assert float(runs[0].environment.gpu.compute_capability) >= 8.0


HANG = '''"""A fake lesson program: its grandchild leaves the session and sleeps forever."""
import subprocess

AOT_SIGNATURES = {}  # makes it a program for ``run``'s discovery

kid = subprocess.Popen(["setsid", "SLEEP", "infinity"])
print("GPU 0: fake, compute capability 9.0", flush=True)
subprocess.run(["SLEEP", "infinity"])
'''
"""SLEEP: a ``named_sleep``, by whose name the test finds the grandchild and the child (a PID read inside a
PID namespace would mean nothing outside it, and other tests' steps sleep beside this one)."""


@pytest.mark.skipif(shutil.which("setsid") is None or not Path("/proc/self/stat").exists(),
                    reason="needs setsid(1) and /proc (Linux)")
@pytest.mark.slow(reason="waits out a real 3 s --timeout on a program that escaped into its own session")
def test_setsid_sleep_infinity_under_timeout_3_ends_and_leaves_nothing(tree, capsys):
    sleep = named_sleep(tree)
    (tree / "kernels" / "hang.py").write_text(HANG.replace("SLEEP", str(sleep)))
    assert run_cmd.run(args(tree, "hang", timeout=3.0)) == 1
    rec = next(r for r in load_records(tree) if isinstance(r, RunRecord))
    assert rec.verdict == "timeout"
    assert rec.step.timed_out
    assert rec.step.exit_code is None
    assert 3.0 <= rec.step.duration_s < 5.0
    assert rec.step.strays_killed == 1
    assert "left running were killed" in rec.reason
    assert rec.step.step_version == 3
    assert rec.step.containment == ("pid-namespace" if isolation() != "none" else containment())
    assert rec.step.isolation == isolation()
    assert not left(sleep.name), "killed and reaped"
    marker = b"TILEPROOF_STEP="
    for proc in Path("/proc").iterdir():  # nothing of the step is left anywhere (its sleeps: their name)
        if proc.name.isdigit() and proc.name != str(__import__("os").getpid()):
            try:
                env = (proc / "environ").read_bytes()
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            assert not (marker in env and b"infinity" in cmd and sleep.name.encode() in cmd), proc
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("run: 1 timeout; session ")
