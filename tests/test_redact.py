"""Credentials never reach evidence/: the redaction rules, and a program printing a token."""

import subprocess
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
REPO = Path(__file__).resolve().parents[1]
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
    # formats that earlier rules stored verbatim
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


R40 = "Zq8mW3xR7tY2uK9pL4nBv6Hc1Jd5Fs0Ga3Ek8Tw2"
"""40 random-looking characters, for the token shapes below (assembled so that no secret scanner takes
this file for a leak)."""
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiJjaSIsImV4cCI6MTcwMH0" + ".dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
GCP_PEM = "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\nBKcwggSjAgEAAoIBAQC7" + R40 + \
    "\\n-----END PRIVATE KEY-----\\n"
PGP = ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOYBF" + R40 + "\n=Xk2p\n"
       "-----END PGP PRIVATE KEY BLOCK-----")
RANDOM_RUN = "kQ7vX2pL9mZ4tR8wB3nC6yH1jF5dG0sA7eU2iO4qN8rT"
FORMATS = [  # (text, rule, what stays before the marker, what stays after it): formats stored verbatim before
    ("id_token " + JWT + " expires", "jwt", "id_token ", " expires"),
    ("HF_TOKEN is hf_" + R40[:34], "huggingface-token", "HF_TOKEN is ", ""),
    ("//registry.npmjs.org/:_auth npm_" + R40[:36], "npm-token", "//registry.npmjs.org/:_auth ", ""),
    ("maps key AIza" + "SyA1" + R40[:31] + " in use", "google-api-key", "maps key ", " in use"),
    ("oauth ya29." + "a0AfH6SM" + R40, "google-oauth-token", "oauth ", ""),
    ("OPENAI sk-proj-" + R40 + "_x-" + R40[:10], "openai-key", "OPENAI ", ""),
    ("claude sk-ant-api03-" + R40 + "-AA", "anthropic-key", "claude ", ""),
    ("charge with sk_live_" + "51H" + R40[:30], "stripe-key", "charge with ", ""),
    (PGP, "pgp-private-key", "", ""),
    ("the key is " + AWS_SECRET + " for prod", "aws-secret-key", "the key is ", " for prod"),
    ("curl -u deploy:Tr0ub4dor3 https://x", "cli-user-password", "curl -u deploy:", " https://x"),
    ("curl --user=deploy:Tr0ub4dor3 https://x", "cli-user-password", "curl --user=deploy:", " https://x"),
    ("sshpass -p 'Tr0ub4dor3' ssh gpu01", "sshpass-password", "sshpass -p '", "' ssh gpu01"),
    ("sshpass -v -pTr0ub4dor3 rsync", "sshpass-password", "sshpass -v -p", " rsync"),
    ("machine pypi.example.com login ci password Tr0ub4dor3", "netrc-password",
     "machine pypi.example.com login ci password ", ""),
    ("machine h\n  login ci\n  password Tr0ub4dor3\n", "netrc-password", "machine h\n  login ci\n  password ", "\n"),
    ("REDIS_URL=redis://:Tr0ub4dor3@cache:6379/0", "url-userinfo", "REDIS_URL=redis://", "@cache:6379/0"),
    ("post to https://hooks.slack.com/services/T0123ABCD/B0456EFGH/" + R40[:24], "webhook-url",
     "post to https://hooks.slack.com/services/", ""),
    ("https://discord.com/api/webhooks/112233445566778899/" + R40 + "-Ab_9", "webhook-url",
     "https://discord.com/api/webhooks/", ""),
    ('{"type": "service_account", "private_key": "' + GCP_PEM + '", "client_email": "ci@p.iam.gserviceaccount.com"}',
     "private-key", '{"type": "service_account", "private_key": "',
     '\\n", "client_email": "ci@p.iam.gserviceaccount.com"}'),
    ("blob " + RANDOM_RUN + " end", "random-run", "blob ", " end"),
]


