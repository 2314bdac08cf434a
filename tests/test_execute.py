"""Verdicts come from exit codes and reports; a hung program is killed."""

import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tileproof.records.models import CheckReport
from tileproof.runner.execute import run_program, verdict_of

REPO = Path(__file__).resolve().parents[1]

CHECK = {"name": "matmul", "shape": [2, 2], "dtype": "float32", "rtol": 1e-4, "atol": 1e-3, "checked": 4,
         "mismatches": 0, "max_abs_err": 0.0, "max_rel_err": 0.0, "first_failure": None, "passed": True}


def report(gate="ok", passed=True, checks=None):
    checks = [CHECK] if checks is None else checks
    return CheckReport.model_validate({
        "report_version": 1, "program": "kernels/x.py", "seed": 1,
        "device": {"name": "NVIDIA H200", "compute_capability": "9.0"} if gate != "no-gpu" else None,
        "gate": gate, "gate_message": "GPU 0: NVIDIA H200, compute capability 9.0", "checks": checks,
        "passed": passed,
    })


FAILED = {**CHECK, "passed": False, "mismatches": 1, "first_failure": {"index": [0, 1], "got": "nan", "want": 1.0}}


@pytest.mark.parametrize(
    "code, timed_out, rep, expected",
    [
        (0, False, report(), "passed"),
        (1, False, report(passed=False, checks=[FAILED]), "failed"),
        (1, False, report(gate="below-sm80", passed=False, checks=[]), "gated"),
        (1, False, report(gate="no-gpu", passed=False, checks=[]), "no-gpu"),
        (None, True, None, "timeout"),
        (139, False, None, "error"),
        (0, False, None, "error"),
        (0, False, report(passed=False, checks=[FAILED]), "error"),
        (1, False, report(), "error"),
        (0, False, report(gate="below-sm80", passed=False, checks=[]), "error"),
    ],
    ids=["passed", "failed", "gated", "no-gpu", "timeout", "crash", "exit0-no-report",
         "exit0-but-failed", "exit1-but-passed", "gate-exit0"],
)
def test_verdict_table(code, timed_out, rep, expected):
    assert verdict_of(code, timed_out, rep, None)[0] == expected


def program(tmp_path, body):
    p = tmp_path / "prog.py"
    p.write_text(textwrap.dedent(body))
    return [sys.executable, str(p)]


def test_run_program_reads_report_and_keeps_streams(tmp_path):
    rep = report().model_dump(mode="json")
    argv = program(tmp_path, f"""
        import json, sys
        path = sys.argv[sys.argv.index("--report") + 1]
        json.dump(json.loads({json.dumps(rep)!r}), open(path, "w"))
        print("GPU 0: NVIDIA H200, compute capability 9.0")
        print("to stderr", file=sys.stderr)
    """)
    out = run_program(tmp_path, "r1", "prog", argv, {}, timeout=60)
    # The program's report passes, but it handed no outputs over: its word alone is not a pass.
    assert out.verdict == "unverified", out.reason
    assert out.outside is not None and {c.problem for c in out.outside.checks} == {"no-outputs"}
    assert out.step.exit_code == 0
    assert (tmp_path / out.step.stdout.path).read_text().startswith("GPU 0")
    assert (tmp_path / out.step.stderr.path).read_text() == "to stderr\n"
    assert out.report_file
    assert (tmp_path / out.report_file.path).is_file()


def test_gate_transcript_is_named_gate(tmp_path):
    rep = report(gate="below-sm80", passed=False, checks=[]).model_dump(mode="json")
    argv = program(tmp_path, f"""
        import json, sys
        json.dump(json.loads({json.dumps(rep)!r}), open(sys.argv[sys.argv.index("--report") + 1], "w"))
        print("GPU 0: Tesla T4, compute capability 7.5: below 8.0"); sys.exit(1)
    """)
    out = run_program(tmp_path, "r2", "prog", argv, {}, timeout=60)
    assert out.verdict == "gated"
    assert out.step.stdout.path == "evidence/r2/prog-gate-stdout.txt"


def test_hung_program_is_killed(tmp_path):
    argv = program(tmp_path, "import time; time.sleep(60)")
    out = run_program(tmp_path, "r3", "prog", argv, {}, timeout=1)
    assert out.verdict == "timeout"
    assert out.step.timed_out
    assert out.step.exit_code is None
    assert out.step.duration_s < 30


def test_invalid_report_is_an_error_naming_the_field(tmp_path):
    argv = program(tmp_path, """
        import json, sys
        json.dump({"report_version": 1}, open(sys.argv[sys.argv.index("--report") + 1], "w"))
    """)
    out = run_program(tmp_path, "r4", "prog", argv, {}, timeout=60)
    assert out.verdict == "error"
    assert "check report invalid" in out.reason


# --- what a program leaves is hostile input -------------------------------------------------


def evidence_bytes(root) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((root / "evidence").rglob("*")) if p.is_file())


