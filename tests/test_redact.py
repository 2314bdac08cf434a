"""Credentials never reach evidence/: the redaction rules, and a program printing a token."""

import sys
import textwrap
from pathlib import Path

import pytest

from tileproof.records.models import LessonFront
from tileproof.records.parsers import parse_pip_freeze
from tileproof.records.redact import redact
from tileproof.runner.environment import child_env
from tileproof.runner.execute import run_program

DATA = Path(__file__).parent / "data"
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2


@pytest.mark.parametrize("text, rule, kept", [
    ("token=" + GHP, "github-token", "token="),
    ("gho_" + "x" * 36, "github-token", ""),
    ("github_pat_11ABCDEFG0" + "a" * 40, "github-token", ""),
    ("key AKIAIOSFODNN7EXAMPLE here", "aws-access-key", "key "),
    ("Authorization: Bearer eyJhbGciOi.payload.sig", "bearer-token", "Authorization: Bearer "),
    ("pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdo", "pypi-token", ""),
    ("password = hunter2", "secret-assignment", "password = "),
    ("API_KEY: 'abc123def'", "secret-assignment", "API_KEY: '"),
    ("-e git+https://alice:s3cret@git.example.com/r.git@abc#egg=r", "url-userinfo", "-e git+https://"),
])
def test_each_rule_replaces_the_value_and_counts(text, rule, kept):
    out, counts = redact(text.encode())
    assert counts == {rule: 1}
    assert out.decode().startswith(kept + f"[REDACTED:{rule}]")
    secret = text[len(kept):].split("@")[0] if rule == "url-userinfo" else text[len(kept):]
    assert secret.strip("'") not in out.decode()


def test_real_transcripts_are_left_alone():
    """No false positives on what the programs and tools really print."""
    for path in [*(DATA / "gpu").iterdir(), *(DATA / "nvcc").iterdir()]:
        data = path.read_bytes()
        assert redact(data) == (data, {}), path


def test_pip_freeze_userinfo_is_redacted_and_still_parses():
    freeze = (DATA / "gpu" / "pip-freeze.txt").read_bytes() + \
        b"mypkg @ git+https://bob:ghp_" + b"z" * 36 + b"@github.com/o/mypkg.git@0123abc\n"
    out, counts = redact(freeze)
    assert b"bob" not in out and b"ghp_" not in out and counts == {"url-userinfo": 1}
    assert parse_pip_freeze(out.decode())["cuda-tile"] == "1.7.0"


def test_a_program_printing_a_token_leaves_only_the_count(tmp_path):
    prog = tmp_path / "leak.py"
    prog.write_text(f"import sys\nprint('token={GHP}')\nprint('https://u:p4ss@host/x', file=sys.stderr)\n")
    out = run_program(tmp_path, "r1", "leak", [sys.executable, str(prog)], child_env(), timeout=60)
    evidence = b"".join(p.read_bytes() for p in (tmp_path / "evidence").rglob("*") if p.is_file())
    assert GHP.encode() not in evidence and b"p4ss" not in evidence
    assert out.step.redactions == {"github-token": 1, "url-userinfo": 1}
    assert "[REDACTED:github-token]" in (tmp_path / out.step.stdout.path).read_text()


def test_a_lesson_can_name_extra_environment_variables():
    front = {"lesson_version": 1, "id": "x", "title": "X", "status": "draft", "programs": [],
             "hardware": {}, "results": []}
    assert LessonFront.model_validate(front).env == []
    assert LessonFront.model_validate({**front, "env": ["MY_KNOB"]}).env == ["MY_KNOB"]
    with pytest.raises(ValueError):
        LessonFront.model_validate({**front, "env": ["not a name"]})


def test_a_check_report_is_kept_redacted_and_parsed_from_what_is_kept(tmp_path):
    prog = tmp_path / "rep.py"
    prog.write_text(textwrap.dedent("""
        import json, sys
        path = sys.argv[sys.argv.index("--report") + 1]
        json.dump({"report_version": 1, "program": "x", "seed": 1, "device": None, "gate": "no-gpu",
                   "gate_message": "password=hunter2", "checks": [], "passed": False}, open(path, "w"))
        sys.exit(1)
    """))
    out = run_program(tmp_path, "r2", "rep", [sys.executable, str(prog)], child_env(), timeout=60)
    assert out.verdict == "no-gpu" and out.report.gate_message == "password=[REDACTED:secret-assignment]"
    assert b"hunter2" not in (tmp_path / out.report_file.path).read_bytes()
    assert out.step.redactions == {"secret-assignment": 1}