@pytest.mark.parametrize("text, rule, before, after", FORMATS, ids=[f"{f[1]}-{i}" for i, f in enumerate(FORMATS)])
def test_each_new_format_is_replaced_whole_and_counted(text, rule, before, after):
    """One case per format: the value goes whole (nothing of a key's body stays: the GCP key's PEM with
    ``\\n`` escapes goes up to its END line), what is around it stays, the count names the rule."""
    out, counts = redact(text.encode())
    assert counts == {rule: 1}, out
    assert out.decode() == before + f"[REDACTED:{rule}]" + after
    assert redact(out) == (out, {})


@pytest.mark.parametrize("text", [
    "docker run -u 1000:1000 img; python -u train.py; git push -u origin main",
    "sshpass is not installed; use -p for the port",
    "the login prompt asks for a password next",
    "redis://cache:6379/0 and https://hooks.slack.com/ and https://discord.com/api/webhooks/",
    "commit 0123456789abcdef0123456789abcdef01234567 GPU-e38677bf-980e-e26f-594b-2c9764385f1a",
    "sha256:" + "ab12CD34" * 8 + " eyJhbGciOiJIUzI1NiJ9 alone, sk-learn, hf_hub, npm_config_cache",
    "_ZN4cuda5tiles3__16detail3bidILj0EEEjv evidence/FIXTURE-session-h200/pip-freeze.txt",
    "20261201T092413Z-bench-env-bbc58257 nvidia_cuda_runtime_cu12-12.4.127 test_a_full_disk_is_one_line",
], ids=lambda t: t[:24])
def test_near_misses_of_the_new_formats_are_left_alone(text):
    assert redact(text.encode()) == (text.encode(), {})


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


def test_the_check_reads_an_unchanged_transcript_once_and_a_changed_one_again(tmp_path, monkeypatch):
    """The counts are kept in the verified-file index by the transcript's content: a second check reads no
    unchanged file and finds what the first found; a file rewritten since, a check with the index off and a check
    in a process that watches a signing key each read every file, and all find alike."""
    from tileproof.authoring.check import evidence_secrets
    from tileproof.catalog import derived
    from tileproof.catalog import index as file_index
    from tileproof.records import redact as redact_module

    # as in a check's own process, no key watched (this module's earlier tests watched theirs for the process)
    monkeypatch.setattr(redact_module, "_WATCHED", {})
    folder = tmp_path / "evidence" / "20261101T000000Z-run-00000001"
    folder.mkdir(parents=True)
    leaky, clean = folder / "prog-stdout.txt", folder / "clean-stdout.txt"
    leaky.write_text("SLACK_BOT=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx\n")
    clean.write_text("check fused: ok\n")
    later = file_index.now_ns() + 2 * file_index.RACY_NS  # both files settled: the index may keep them
    monkeypatch.setattr(file_index, "now_ns", lambda: later)
    reads: list[str] = []  # each file read, by either of the two ways the catalog reads one
    read_evidence, stream = derived.read_evidence, file_index.stream
    monkeypatch.setattr(derived, "read_evidence", lambda root, rel: reads.append(rel) or read_evidence(root, rel))
    monkeypatch.setattr(file_index, "stream", lambda root, rel, kind: reads.append(rel) or stream(root, rel, kind))

    def found() -> set[tuple[str, str]]:
        reads.clear()
        return {(p.file, p.reason.split(" the redaction rule ")[1].split()[0]) for p in evidence_secrets(tmp_path)}

    first = {(leaky.relative_to(tmp_path).as_posix(), "slack-token")}
    assert found() == first and len(reads) == 2
    assert found() == first and reads == []  # from the index: nothing read
    clean.write_text("check fused: ok\npassword=hunter2\n")
    now_leaky = first | {(clean.relative_to(tmp_path).as_posix(), "secret-assignment")}
    assert found() == now_leaky and reads == [clean.relative_to(tmp_path).as_posix()]
    monkeypatch.setenv(file_index.ENV, "off")
    assert found() == now_leaky and len(reads) == 2
    monkeypatch.delenv(file_index.ENV)
    assert found() == now_leaky and reads == []
    monkeypatch.setattr(redact_module, "_WATCHED", {"k": None})  # a key watched: redact depends on the process
    monkeypatch.setattr(redact_module, "_redact_keys", lambda data: (data, 0))
    assert found() == now_leaky and len(reads) == 2


