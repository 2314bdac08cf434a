"""The audit's own file pass reads every input through ``records.safe_read``.

Each hostile input is planted in a copy of the clean audit tree
(tests/data/audit/audit_tree.py) and the real command runs on it:
``tileproof audit --allow-no-history --root TREE``. A planted link, FIFO, stray
file or broken claims file is one named finding and a non-zero exit, never a
traceback, a hang or an accepted file. Attacks that could hang run the command in
a subprocess with a 20 s timeout, so a hang fails the test instead of the suite.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tileproof.__main__ import main
from tileproof.gather import audit as audit_run
from tileproof.records import store
from tileproof.records.errors import InputProblem

REPO = Path(__file__).resolve().parents[1]
PASSWD = Path("/etc/passwd")
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")


def audit_cli(root: Path, timeout: float = 20) -> subprocess.CompletedProcess:
    """``python -m tileproof audit --allow-no-history --root root`` in a subprocess; a hang fails."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    try:
        return subprocess.run([sys.executable, "-m", "tileproof", "audit", "--allow-no-history", "--root", str(root)],
                              env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"audit did not finish within {timeout} s (it blocked on an input)")


def finding_lines(out: str, rule: str) -> list[str]:
    return [line for line in out.splitlines() if f": {rule}: " in line]


def test_clean_tree_has_no_findings(audit_copy, capsys):
    root, _ = audit_copy
    assert main(["audit", "--allow-no-history", "--root", str(root)]) == 0


def test_every_refusal_kind_is_a_registered_rule():
    from typing import get_args

    from tileproof.judge.audit.rules import inputs

    for kind in get_args(InputProblem):
        assert inputs.rule_for(kind) == f"input-{kind}"
        assert inputs.rule_for(kind) in audit_run.RULES
    assert inputs.STRAY in audit_run.RULES


