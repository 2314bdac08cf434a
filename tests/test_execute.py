"""Verdicts come from exit codes and reports; a hung program is killed."""

import json
import sys
import textwrap

import pytest

from tileproof.records.models import CheckReport
from tileproof.runner.execute import run_program, verdict_of

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