# --- the signing key's own material ------------------------------------------------------------


def key_forms(private) -> dict[str, str]:
    """The encodings of an ed25519 key's private material a program could print (hex, base64 in
    20-character lines, a PEM whose header says ``PRIV@TE KEY``), and the others tileproof looks for."""
    import base64

    from cryptography.hazmat.primitives import serialization as ser

    seed, public = private.private_bytes_raw(), private.public_key().public_bytes_raw()
    pem = private.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption()).decode()
    b64 = base64.b64encode(seed).decode()
    return {
        "hex": seed.hex(), "hex-upper-split-20": "\n".join(textwrap.wrap(seed.hex().upper(), 20)),
        "hex-colons": seed.hex(":"), "c-array": ", ".join(f"0x{b:02x}" for b in seed),
        "base64": b64, "base64-lines-of-20": "\n".join(textwrap.wrap(b64, 20)),
        "base64-lines-of-3": "\n".join(textwrap.wrap(b64, 3)), "base64url": base64.urlsafe_b64encode(seed).decode(),
        "pem-priv@te": pem.replace("PRIVATE KEY", "PRIV@TE KEY"),
        "pem-der-lines-of-20": "\n".join(textwrap.wrap(pem.splitlines()[1], 20)),
        "pem-json-escaped": pem.replace("\n", "\\n"),
        "openssh": private.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.OpenSSH, ser.NoEncryption()).decode(),
        "seed-and-public-base64": base64.b64encode(seed + public).decode(),
        "seed-and-public-hex": (seed + public).hex(),
        "bytes-literal": repr(seed), "decimal-list": str(list(seed)),
    }


def secret_pieces(private) -> list[str]:
    """Substrings no stored byte may hold: every 12-character window of the seed's hex and base64."""
    import base64

    seed = private.private_bytes_raw()
    texts = [seed.hex(), base64.b64encode(seed).decode(), base64.urlsafe_b64encode(seed).decode()]
    return [t[i:i + 12] for t in texts for i in range(0, len(t) - 12, 4)]


FORMS = ("hex", "hex-upper-split-20", "hex-colons", "c-array", "base64", "base64-lines-of-20", "base64-lines-of-3",
         "base64url", "pem-priv@te", "pem-der-lines-of-20", "pem-json-escaped", "openssh", "seed-and-public-base64",
         "seed-and-public-hex", "bytes-literal", "decimal-list")


