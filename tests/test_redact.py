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
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
OPENSSH_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\n"
               "AAAAMwAAAAtzc2gtZWQyNTUxOQAAACDxk3u1oE0Ww=\n-----END OPENSSH PRIVATE KEY-----")


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
    # issue 33: formats stored verbatim before
    ("aws_secret_access_key=" + AWS_SECRET, "aws-secret-key", "aws_secret_access_key="),
    ("AWS_SECRET_ACCESS_KEY: " + AWS_SECRET, "aws-secret-key", "AWS_SECRET_ACCESS_KEY: "),
    ('{"user": "bob", "password": "hunter2 and more"}', "json-secret", '{"user": "bob", "password": "'),
    ('{"api_key": "ab\\"cd"}', "json-secret", '{"api_key": "'),
    ('{"api_key": 1234567890}', "json-secret", '{"api_key": '),
    ("mysql --password Hunter2! -h db", "cli-secret-flag", "mysql --password "),
    ("curl --api-key k-123 https://x", "cli-secret-flag", "curl --api-key "),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "basic-auth", "Authorization: Basic "),
    ("{'Authorization': 'Basic dXNlcjpwYXNz'}", "basic-auth", "{'Authorization': 'Basic "),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack-token", ""),
    ("xoxp-1234567890-abcdef", "slack-token", ""),
    ("glpat-AbCdEfGhIjKlMnOpQrSt", "gitlab-token", ""),
    (OPENSSH_KEY, "private-key", ""),
    ("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nMIIEow\n-----END RSA PRIVATE KEY-----",
     "private-key", ""),
    ("pkg @ https://example.com/pkg-1.0.whl?access_token=abc123def456", "url-query-secret",
     "pkg @ https://example.com/pkg-1.0.whl?access_token="),
    ("p @ https://b.s3.amazonaws.com/p.whl?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=0123456789abcdef",
     "url-query-secret", "p @ https://b.s3.amazonaws.com/p.whl?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature="),
    ("DJANGO_SECRET_KEY=k3J9x2Lm8Qp4Rt7Vw1Yz5Bn6", "high-entropy-secret", "DJANGO_SECRET_KEY="),
    ("export CI_JOB_TOKEN_V2: 'Zq8mW3xR7tY2uK9pL4nB'", "high-entropy-secret", "export CI_JOB_TOKEN_V2: '"),
])
def test_each_rule_replaces_the_value_and_counts(text, rule, kept):
    out, counts = redact(text.encode())
    assert counts == {rule: 1}
    assert out.decode().startswith(kept + f"[REDACTED:{rule}]")
    secret = text[len(kept):].split("@")[0] if rule == "url-userinfo" else text[len(kept):]
    assert secret.strip("'\"}") not in out.decode()
    assert redact(out) == (out, {})  # what is kept is redacted for good: a second pass finds nothing


@pytest.mark.parametrize("text", [
    "max_tokens=4096 tokens: 128 TOKENIZERS_PARALLELISM=false",
    "author_id: a1b2c3d4e5f6a7b8c9d0 auth: none oauth_scope=read",
    '{"max_tokens": 128, "token": null, "password": false, "tokenizer": "x", "secret_count": 3}',
    "--no-password-prompt yes --tb=short --token-limit 5 --password-file=/run/secrets",
    "Basic Linear Algebra Subprograms; a basic block; Authorization failed",
    "tokenizer_path=/models/llama-3.1-8b/tokenizer.model api_key_file: ./keys/dev.txt",
    "session_token_timeout=300000000000000000 SECRET_NAME=production-database-main",
    "numpy @ file:///tmp/w/numpy-2.3.5-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=" + "ab12" * 16,
    "https://pypi.org/simple/?page=2&sort=name -----BEGIN CERTIFICATE----- MIIB -----END CERTIFICATE-----",
    "xoxo-nope glpat-short ghp_short AKIA1234 the token is valid",
], ids=lambda t: t[:24])
def test_ordinary_text_is_left_alone(text):
    """Near misses of every rule: names that only look like secrets, values too short or too regular
    to be one, paths, hashes, certificates."""
    assert redact(text.encode()) == (text.encode(), {})


def test_real_transcripts_are_left_alone():
    """No false positives on what the programs and tools really print."""
    for path in [*(DATA / "gpu").iterdir(), *(DATA / "nvcc").iterdir()]:
        data = path.read_bytes()
        assert redact(data) == (data, {}), path
    for path in sorted(DATA.rglob("*")):  # every captured transcript and fixture, under today's rules
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert redact(data) == (data, {}), path


def test_pip_freeze_userinfo_is_redacted_and_still_parses():
    freeze = (DATA / "gpu" / "pip-freeze.txt").read_bytes() + \
        b"mypkg @ git+https://bob:ghp_" + b"z" * 36 + b"@github.com/o/mypkg.git@0123abc\n"
    out, counts = redact(freeze)
    assert b"bob" not in out
    assert b"ghp_" not in out
    assert counts == {"url-userinfo": 1}
    assert parse_pip_freeze(out.decode())["cuda-tile"] == "1.7.0"


def test_a_program_printing_a_token_leaves_only_the_count(tmp_path):
    prog = tmp_path / "leak.py"
    prog.write_text(f"import sys\nprint('token={GHP}')\nprint('https://u:p4ss@host/x', file=sys.stderr)\n")
    out = run_program(tmp_path, "r1", "leak", [sys.executable, str(prog)], child_env(), timeout=60)
    evidence = b"".join(p.read_bytes() for p in (tmp_path / "evidence").rglob("*") if p.is_file())
    assert GHP.encode() not in evidence
    assert b"p4ss" not in evidence
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
    assert out.verdict == "no-gpu"
    assert out.report.gate_message == "password=[REDACTED:secret-assignment]"
    assert b"hunter2" not in (tmp_path / out.report_file.path).read_bytes()
    assert out.step.redactions == {"secret-assignment": 1}


def test_the_check_names_each_transcript_and_rule_todays_rules_would_redact(tmp_path):
    """A transcript written before a rule existed holds the value verbatim: ``tileproof check`` names
    the file, the rule and the count, never the value, and leaves the file as it is."""
    from tileproof.authoring.check import evidence_secrets

    old = tmp_path / "evidence" / "20261101T000000Z-run-00000001" / "prog-stdout.txt"
    old.parent.mkdir(parents=True)
    slack = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
    old.write_text(f"deploy ok\nSLACK_BOT={slack}\n{OPENSSH_KEY}\npassword=[REDACTED:secret-assignment]\n")
    (old.parent / "clean-stdout.txt").write_text("check fused: ok\n")
    before = old.read_bytes()
    found = {(p.file, p.reason.split(" the redaction rule ")[1].split()[0]) for p in evidence_secrets(tmp_path)}
    assert found == {(old.relative_to(tmp_path).as_posix(), "slack-token"),
                     (old.relative_to(tmp_path).as_posix(), "private-key")}
    assert all(slack not in str(p) and "b3BlbnNz" not in str(p) for p in evidence_secrets(tmp_path))
    assert old.read_bytes() == before