def test_symlink_to_etc_passwd_with_matching_digest_is_refused(audit_copy, capsys):
    """The attack as described: a transcript replaced by a link to /etc/passwd, the record's
    digest set to /etc/passwd's and resealed. The audit must refuse the link, not hash it."""
    if not PASSWD.is_file():
        pytest.skip("needs /etc/passwd")
    root, info = audit_copy
    rec = info["run"]
    target = rec.step.stdout
    data = PASSWD.read_bytes()
    forged = target.model_copy(update={"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)})
    new = type(rec).model_validate(rec.model_copy(update={"step": rec.step.model_copy(update={"stdout": forged})})
                                   .model_dump())
    new = new.model_copy(update={"seal": store.seal_of(new)})
    store.record_path(root, rec.run_id).write_text(new.model_dump_json(indent=2) + "\n")
    link = root / target.path
    link.unlink()
    link.symlink_to(PASSWD)
    assert main(["audit", "--allow-no-history", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    (line,) = finding_lines(out, "input-symlink")
    assert line.startswith(f"{target.path}: input-symlink: ")
    assert "Traceback" not in out


@needs_fifo
@pytest.mark.parametrize("planted", ["evidence/pipe.txt", "runs/20260101T000000Z-run-deadbeef.json"])
def test_fifo_is_a_finding_not_a_hang(audit_copy, planted):
    root, _ = audit_copy
    os.mkfifo(root / planted)
    proc = audit_cli(root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = finding_lines(proc.stdout, "input-special-file")
    assert line.startswith(f"{planted}: input-special-file: ")
    assert "FIFO" in line or planted.startswith("runs/")
    assert "Traceback" not in proc.stderr


@needs_fifo
def test_fifo_in_lessons_claims_is_a_finding(audit_copy):
    root, _ = audit_copy
    (root / "lessons" / "claims").mkdir(exist_ok=True)
    os.mkfifo(root / "lessons" / "claims" / "01-vector-add.claims.yaml")
    proc = audit_cli(root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = finding_lines(proc.stdout, "input-special-file")
    assert line.startswith("lessons/claims/01-vector-add.claims.yaml: input-special-file: ")
    assert "Traceback" not in proc.stderr


def test_stray_file_in_runs_is_a_finding(audit_copy, capsys):
    root, _ = audit_copy
    (root / "runs" / "notes.txt").write_text("not a record\n")
    (root / "runs" / "old").mkdir()
    assert main(["audit", "--allow-no-history", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert sorted(finding_lines(out, "runs-stray-file")) == [
        line for line in sorted(out.splitlines()) if line.startswith(("runs/notes.txt: ", "runs/old: "))]
    assert len(finding_lines(out, "runs-stray-file")) == 2


def test_linked_record_is_refused(audit_copy, capsys):
    """A record file that is a link (even to a valid record) is refused, not followed."""
    root, info = audit_copy
    rec = info["run"]
    path = store.record_path(root, rec.run_id)
    moved = root / "elsewhere.json"
    path.rename(moved)
    path.symlink_to(moved)
    assert main(["audit", "--allow-no-history", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    (line,) = finding_lines(out, "input-symlink")
    assert line.startswith(f"runs/{path.name}: input-symlink: ")


def plant_claims(root: Path, lesson_id: str, data: bytes) -> str:
    (root / "lessons" / "claims").mkdir(exist_ok=True)
    rel = f"lessons/claims/{lesson_id}.claims.yaml"
    (root / rel).write_bytes(data)
    return rel


def test_non_utf8_claims_file_is_one_finding(audit_copy):
    """A draft lesson's claims file with a non-UTF-8 byte: exactly one finding, no traceback."""
    root, _ = audit_copy
    rel = plant_claims(root, "02-softmax", b"claims_version: 1\ndocument: \xff\xfe\n")
    proc = audit_cli(root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    findings = [line for line in proc.stdout.splitlines() if line.startswith(("lessons/", "runs/", "evidence/"))
                and ": draft, " not in line]
    assert findings == [f"{rel}: input-not-utf8: byte 28: not UTF-8 (byte 0xff) (fix: save the file as UTF-8 text)"]


def test_broken_claims_file_of_a_published_lesson(audit_copy, capsys):
    """A published lesson whose claims file does not parse: the file's finding, and the lesson's
    decision cannot be made (it is not silently dropped)."""
    root, _ = audit_copy
    rel = plant_claims(root, "01-vector-add", b"claims: [unclosed\n")
    assert main(["audit", "--allow-no-history", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert [line.split(": ")[:2] for line in out.splitlines() if ": claims-file: " in line
            or ": lesson-undecided: " in line] == [["lessons/01-vector-add.md", "lesson-undecided"],
                                                   [rel, "claims-file"]]


def test_oversized_evidence_file_is_refused(audit_copy, capsys, monkeypatch):
    from tileproof.records import safe_read

    root, _ = audit_copy
    cap = max(p.stat().st_size for p in (root / "evidence").rglob("*") if p.is_file())
    monkeypatch.setitem(safe_read.LIMITS, "evidence", cap)
    (root / "evidence" / "big.txt").write_bytes(b"x" * (cap + 1))
    assert main(["audit", "--allow-no-history", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    (line,) = finding_lines(out, "input-too-large")
    assert line.startswith("evidence/big.txt: input-too-large: ")


# --- other readers of hostile values ---------------------------------------------------------


def test_unreadable_compute_capability_is_an_outcome_not_a_traceback(tmp_path, monkeypatch, capsys):
    """nvidia-smi's compute_cap 'N/A' (records.capability.sm_of raises on it): run records each
    program's gate without a usable GPU, says why in one line and fails."""
    from conftest import cli_args

    from tileproof.commands import run as run_cmd
    from tileproof.records.models import GpuFacts, RunRecord
    from tileproof.runner import session
    from tileproof.runner.capture import GpuProbe

    for folder in ("kernels", "lessons"):
        shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "cpp").mkdir()
    facts = GpuFacts(index=0, name="NVIDIA H200", uuid="GPU-0", compute_capability="N/A",
                     runtime_compute_capability=None, driver_version="580.95.05", memory_total_mib=None,
                     clocks_sm_mhz=None, clocks_mem_mhz=None)
    monkeypatch.setattr(session, "session_start", lambda root, sid, device, query: (GpuProbe(facts, None, None, None),
                                                                                    (b"numpy==2.3.5\n", {})))
    ns = cli_args("run", "--program", "vector_add", "--timeout", "300", "--root", str(tmp_path), "--record-no-gpu")
    assert run_cmd.run(ns) == 1
    out = capsys.readouterr().out
    why = "nvidia-smi reports compute capability 'N/A' for GPU 0 (NVIDIA H200), not major.minor"
    assert f"run: no usable GPU: {why}" in out
    runs = [r for r in store.load_records(tmp_path) if isinstance(r, RunRecord)]
    assert [r.verdict for r in runs] == ["no-gpu"]


def test_build_cache_that_is_a_fifo_is_refused_not_read(tmp_path):
    """A build/ cache replaced by a FIFO: one InputRefused line, no hang; corrupt JSON is rebuilt."""
    from tileproof.records.errors import InputRefused
    from tileproof.toolchain.find import read_build_json

    cache = tmp_path / "build" / "kernel-index.json"
    cache.parent.mkdir()
    assert read_build_json(cache) is None
    cache.write_bytes(b"[" * 10_000)
    assert read_build_json(cache) is None
    cache.write_bytes(b'{"a": 1}')
    assert read_build_json(cache) == {"a": 1}
    cache.unlink()
    os.mkfifo(cache)
    with pytest.raises(InputRefused) as e:
        read_build_json(cache)
    assert e.value.kind == "special-file"
    assert "\n" not in str(e.value)


def test_claims_gpu_probe_on_an_unreadable_capability_is_unverifiable_not_a_traceback():
    from types import SimpleNamespace

    from tileproof.claims import checks
    from tileproof.records.models import GpuFacts

    facts = GpuFacts(index=0, name="NVIDIA H200", uuid="GPU-0", compute_capability="N/A",
                     runtime_compute_capability=None, driver_version="580.95.05", memory_total_mib=None,
                     clocks_sm_mhz=None, clocks_mem_mhz=None)
    why = checks._gpu_ready(SimpleNamespace(gpu=facts, no_gpu=None), "cc>=8.0")
    assert why == "nvidia-smi reports compute capability 'N/A' for NVIDIA H200, not major.minor"
