"""runner.session: the one GPU query per session (with its deadline), the typed session state, and the
``--devices`` fan-out's children with their session's deadline. nvidia-smi is a fake here, answering
with the real captured query (tests/data/gpu/nvidia-smi-query.csv)."""

import importlib.util
import typing
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import cli_args, no_gpu, sources_tree
from one_freeze import pip_freeze_once  # noqa: F401  # used by pytestmark

from tileproof.commands import run as run_cmd
from tileproof.fleet import devices
from tileproof.records.errors import TileproofError
from tileproof.records.models import RunRecord
from tileproof.records.store import load_records, write_record
from tileproof.runner import capture, children, session

REPO = Path(__file__).resolve().parents[1]
QUERY = REPO / "tests" / "data" / "gpu" / "nvidia-smi-query.csv"
pytestmark = pytest.mark.usefixtures("pip_freeze_once")
_spec = importlib.util.spec_from_file_location("audit_tree", REPO / "tests" / "data" / "audit" / "audit_tree.py")
audit_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(audit_tree)


def fake_nvidia_smi(tmp_path: Path, monkeypatch, body: str) -> Path:
    """``nvidia-smi`` first on PATH: logs each call's arguments to ``calls.txt``, then runs ``body``."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "calls.txt"}\n{body}\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return tmp_path / "calls.txt"


LISTS_ONE_H200 = f'case "$1" in --query-gpu=*) cat {QUERY} ;; *) echo "FIXTURE nvidia-smi" ;; esac'


@pytest.fixture
def tree(tmp_path):
    """kernels/ and lessons/ in a temporary repository (conftest.sources_tree)."""
    return sources_tree(tmp_path)


def test_the_gpu_query_reads_nvidia_smi_s_rows(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, monkeypatch, LISTS_ONE_H200)
    query = capture.gpu_query()
    assert query.done is not None
    assert query.done.argv == tuple(capture.GPU_QUERY_ARGV)
    assert [(r["index"], r["name"], r["compute_capability"]) for r in query.rows or []] == [(0, "NVIDIA H200", "9.0")]
    assert query.why_not(0) is None
    assert query.why_not(1) == "nvidia-smi lists no GPU 1 (exit 0)"


def test_without_nvidia_smi_there_is_no_query(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    query = capture.gpu_query()
    assert (query.done, query.rows, query.why_not(0)) == (None, None, capture.NO_DRIVER)


def test_a_hung_nvidia_smi_is_stopped_at_the_query_s_deadline(tree, tmp_path, monkeypatch, capsys):
    """The one query has a deadline: a driver that hangs nvidia-smi is "no usable GPU", in one line."""
    fake_nvidia_smi(tmp_path, monkeypatch, "exec sleep 600")
    monkeypatch.setattr(capture, "GPU_QUERY_TIMEOUT_S", 0.5)
    assert capture.gpu_query().why_not(0) == "nvidia-smi did not answer in 0.5 s"
    assert run_cmd.run(cli_args("run", "--program", "vector_add", "--root", str(tree))) == 1
    assert capsys.readouterr().out.strip() == ("run: no usable GPU: nvidia-smi did not answer in 0.5 s; nothing run "
                                               "or recorded (--record-no-gpu records the gates)")
    assert not (tree / "runs").exists()


@no_gpu
def test_one_session_asks_nvidia_smi_for_its_gpus_once(tree, tmp_path, monkeypatch, capsys):
    """The look before the session and the session's own capture are one query: its transcript is the one
    kept (before: nvidia-smi --query-gpu ran twice per run)."""
    calls = fake_nvidia_smi(tmp_path, monkeypatch, LISTS_ONE_H200)
    assert run_cmd.run(cli_args("run", "--program", "vector_add", "--root", str(tree))) == 1  # no cupy: its gate
    assert [c for c in calls.read_text().splitlines() if c.startswith("--query-gpu")] == \
        [" ".join(capture.GPU_QUERY_ARGV[1:])]
    (rec,) = [r for r in load_records(tree) if isinstance(r, RunRecord)]
    assert rec.environment.gpu is not None
    assert rec.environment.gpu.name == "NVIDIA H200"
    assert rec.environment.nvidia_smi_query is not None
    assert (tree / rec.environment.nvidia_smi_query.path).read_bytes() == QUERY.read_bytes()
    assert rec.verdict == "no-gpu"
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("run: 1 no-gpu;")


def test_the_session_state_is_typed():
    hints = typing.get_type_hints(session._Session)
    assert hints
    assert typing.Any not in hints.values()
    assert not [n for n, t in hints.items() if "Any" in str(t)]


def test_a_fan_out_child_has_its_session_s_deadline_and_the_options_passed_on(tree, monkeypatch):
    """``--devices``: one child per GPU nvidia-smi lists (or names), each with ``session.deadline`` for the
    programs it runs, ``--record-no-gpu`` and ``--output-cap`` passed on."""
    monkeypatch.setattr(devices, "gpu_query", lambda: capture.GpuQuery(None, [{"index": 0}, {"index": 3}]))
    seen = {}

    def in_parallel(jobs, deadline_s):
        seen.update(jobs=jobs, deadline_s=deadline_s)
        for args, _ in jobs:  # what each child writes under the session id it was given: a passed run per program
            sid = args[args.index("--session-id") + 1]
            env = audit_tree.environment(tree, sid)
            when = datetime.now(timezone.utc)
            runs = [audit_tree.run_record(tree, env, f"kernels/{p}.py", checks=[p], lessons=[], when=when)
                    for p in ("fused", "vector_add")]
            for record in [*runs, audit_tree.session_record(sid, runs, when)]:
                write_record(tree, record)
        return [children.Child(tuple(args), 0, deadline_s, "run: 1 passed; session S\n", "") for args, _ in jobs]

    monkeypatch.setattr(children, "in_parallel", in_parallel)
    said: list[str] = []
    request = session.Request(root=tree, lessons=(), programs=("vector_add", "fused"), device=0, timeout=60.0,
                              cap=4096, record_no_gpu=True)
    assert devices.fan_out("all", request, say=said.append) == 0
    assert seen["deadline_s"] == session.deadline(2, 60.0) == 2 * 60.0 + session.SETUP_S
    assert [args[args.index("--device") + 1] for args, _ in seen["jobs"]] == ["0", "3"]
    assert all(args[:4] == ["run", "--record-no-gpu", "--output-cap", "4096"] for args, _ in seen["jobs"])
    assert said[-1] == "run: --devices all: 2/2 GPUs passed every program"
    with pytest.raises(TileproofError, match="--program nope: no such program"):
        devices.fan_out("all", session.Request(tree, (), ("nope",), 0, 60.0, None, False), say=said.append)


# --- a full disk ------------------------------------------------------------------------------


PASSED_REPORT = """
import json, sys
AOT_SIGNATURES = {}  # what makes a kernels/*.py file a program
json.dump({"report_version": 1, "program": sys.argv[0], "seed": 1, "device": None, "gate": "ok",
           "gate_message": "GPU 0", "checks": [], "passed": True},
          open(sys.argv[sys.argv.index("--report") + 1], "w"))