@pytest.fixture(scope="module")
def loaded_key(tmp_path_factory):
    """A real key file made by ``tileproof keygen`` outside any repository, loaded as ``tileproof run``
    loads it (``signing.load_signer``: from then on this process looks for it in all it redacts)."""
    import subprocess

    from cryptography.hazmat.primitives import serialization as ser

    from tileproof.records.trust import signing

    home = tmp_path_factory.mktemp("keys")
    key, repo = home / "keys" / "signing-key.pem", home / "repo"
    repo.mkdir()
    subprocess.run([sys.executable, "-m", "tileproof", "keygen", "--key", str(key), "--root", str(repo)],
                   check=True, capture_output=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    private = ser.load_pem_private_key(key.read_bytes(), None)
    assert tuple(key_forms(private)) == FORMS
    return signing.load_signer(key, repo), private


@pytest.mark.parametrize("form", FORMS)
def test_the_signing_key_is_found_in_every_encoding_and_counted(loaded_key, form):
    _signer, private = loaded_key
    text = f"leaked:\n{key_forms(private)[form]}\ndone\n"
    out, counts = redact(text.encode())
    assert counts.get("signing-key", 0) >= 1, out
    assert not [p for p in secret_pieces(private) if p.encode() in out], out
    assert out.startswith(b"leaked:") and out.endswith(b"done\n")


def test_a_program_printing_its_signing_key_leaves_none_of_it_and_nothing_is_signed(loaded_key, tmp_path):
    """The attack's three forms (hex, base64 in 20-character lines, a ``PRIV@TE KEY`` PEM) printed on
    stdout and stderr and put in the check report: before, all were stored verbatim, the report too,
    and the record was signed with the very key (``redactions`` counted one ``private-key``)."""
    from signing_keys import real_run

    from tileproof.records import store
    from tileproof.records.errors import KeyExposed

    signer, private = loaded_key
    forms = key_forms(private)
    rep = {"report_version": 1, "program": "evil.py", "seed": 1, "device": None, "gate": "ok",
           "gate_message": forms["hex"], "checks": [], "passed": True}
    root = tmp_path / "repo"
    root.mkdir()
    prog = root / "evil.py"  # in the checkout: behind the wall a program sees the checkout, not the temp folders
    prog.write_text(textwrap.dedent(f"""
        import json, sys
        print({forms["hex"]!r})
        print({forms["base64-lines-of-20"]!r})
        print({forms["pem-priv@te"]!r}, file=sys.stderr)
        json.dump({rep!r}, open(sys.argv[sys.argv.index("--report") + 1], "w"))
    """))
    out = run_program(root, "r3", "evil", [sys.executable, str(prog)], child_env(), timeout=60)
    stored = b"".join(p.read_bytes() for p in (root / "evidence").rglob("*") if p.is_file())
    assert b"[REDACTED:signing-key]" in stored
    assert not [p for p in secret_pieces(private) if p.encode() in stored]
    assert out.step.redactions["signing-key"] >= 4
    with pytest.raises(KeyExposed, match=r"not signed: the signing key [0-9a-f]{16} was in what a program printed"):
        store.write_record(root, real_run(), signer)
    assert not (root / "runs").exists()


def test_no_evidence_is_written_that_holds_the_loaded_key(loaded_key, tmp_path):
    """The store's own check, behind every redaction: bytes that reach ``write_evidence`` unredacted
    (a capture that forgot to redact) are refused whole, never written."""
    from tileproof.records import store
    from tileproof.records.errors import KeyExposed

    _signer, private = loaded_key
    for form in ("pem-priv@te", "base64-lines-of-20", "hex-upper-split-20"):
        with pytest.raises(KeyExposed, match="not written: it holds the material of the signing key"):
            store.write_evidence(tmp_path, "r4", f"{form}.txt", f"ok\n{key_forms(private)[form]}\n")
    assert not (tmp_path / "evidence" / "r4").exists() or not list((tmp_path / "evidence" / "r4").iterdir())
    store.write_evidence(tmp_path, "r4", "clean.txt", "ok\n")


@pytest.mark.parametrize("seed", [bytes(range(32)), b"'W" + bytes(range(100, 130)), b"\\\"'" + bytes(29),
                                  bytes(range(200, 232))], ids=["low", "single-quote", "quotes-backslash", "high"])
def test_a_bytes_literal_of_the_key_is_found_whatever_its_bytes(seed):
    """Python's ``repr`` of a seed holding a quote writes it unescaped when the other quote delimits the literal;
    a key whose seed happened to hold one was missed in that form before."""
    from tileproof.records.redact import KeyWatch

    text = b"leaked: " + repr(seed).encode() + b"\n"
    assert any(p.search(text) for p in KeyWatch(seed).patterns), text


def test_a_committed_index_is_not_used_by_the_check_and_the_check_says_so(tmp_path):
    """A verified-file index committed into the tree is someone's file, not this user's: the check reads every
    transcript (the same finding) and says aside, on stderr, that the index was not used."""
    from conftest import git_commit_all, run_cli

    leaky = tmp_path / "evidence" / "20261101T000000Z-run-00000001" / "prog-stdout.txt"
    leaky.parent.mkdir(parents=True)
    leaky.write_text("SLACK_BOT=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx\n")
    planted = tmp_path / ".tileproof-cache" / "index.sqlite"
    planted.parent.mkdir()
    planted.write_bytes(b"SQLite format 3\x00 planted")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    git_commit_all(tmp_path, "a course with its index committed")
    code, out, err = run_cli("check", "--root", str(tmp_path))
    secret = f"{leaky.relative_to(tmp_path).as_posix()}: evidence-secret: "
    assert code == 1 and [line for line in out.splitlines() if line.startswith(secret)], out
    assert [line for line in err.splitlines() if ".tileproof-cache" in line], err
    assert planted.read_bytes() == b"SQLite format 3\x00 planted"