def test_a_report_linked_to_etc_shadow_is_no_report_and_never_stored(tmp_path):
    """A program that leaves its report as a link to /etc/shadow: before, the file it points at was read,
    redacted (nothing in it is a credential by shape) and stored as evidence/<run>/check-report.json."""
    argv = program(tmp_path, """
        import os, sys
        os.symlink("/etc/shadow", sys.argv[sys.argv.index("--report") + 1])
    """)
    out = run_program(tmp_path, "r5", "prog", argv, {}, timeout=60)
    assert not (tmp_path / "evidence" / "r5" / "check-report.json").exists()
    if os.access("/etc/shadow", os.R_OK) and os.path.getsize("/etc/shadow"):
        with open("/etc/shadow", "rb") as f:
            assert f.read().splitlines()[0] not in evidence_bytes(tmp_path)
    assert (out.verdict, out.report, out.report_file, out.report_refused) == ("error", None, None, "symlink")
    assert out.reason == "exit code 0; wrote no check report it may read ('check-report.json' is a symbolic link)"


def test_a_report_hard_linked_to_another_file_is_no_report(tmp_path):
    """A second name of a file the program may not have written (a hard link keeps no trace of where it
    points): refused, never stored."""
    secret = tmp_path / "elsewhere" / "private.txt"
    secret.parent.mkdir()
    secret.write_text("root:$6$not-for-evidence$:20228:0:99999:7:::\n")
    argv = program(tmp_path, f"""
        import os, sys
        os.link({str(secret)!r}, sys.argv[sys.argv.index("--report") + 1])
    """)
    out = run_program(tmp_path, "r6", "prog", argv, {}, timeout=60)
    if out.step.exit_code != 0:
        pytest.skip(f"the scratch folder and {secret.parent} are on different file systems: no hard link")
    assert b"not-for-evidence" not in evidence_bytes(tmp_path)
    assert (out.verdict, out.report_file, out.report_refused) == ("error", None, "special-file")
    assert "hard link" in out.reason


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_a_fifo_report_is_no_report_said_what_it_is(tmp_path):
    argv = program(tmp_path, """
        import os, sys
        os.mkfifo(sys.argv[sys.argv.index("--report") + 1])
    """)
    out = run_program(tmp_path, "r7", "prog", argv, {}, timeout=60)
    assert (out.verdict, out.report_file, out.report_refused) == ("error", None, "special-file")
    assert out.reason == "exit code 0; wrote no check report it may read (is a FIFO, not a regular file)"


def test_a_failure_file_linked_out_is_not_read(tmp_path):
    """The launcher's file is the program's to write too: a link to a file that parses as a failure
    (elsewhere, with a message no program of this run raised) is not read."""
    fake = tmp_path / "elsewhere.json"
    fake.write_text(json.dumps({"type": "RuntimeError", "message": "read from outside the scratch folder"}))
    argv = program(tmp_path, f"""
        import os, sys
        os.symlink({str(fake)!r}, os.path.join(os.path.dirname(sys.argv[sys.argv.index("--report") + 1]),
                                               "failure.json"))
    """)
    out = run_program(tmp_path, "r8", "prog", argv, {}, timeout=60)
    assert out.failure is None
    assert "outside the scratch" not in out.reason


SPARSE = 3 << 30
PEAK_RSS_CAP = 256 << 20
"""Most resident memory the process running a program may reach while refusing its 3 GiB report (it
needs about 60 MiB: Python, pydantic and tileproof's modules)."""


def test_a_3_gib_sparse_report_is_refused_within_the_timeout_in_bounded_memory(tmp_path):
    """Before, the report was read whole and redacted: 3.2 GB resident and no end after 150 s. The run
    happens in a child whose peak RSS (``wait4``) is measured; its address space is capped so that reading
    the file whole fails there instead of taking the machine's memory."""
    argv = program(tmp_path, f"""
        import sys
        with open(sys.argv[sys.argv.index("--report") + 1], "wb") as f:
            f.truncate({SPARSE})
    """)
    script = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from tileproof.runner.execute import run_program
        out = run_program(Path({str(tmp_path)!r}), "r9", "prog", {argv!r}, {{}}, timeout=30)
        print(json.dumps([out.verdict, out.reason, out.report_refused, out.report_file is None]))
    """)
    result = tmp_path / "result.json"

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    started = time.monotonic()
    with open(result, "wb") as sink:
        child = subprocess.Popen([sys.executable, "-c", script], stdout=sink, stderr=subprocess.STDOUT,
                                 env=dict(os.environ, PYTHONPATH=str(REPO)), preexec_fn=capped)
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - started > 60:
            child.kill()
            os.wait4(child.pid, 0)
            pytest.fail("running the program took more than 60 s (its timeout is 30 s)")
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    peak = usage.ru_maxrss * 1024  # KiB on Linux
    text = result.read_text()
    assert os.waitstatus_to_exitcode(status) == 0, text
    verdict, reason, refused, no_file = json.loads(text)
    assert (verdict, refused, no_file) == ("error", "too-large", True)
    assert f"is {SPARSE} bytes" in reason
    assert elapsed < 30, f"{elapsed:.1f} s"
    assert peak < PEAK_RSS_CAP, f"peak RSS {peak >> 20} MiB"
    print(f"3 GiB sparse report refused in {elapsed:.2f} s, peak RSS {peak >> 20} MiB")