"""


@pytest.fixture
def small_evidence(tree):
    """``tree/evidence`` on its own 1 MiB tmpfs (root only: mount(2)), unmounted afterwards."""
    import os
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a size-capped tmpfs over evidence/ needs root and mount(8)")
    evidence = tree / "evidence"
    evidence.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(evidence)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield evidence
    finally:
        subprocess.run(["umount", "-l", str(evidence)], check=True)


def tileproof(tree: Path, capsys: pytest.CaptureFixture[str], *argv: str):
    """``tileproof run ARGV --root TREE`` by the command line's own ``main`` (its exit status, its one line for a
    refusal), in this process: what it prints, and the status it exits with."""
    import subprocess

    from tileproof.__main__ import main

    capsys.readouterr()
    code = main(["run", *argv, "--root", str(tree)])
    said = capsys.readouterr()
    return subprocess.CompletedProcess(["tileproof", "run", *argv], code, said.out, said.err)


@no_gpu
def test_a_full_disk_is_one_line_leaves_nothing_and_the_next_run_works(tree, small_evidence, tmp_path, monkeypatch,
                                                                       capsys):
    """A program whose output fills the file system evidence/ is on: before, the run ended in an
    ``OSError: [Errno 28]`` traceback from ``store.write_once`` and left the session's transcripts and
    the records written so far behind."""
    fake_nvidia_smi(tmp_path, monkeypatch, LISTS_ONE_H200)
    (tree / "kernels" / "a_quiet.py").write_text(PASSED_REPORT + "print('quiet')\n")
    (tree / "kernels" / "b_flood.py").write_text(PASSED_REPORT + "sys.stdout.write('x' * (2 << 20))\n")
    full = tileproof(tree, capsys, "--program", "a_quiet", "--program", "b_flood", "--output-cap", str(4 << 20))
    out = full.stdout + full.stderr
    assert full.returncode == 2, out
    assert "Traceback" not in out, out
    (line,) = [ln for ln in out.splitlines() if "cannot be written" in ln]
    assert "b_flood-stdout.txt: cannot be written (No space left on device) (fix: free space" in line
    assert line.endswith("file(s) this session had written were removed")
    assert list(small_evidence.iterdir()) == []
    assert not (tree / "runs").exists() or list((tree / "runs").iterdir()) == []
    again = tileproof(tree, capsys, "--program", "a_quiet")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.strip().splitlines()[-1].startswith("run: 1 passed;")
    assert sorted(r.kind for r in load_records(tree)) == ["run", "session"]
