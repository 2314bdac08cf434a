"""The tamper suite: a forger's attacks, each replayed against a signed record or a
real git repository. Each edit is the careful forger's: the record's seal recomputed
with tileproof's own ``store.seal_of`` (which the seal alone did not catch).

The first half decides at the records layer (``store.read_record`` with the registry,
``judge.trust.counts``, ``runner.git_history``); the second half replays every attack
through the real commands, ``main(["publish", ...])`` and ``main(["audit", ...])``, on
a committed tree whose records are signed by a key registered in that tree's
``lessons/runners.yaml`` with ``policy: signed-only``: publish exits 1 and the audit
exits 1 naming the finding, and each attack has a control that passes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from signing_keys import REPO, entry, new_signer, real_run, registry_of, v1_subjects

from tileproof import lesson_text
from tileproof.judge import trust
from tileproof.judge.lesson_state import LessonState
from tileproof.records import store
from tileproof.records.errors import TileproofError
from tileproof.records.trust import signing
from tileproof.runner import git_history

RUNNER = new_signer()
"""The registered H200 runner's key."""
REGISTRY = registry_of(entry(RUNNER, owner="lead on the H200 runner"))


@pytest.fixture
def signed(tmp_path):
    return store.write_record(tmp_path, real_run(), RUNNER)


def forge(path: Path, change) -> None:
    """Edit the record inside the envelope, reseal it, re-encode the payload; keep the signature."""
    env = json.loads(path.read_text())
    statement = json.loads(base64.b64decode(env["payload"]))
    rec = store.load_record(path)
    edited = type(rec).model_validate(change(json.loads(rec.model_dump_json())))
    edited = edited.model_copy(update={"seal": store.seal_of(edited)})
    assert edited.seal == store.seal_of(edited), "the forger's seal is valid: the old audit passed this"
    if statement["predicateType"] == "urn:tileproof:record:v1":  # a record signed before statement v2
        statement["predicate"] = json.loads(edited.model_dump_json())
        statement["subject"] = [s.model_dump() for s in v1_subjects(edited)]  # consistent, too
    else:  # subjects, materials and the record, all consistent
        statement = json.loads(signing.record_statement(json.loads(edited.model_dump_json()), edited)
                               .model_dump_json(by_alias=True))
    env["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    path.write_text(json.dumps(env))


def trust_of(path: Path) -> str:
    return store.read_record(path, REGISTRY).trust


def test_untouched_signed_record_verifies(signed):
    assert trust_of(signed) == "verified"
    assert trust.counts("verified", "signed-only")


def test_edited_result_resealed_is_bad_signature(signed):
    def fail_to_pass(r):
        r["report"]["checks"][0]["max_abs_err"] = 1e-9
        r["reason"] = "every check passed (edited)"
        return r
    forge(signed, fail_to_pass)
    v = store.read_record(signed, REGISTRY).verification
    assert v.trust == "bad-signature"
    assert not trust.counts(v.trust)
    assert trust.issues(v) == [("record-bad-signature", v.reason)]


def test_new_source_digest_resealed_is_bad_signature(signed):
    """Break kernels/fused.py, put its new sha256 into the passing record, reseal."""
    broken = hashlib.sha256(b"def broken(): pass\n").hexdigest()

    def swap(r):
        for s in r["sources"]:
            if s["path"] == "kernels/fused.py":
                s["sha256"] = broken
        return r
    forge(signed, swap)
    assert broken in base64.b64decode(json.loads(signed.read_text())["payload"]).decode()
    assert trust_of(signed) == "bad-signature"


def test_signature_moved_to_the_registered_keyid_is_bad_signature(tmp_path):
    """The attacker signs with their own key and claims the runner's keyid."""
    path = store.write_record(tmp_path, real_run(), new_signer())
    env = json.loads(path.read_text())
    env["signatures"][0]["keyid"] = RUNNER.keyid
    path.write_text(json.dumps(env))
    assert trust_of(path) == "bad-signature"


def test_fake_gpu_machine_with_its_own_key_is_unknown_key(tmp_path):
    """A fake nvidia-smi/cupy replaying the H200 transcript on a CPU box, signing with a
    key of its own: everything in the record looks right, and the key is not registered."""
    path = store.write_record(tmp_path, real_run(), new_signer())
    v = store.read_record(path, REGISTRY).verification
    assert v.trust == "unknown-key"
    assert "lessons/runners.yaml" in v.reason
    assert not trust.counts(v.trust)


def test_signature_stripped_is_unsigned_and_never_counts_once_signatures_are_required(signed):
    """Drop the envelope, keep an edited, resealed plain record."""
    rec = store.load_record(signed)
    edited = rec.model_copy(update={"reason": "edited"})
    edited = edited.model_copy(update={"seal": store.seal_of(edited)})
    signed.write_text(edited.model_dump_json(indent=2))
    assert trust_of(signed) == "unsigned"
    assert not trust.counts("unsigned", "signed-only")
    assert trust.issues(store.read_record(signed, REGISTRY).verification, "signed-only")[0][0] == "record-unsigned"


def test_revoked_key_after_revocation_is_refused(tmp_path):
    rec = real_run()
    reg = registry_of(entry(RUNNER, revoked_since=rec.created - timedelta(hours=1)))
    path = store.write_record(tmp_path, rec, RUNNER)
    assert store.read_record(path, reg).trust == "revoked"
    assert not trust.counts("revoked")


def test_key_signing_a_kind_it_may_not_is_refused(tmp_path):
    claims_only = new_signer()
    path = store.write_record(tmp_path, real_run(), claims_only)
    reg = registry_of(entry(claims_only, may_sign=["claims"]))
    assert store.read_record(path, reg).trust == "kind-not-allowed"
    assert not trust.counts("kind-not-allowed")


def test_git_rm_of_the_refuting_claims_record_is_a_history_finding(tmp_path):
    """``git rm`` the claims record that refuted an asserted claim: the history says so."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    root = tmp_path / "repo"
    claims = "runs/20261129T123104Z-claims-f8e0266f.json"
    (root / "runs").mkdir(parents=True)
    shutil.copy(REPO / claims, root / claims)

    def git(*args):
        subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.invalid", "-c", "user.name=t",
                        "-c", "commit.gpgsign=false", *args], check=True, capture_output=True)
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "claims record")
    git("rm", "-q", claims)
    git("commit", "-q", "-m", "remove the refutation")
    report = git_history.check_repository(root)
    assert report.status == "checked"
    assert [(f.file, f.rule) for f in report.findings] == [(claims, "history-missing")]


def _pem() -> bytes:
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def test_private_key_inside_the_repository_is_refused_at_signing(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "runs").mkdir(parents=True)
    key = root / "runs" / "forged.pem"
    key.write_bytes(_pem())
    key.chmod(0o600)
    with pytest.raises(TileproofError, match="inside the repository"):
        signing.load_signer(key, root)
    monkeypatch.setenv(signing.KEY_ENV, str(key))
    with pytest.raises(TileproofError, match="inside the repository"):
        signing.signer_from_env(root)
    outside = tmp_path / "outside.pem"
    outside.write_bytes(key.read_bytes())
    outside.chmod(0o600)
    link = root / "link.pem"
    link.symlink_to(outside)  # resolved: outside, so allowed
    assert signing.load_signer(link, root).keyid
    loaded = signing.load_signer(outside, tmp_path / "elsewhere")
    with pytest.raises(TileproofError, match="inside the repository"):
        store.write_record(tmp_path, real_run(), loaded)  # the same key file lies inside this root
    assert store.record_files(tmp_path) == []


def test_private_key_inside_the_repository_is_refused_at_keygen(tmp_path):
    from tileproof.__main__ import main

    root = tmp_path / "repo"
    root.mkdir()
    assert main(["keygen", "--root", str(root), "--key", str(root / "evidence" / "k.pem")]) == 2
    assert not (root / "evidence").exists()
    (tmp_path / "alias").symlink_to(root)
    assert main(["keygen", "--root", str(root), "--key", str(tmp_path / "alias" / "k.pem")]) == 2
    assert not (root / "k.pem").exists()


# --- the same attacks through ``tileproof verify`` (exit status and the finding's name) ---


@pytest.fixture
def repo(tmp_path):
    """A git repository with one H200 run record signed by the registered runner."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    from signing_keys import write_registry

    root = tmp_path / "repo"
    path = store.write_record(root, real_run(), RUNNER)
    write_registry(root, REGISTRY)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "signed record")
    return root, path


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.invalid", "-c", "user.name=t",
                    "-c", "commit.gpgsign=false", *args], check=True, capture_output=True)


def verify_cmd(root: Path, capsys) -> tuple[int, str]:
    from tileproof.__main__ import main

    code = main(["verify", "--root", str(root)])
    return code, capsys.readouterr().out


def test_verify_command_passes_a_signed_intact_tree(repo, capsys):
    code, out = verify_cmd(repo[0], capsys)
    assert code == 0
    assert "1 verified" in out
    assert "history: checked" in out


def test_verify_command_names_a_resealed_edit(repo, capsys):
    root, path = repo
    forge(path, lambda r: {**r, "reason": "edited"})
    code, out = verify_cmd(root, capsys)
    assert code == 1
    assert f"runs/{path.name}: record-bad-signature:" in out
    assert f"runs/{path.name}: history-changed: edited after commit" in out  # the history says so, as the audit does


def test_verify_command_names_a_foreign_key_and_a_git_rm(repo, capsys):
    root, path = repo
    other = store.write_record(root, real_run(run_id=real_run().run_id.replace("-run-", "-run-f")), new_signer())
    code, out = verify_cmd(root, capsys)
    assert code == 1
    assert f"runs/{other.name}: record-unknown-key:" in out
    other.unlink()
    git(root, "rm", "-q", f"runs/{path.name}")
    git(root, "commit", "-q", "-m", "drop it")
    code, out = verify_cmd(root, capsys)
    assert code == 1
    assert f"runs/{path.name}: history-missing: deleted after commit" in out


def test_verify_command_without_history_does_not_pass(tmp_path, capsys):
    store.write_record(tmp_path, real_run(), RUNNER)
    from signing_keys import write_registry

    write_registry(tmp_path, REGISTRY)
    code, out = verify_cmd(tmp_path, capsys)
    assert code == 1
    assert "history: no-history" in out
    assert "1 verified" in out


# --- every attack through the real commands: ``publish`` refuses, ``audit`` exits 1 naming it ---
#
# The tree is tests/data/audit's clean tree (a published lesson 01-vector-add from an H200
# session, a draft 02-softmax that only ran on a T4), its records re-signed by RUNNER, the key
# registered in the tree's own lessons/runners.yaml with ``policy: signed-only``, committed to
# a real git repository. Each control (the same steps without the attack, or with the
# registered key) passes, so each refusal below is the attack's and nothing else's.

sys.path.insert(0, str(REPO / "tests" / "data" / "audit"))
import audit_tree  # noqa: E402

from tileproof.__main__ import main  # noqa: E402
from tileproof.judge.audit.rules.inputs import INPUT  # noqa: E402
from tileproof.records import lessons  # noqa: E402
from tileproof.records.history_check import HISTORY  # noqa: E402

LATER = audit_tree.T0 + timedelta(hours=2)
"""When the attacker's records are dated (after every genuine one)."""


def _signed_registry(runner_entry=None):
    return registry_of(runner_entry or entry(RUNNER, owner="lead on the H200 runner")).model_copy(
        update={"policy": "signed-only"})


@pytest.fixture(scope="module")
def signed_template(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("needs git")
    from signing_keys import write_registry

    root = tmp_path_factory.mktemp("signed") / "repo"
    root.mkdir()
    info = audit_tree.clean_tree(root)
    git(root, "init", "-q")
    commit(root, "sources", "kernels")  # the commit the runner had checked out, clean
    head = head_of(root)
    for path in store.record_files(root):  # the same records, at that commit, signed by the registered runner
        rec = store.load_record(path)
        path.unlink()
        store.write_record(root, at_head(root, rec, head), RUNNER)
    write_registry(root, _signed_registry())
    commit(root, "signed records")
    return root, info


def at_head(root: Path, rec, head: str | None = None):
    """The record as a runner on a clean checkout of HEAD writes it (``git.commit`` is checked); ``head``: HEAD's id,
    where the caller read it already."""
    head = head or subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                  check=True).stdout.strip()
    return rec.model_copy(update={"git": rec.git.model_copy(update={"commit": head, "dirty": False})})


@pytest.fixture
def signed_tree(signed_template, tmp_path):
    root, info = signed_template
    copy = tmp_path / "repo"
    shutil.copytree(root, copy, symlinks=True)
    return copy, info


def commit(root: Path, message: str, *paths: str) -> None:
    git(root, "add", *(paths or ("-A",)))
    git(root, "commit", "-q", "-m", message)


def cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def audit_cmd(root: Path, capsys) -> tuple[int, str]:
    return cli(capsys, "audit", "--root", str(root))


def publish_cmd(root: Path, lesson: str, capsys) -> tuple[int, str]:
    return cli(capsys, "publish", lesson, "--root", str(root))


def fake_h200_softmax(root: Path, signer: signing.Signer | None, when=None, passed: bool = True,
                      board: str = "H200", env: dict[str, str] | None = None) -> Path:
    """What the fake nvidia-smi + cupy + sitecustomize made tileproof write on a CPU box: a
    passing "NVIDIA H200, cc 9.0" run of kernels/softmax.py (whose lesson only has a T4 run),
    its transcripts and its closing session record, all in the shape a real run has (dated
    ``when``, default ``LATER``; ``passed=False``: the run's check failed; ``board``: which
    H200 of ``audit_tree.GPUS``; ``env``: variables set over the recorded environment's)."""
    when = when or LATER
    sid = store.new_run_id("session", when)
    captured = audit_tree.environment(root, sid, which=board)
    captured = captured.model_copy(update={"env": {**captured.env, **(env or {})}})
    run = audit_tree.run_record(root, captured, "kernels/softmax.py", checks=["softmax"], lessons=["02-softmax"],
                                when=when + timedelta(seconds=10), passed=passed)
    head = head_of(root)
    path = store.write_record(root, at_head(root, run, head), signer)
    store.write_record(root, at_head(root, audit_tree.session_record(sid, [run], when + timedelta(minutes=1)), head),
                       signer)
    return path


def test_signed_tree_audits_clean_and_publishes(signed_tree, capsys):
    """The control: signed, registered, committed: the audit passes with history checked."""
    root, _ = signed_tree
    code, out = audit_cmd(root, capsys)
    assert code == 0, out
    assert "0 findings" in out
    assert "history: checked" in out
    code, out = publish_cmd(root, "01-vector-add", capsys)
    assert code == 0, out
    assert "already published" in out, out


def test_cli_edited_result_resealed(signed_tree, capsys):
    """(a) Edit a passing record's result and recompute its seal with ``store.seal_of``."""
    root, info = signed_tree
    path = store.record_path(root, info["run"].run_id)

    def better(r):
        r["report"]["checks"][0]["max_abs_err"] = 1e-12
        return r
    forge(path, better)
    assert store.seal_status(store.load_record(path)) == "intact", "the forger's seal holds"
    commit(root, "a better result")
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert f"runs/{path.name}: record-bad-signature:" in out, out
    assert f"runs/{path.name}: history-changed:" in out
    code, out = publish_cmd(root, "01-vector-add", capsys)
    assert code == 1, out
    assert out.startswith(f"01-vector-add: {LessonState.HISTORY_BROKEN.message}"), out
    assert "signature bad-signature" in out, out
    assert f"runs/{path.name}: history-changed:" in out


def test_cli_broken_source_digest_resealed(signed_tree, capsys):
    """(b) Break the kernel, put its new sha256 into the old passing record, reseal."""
    root, info = signed_tree
    source = root / "kernels" / "vector_add.py"
    source.write_text('"""Lesson program: c = a + b."""\nraise SystemExit("broken")\n')
    new = store.sha256_file(source)
    path = store.record_path(root, info["run"].run_id)

    def attest_broken(r):
        for s in r["sources"]:
            if s["path"] == "kernels/vector_add.py":
                s["sha256"] = new
        return r
    forge(path, attest_broken)
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert f"runs/{path.name}: record-bad-signature:" in out, out
    code, out = publish_cmd(root, "01-vector-add", capsys)
    assert code == 1, out
    assert "signature bad-signature" in out, out


@pytest.mark.parametrize("signer, rule", [(new_signer(), "record-unknown-key"), (None, "record-unsigned")],
                         ids=["own-key", "unsigned"])
def test_cli_fake_gpu_record(signed_tree, capsys, signer, rule):
    """(c) A record "made on a fake GPU": signed by a key not in the registry, or unsigned."""
    root, _ = signed_tree
    path = fake_h200_softmax(root, signer)
    commit(root, "an H200 run of softmax")
    code, out = publish_cmd(root, "02-softmax", capsys)
    assert code == 1, out
    assert "stays draft" in out, out
    assert f"signature {rule.removeprefix('record-')}" in out, out
    assert lessons.load(root, "02-softmax").front.status == "draft"
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert f"runs/{path.name}: {rule}:" in out, out


def test_cli_fake_gpu_record_control_registered_key_publishes(signed_tree, capsys):
    """The same record signed by the registered runner is evidence: the refusal above is the key's."""
    root, _ = signed_tree
    fake_h200_softmax(root, RUNNER)
    commit(root, "an H200 run of softmax")
    code, out = publish_cmd(root, "02-softmax", capsys)
    assert code == 0, out
    assert "published from NVIDIA H200 (cc 9.0)" in out, out


def test_cli_hand_edited_published_lesson(signed_tree, capsys):
    """(d) Hand-edit a published lesson's hardware block and results to NVIDIA B200, cc 10.0."""
    root, _ = signed_tree
    path = root / "lessons" / "01-vector-add.md"
    text = path.read_text()
    edited = (text.replace("gpu: NVIDIA H200", "gpu: NVIDIA B200").replace("compute_capability: '9.0'",
                                                                           "compute_capability: '10.0'")
              .replace("(NVIDIA H200, cc 9.0)", "(NVIDIA B200, cc 10.0)"))
    assert edited.count("B200") >= 3, "the edit reached the hardware block, the front matter and the table"
    path.write_text(edited)
    commit(root, "it ran on a B200")
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert ("lessons/01-vector-add.md: lesson-rederive: hardware.gpu: the lesson says 'NVIDIA B200', "
            "the records give 'NVIDIA H200'") in out
    assert "hardware.compute_capability: the lesson says '10.0', the records give '9.0'" in out
    assert "results[0].result (kernels/vector_add.py vector_add): the lesson says 'passed:" in out
    assert "body results table line 3:" in out
    assert "(NVIDIA B200, cc 10.0)" in out
    code, out = publish_cmd(root, "01-vector-add", capsys)
    assert code == 1, out
    assert "does not show what its records give" in out, out
    assert "hardware.gpu" in out, out
    assert path.read_text() == edited


CLAIMS = """\
claims_version: 1
document: 01-vector-add
path: lessons/01-vector-add.md
claims:
- id: adds
  statement: The kernel adds two vectors.
  source: {section: Lesson}
  check: {kind: compile, snippet: snippets/k.py, kernel: k}
  expected: {outcome: compiles}
"""


def refute_a_claim(root: Path) -> Path:
    """01-vector-add back to draft, asserting a claim that a signed claims record refutes."""
    from tileproof.records.models import (
        CLAIMS_SCHEMA_VERSION,
        ClaimResult,
        ClaimsRecord,
        ProbeKind,
    )

    lesson = lessons.load(root, "01-vector-add")
    rows = [r.model_copy(update={"result": "?", "run_id": None}) for r in lesson.front.results]
    draft = lesson.front.model_copy(update={"status": "draft", "hardware": type(lesson.front.hardware)(),
                                            "results": rows, "cuda_tile_verified": []})
    lesson.path.write_text(lesson_text.render(lesson, draft))
    folder = root / "lessons" / "claims"
    (folder / "snippets").mkdir(parents=True)
    (folder / "snippets" / "k.py").write_text("# k\n")
    (folder / "01-vector-add.claims.yaml").write_text(CLAIMS)
    commit(root, "a claim", "lessons")  # the claims run checks a committed snippet
    run = real_run()
    result = ClaimResult(id="adds", document="01-vector-add", statement="The kernel adds two vectors.",
                         check=[ProbeKind(role="check", kind="compile")], verdict="refuted",
                         why="wrong: does not compile (exit 1)", toolchain="cuda-tile 1.7.0, tileiras 13.4.92",
                         steps=[])
    record = ClaimsRecord(schema_version=CLAIMS_SCHEMA_VERSION, kind="claims", run_id=store.new_run_id("claims", LATER),
                          created=LATER, tileproof_version="0", git=run.git, host=run.host,
                          toolchain=audit_tree.toolchain(), gpu=None,
                          claims_files=[store.digest(root, folder / "snippets" / "k.py")], results=[result])
    return store.write_record(root, at_head(root, record), RUNNER)


def test_cli_git_rm_of_the_refuting_claims_record(signed_tree, capsys):
    """(e) ``git rm`` the claims record that refuted a claim the lesson asserts. Once deleted, the
    refutation is no longer among the records, so the decision alone would publish: the history
    check (which publish consults too) is what refuses, in publish and in the audit."""
    root, _ = signed_tree
    claims = refute_a_claim(root)
    commit(root, "a refuted claim")
    code, out = publish_cmd(root, "01-vector-add", capsys)
    assert code == 1, out
    assert "claim adds: refuted" in out, out  # the control: the refutation blocks
    code, out = audit_cmd(root, capsys)
    assert code == 0, out
    git(root, "rm", "-q", f"runs/{claims.name}")
    commit(root, "drop the refutation")
    code, out = publish_cmd(root, "01-vector-add", capsys)
    assert code == 1, out
    assert f"runs/{claims.name}: history-missing:" in out, out
    assert lessons.load(root, "01-vector-add").front.status == "draft"
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert f"runs/{claims.name}: history-missing: deleted after commit" in out, out


@pytest.mark.parametrize("revoked", [True, False], ids=["after-revocation", "control-not-revoked"])
def test_cli_record_signed_after_revocation(signed_tree, capsys, revoked):
    """(f) The runner's key was revoked (leaked); a record it signs dated after that is refused,
    while the records it signed before still count (01-vector-add stays backed)."""
    from signing_keys import write_registry

    root, _ = signed_tree
    if revoked:
        write_registry(root, _signed_registry(entry(RUNNER, owner="lead on the H200 runner",
                                                    revoked_since=LATER - timedelta(minutes=1))))
    path = fake_h200_softmax(root, RUNNER)
    commit(root, "revoke the runner key; a new softmax run")
    code, out = publish_cmd(root, "02-softmax", capsys)
    code_audit, out_audit = audit_cmd(root, capsys)
    if not revoked:
        assert code == 0, out + out_audit
        assert code_audit == 0, out + out_audit
        return
    assert code == 1, out
    assert "signature revoked" in out, out
    assert code_audit == 1, out_audit
    assert f"runs/{path.name}: record-revoked-key:" in out_audit, out_audit
    assert "lessons/01-vector-add.md" not in out_audit, "records signed before the revocation still count"


def test_audit_without_history_is_not_a_pass(signed_tree, capsys):
    """No .git: the audit says NOT CHECKED and exits 1; --allow-no-history exits 0, still saying so."""
    root, _ = signed_tree
    shutil.rmtree(root / ".git")
    code, out = audit_cmd(root, capsys)
    assert code == 1
    assert "0 findings" in out
    assert "history: NOT CHECKED" in out
    assert "not a git checkout" in out
    report = root.parent / "AUDIT.md"
    code, out = cli(capsys, "audit", "--allow-no-history", "--root", str(root), "--md", str(report))
    assert code == 0
    assert "history: NOT CHECKED" in out
    assert "history: NOT CHECKED" in report.read_text().splitlines()[2], "the report's headline says so too"


def test_cli_transcript_edited_and_committed(signed_tree, capsys):
    """A committed transcript rewritten in a later commit: the history names the transcript."""
    root, info = signed_tree
    stdout = info["run"].step.stdout.path
    (root / stdout).write_text("every check passed\n")
    commit(root, "tidy a transcript")
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert f"{stdout}: history-changed: edited after commit" in out, out


def test_a_registry_cannot_loosen_the_policy(tmp_path):
    """``policy:`` in lessons/runners.yaml can only say signed-only; anything else is refused."""
    from tileproof.records.errors import RecordError
    from tileproof.records.trust.runner_keys import load_registry

    (tmp_path / "lessons").mkdir()
    (tmp_path / "lessons" / "runners.yaml").write_text("registry_version: 1\nrunners: []\npolicy: unsigned-counts\n")
    with pytest.raises(RecordError, match="policy"):
        load_registry(tmp_path)
    assert trust.effective("signed-only") == "signed-only"
    assert trust.effective(None) == trust.POLICY


def test_cli_record_claiming_a_commit_it_does_not_match(signed_tree, capsys):
    """A record that says "clean at HEAD" while attesting a source HEAD does not hold, and one naming
    a commit this repository never had: the commit is a claim the audit checks against history."""
    root, info = signed_tree
    (root / "kernels" / "softmax.py").write_text('"""Lesson program: row softmax."""\nprint("faster")\n')
    path = fake_h200_softmax(root, RUNNER)  # signed by the registered runner: only the commit claim is false
    other = store.write_record(root, info["compile"].model_copy(update={
        "run_id": store.new_run_id("compile", LATER), "created": LATER,
        "git": info["compile"].git.model_copy(update={"commit": "f" * 40})}), RUNNER)
    commit(root, "softmax, faster")
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert f"runs/{path.name}: record-commit-mismatch: kernels/softmax.py: the record attests sha256" in out
    assert f"runs/{other.name}: record-commit-unknown: git.commit ffffffffffff is not in this repository" in out


# --- a trust root the reviewer holds --------------------------------------------------------
#
# Each attack below got through on 347efc1 (publish succeeded, or the audit exited 0, or found
# only collateral findings); each test asserts the finding that names it. Controls use the
# procedures of docs/keys.md (a root reset accepted by moving the pin; a change endorsed with
# ``tileproof sign-registry``) and pass.


def head_of(root: Path) -> str:
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def add_key(root: Path, signer: signing.Signer, *, may_sign=None, owner: str = "an H200 runner of mine") -> None:
    """Append ``signer``'s entry to the tree's lessons/runners.yaml, as keygen prints it."""
    import yaml

    from tileproof.records.trust.runner_keys import REGISTRY

    path = root / REGISTRY
    raw = yaml.safe_load(path.read_text())
    kinds = list(may_sign) if may_sign is not None else ["run", "session", "bench", "claims"]
    raw["runners"].append(entry(signer, owner=owner, may_sign=kinds).model_dump(mode="json", exclude_none=True))
    path.write_text(yaml.safe_dump(raw, sort_keys=False))


def test_cli_self_registered_key(signed_tree, capsys):
    """(1) keygen, append the entry to lessons/runners.yaml inside a bulk "H200 session (6/6 passed)"
    evidence commit, sign a fake-GPU run with it. No key the registry held signed that change: the
    key counts for nothing, publish refuses and the audit names the change and the record."""
    root, _ = signed_tree
    mine = new_signer()
    add_key(root, mine)
    path = fake_h200_softmax(root, mine)
    commit(root, "H200 session 20251129T130000Z (6/6 passed)")
    code, out = publish_cmd(root, "02-softmax", capsys)
    assert code == 1, out
    assert "lessons/runners.yaml: registry-root-reset:" in out, out
    assert lessons.load(root, "02-softmax").front.status == "draft"
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert "lessons/runners.yaml: registry-root-reset:" in out, out
    assert f"runs/{path.name}: record-unendorsed-key:" in out
    assert f"registry change {head_of(root)[:12]}" in out, "the report lists every change"
    assert (f"key {mine.keyid[:16]}… (an H200 runner of mine) " \
                                                            "added" in out), "the report lists every change"


def _pin(root: Path, commit_id: str, why: str = "a root reset, reviewed") -> None:
    (root / ".ci").mkdir(exist_ok=True)
    (root / ".ci" / "trust-root").write_text(f"pin_version: 1\ncommit: '{commit_id}'\nwhy: {why}\n")


def test_cli_root_reset_accepted_by_moving_the_pin_then_endorsed_changes(signed_tree, capsys):
    """The control of (1), and docs/keys.md's procedure: every key lost, so new keys are registered
    unsigned (a root reset: a finding until the pin moves), the pin is moved to that commit in a second
    commit, and later additions are endorsed by a key the new root holds with 'registry'."""
    root, _ = signed_tree
    admin_key = Ed25519PrivateKey.generate()
    admin, runner = signing.Signer(admin_key), new_signer()
    add_key(root, admin, may_sign=["compile", "claims", "registry"], owner="lead's new CPU build key")
    add_key(root, runner, owner="new H200 runner")
    commit(root, "runner registry: root reset (every key lost)", "lessons/runners.yaml")
    reset = head_of(root)
    code, out = audit_cmd(root, capsys)
    assert code == 1, "a root reset without a moved pin is a finding"
    assert "registry-root-reset" in out, "a root reset without a moved pin is a finding"
    _pin(root, reset)
    commit(root, "move the trust root to the reset", ".ci")
    code, out = audit_cmd(root, capsys)
    assert code == 0, out
    assert f"trust root: commit {reset[:12]}, from .ci/trust-root: a root reset, reviewed" in out
    assert f"pin moved in {head_of(root)[:12]}: .ci/trust-root absent -> {reset[:12]}" in out
    # A second runner's key, endorsed by the admin key the root holds: no finding, and it signs.
    second = new_signer()
    add_key(root, second, owner="second H200 runner")
    key = root.parent / "admin.pem"
    key.write_bytes(admin_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    key.chmod(0o600)
    code, out = cli(capsys, "sign-registry", "--root", str(root), "--key", str(key))
    assert code == 0, out
    assert "lessons/registry-signatures/" in out, out
    commit(root, "runner registry: a second H200 runner, endorsed", "lessons")
    path = fake_h200_softmax(root, second, board="H200-second")  # another machine: its own board
    commit(root, "H200 session (the second runner)")
    code, out = audit_cmd(root, capsys)
    assert code == 0, out
    assert "signed by " + admin.keyid[:16] in out, out
    code, out = publish_cmd(root, "02-softmax", capsys)
    assert code == 0, out
    assert "published from NVIDIA H200" in out, out
    assert path.exists()


def test_cli_unsigned_change_when_a_registry_key_was_held(signed_tree, capsys):
    """With a key that could have endorsed it, an unendorsed addition is registry-change-unsigned; a
    kind widened without an endorsement does not count either (kind-not-allowed)."""
    root, _ = signed_tree
    admin = new_signer()
    add_key(root, admin, may_sign=["claims", "registry"], owner="lead")
    commit(root, "root reset", "lessons/runners.yaml")
    _pin(root, head_of(root))
    commit(root, "pin", ".ci")
    import yaml

    from tileproof.records.trust.runner_keys import REGISTRY

    raw = yaml.safe_load((root / REGISTRY).read_text())
    raw["runners"][-1]["may_sign"] = ["claims", "registry", "run", "session"]  # widened, unsigned
    (root / REGISTRY).write_text(yaml.safe_dump(raw, sort_keys=False))
    path = fake_h200_softmax(root, admin)
    commit(root, "admin may sign runs too")
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert "lessons/runners.yaml: registry-change-unsigned:" in out, out
    assert f"runs/{path.name}: record-kind-not-allowed:" in out
    assert "without an endorsement" in out


@pytest.mark.parametrize("how, rule", [("emptied", "registry-emptied"), ("deleted", "registry-missing")])
def test_cli_emptied_or_deleted_registry(signed_tree, capsys, how, rule):
    """(2) ``runners: []``, or the file removed: on 347efc1 the code's default (unsigned counts) applied
    again and an unsigned fake run published a lesson. History listed a key, so signed-only stays."""
    root, _ = signed_tree
    registry_file = root / "lessons" / "runners.yaml"
    if how == "emptied":
        registry_file.write_text("registry_version: 1\nrunners: []\n")
    else:
        registry_file.unlink()
    fake_h200_softmax(root, None)
    commit(root, "an H200 run of softmax")
    code, out = publish_cmd(root, "02-softmax", capsys)
    assert code == 1, out
    assert f"lessons/runners.yaml: {rule}:" in out, out
    assert lessons.load(root, "02-softmax").front.status == "draft"
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert f"lessons/runners.yaml: {rule}:" in out, out


def test_cli_revoked_key_backdating(signed_tree, capsys):
    """(3a) The H200 key leaked and is revoked (revoked_since: when it leaked) in a reviewed commit. The
    thief signs a passing run dated before revoked_since and commits it after that commit: it was first
    added in a commit that descends from the revocation, so it counts for nothing."""
    from signing_keys import write_registry

    root, _ = signed_tree
    write_registry(root, _signed_registry(entry(RUNNER, owner="lead on the H200 runner",
                                                revoked_since=LATER + timedelta(hours=1))))
    commit(root, "revoke the H200 runner's key (leaked)", "lessons/runners.yaml")
    path = fake_h200_softmax(root, RUNNER)  # dated LATER: before revoked_since
    commit(root, "an H200 run of softmax")
    code, out = publish_cmd(root, "02-softmax", capsys)
    assert code == 1, out
    assert "signature revoked" in out, out
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert f"runs/{path.name}: record-revoked-key:" in out, out
    assert "after that" in out, out
    assert "lessons/01-vector-add.md" not in out, "records committed before the revocation still count"


def test_cli_record_dated_before_its_key_was_added(signed_tree, capsys):
    """(3b) A passing run signed by the registered key but dated before the key's ``added``."""
    from datetime import datetime, timezone

    root, _ = signed_tree
    path = fake_h200_softmax(root, RUNNER, when=datetime(2024, 12, 1, tzinfo=timezone.utc))
    commit(root, "an H200 run of softmax")
    code, out = publish_cmd(root, "02-softmax", capsys)
    assert code == 1, out
    assert "signature dated-before-key" in out, out
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert f"runs/{path.name}: record-dated-before-key:" in out, out


def test_cli_future_dated_pass_does_not_outrank_a_later_failure(signed_tree, capsys):
    """(3c) A passing run dated 2030, then a genuine failing run committed after it: on 347efc1 the 2030
    record stayed "the newest" forever. It is dated after its own commit (refused), and the newest is
    the record committed last, whatever the dates say."""
    from datetime import datetime, timezone

    root, _ = signed_tree
    future = fake_h200_softmax(root, RUNNER, when=datetime(2030, 1, 1, tzinfo=timezone.utc))
    commit(root, "an H200 run of softmax")
    failing = fake_h200_softmax(root, RUNNER, when=datetime.now(timezone.utc) - timedelta(minutes=5), passed=False)
    commit(root, "an H200 run of softmax, again")
    code, out = publish_cmd(root, "02-softmax", capsys)
    assert code == 1, out
    assert "stays draft" in out, out
    assert f"failed: verdict failed in run {failing.stem}" in out, out
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert f"runs/{future.name}: record-dated-after-commit:" in out, out


def test_cli_history_rewrite_dropping_a_refuting_record(signed_tree, capsys):
    """(4) Drop the commit that added a refuting claims record (``git reset --hard``, then force-push):
    the rewritten clone audits clean, as on 347efc1. A reviewer who kept the head they audited passes it
    (``--expect-ancestor``; the GPU-evidence workflow keeps it in its cache) and the audit fails."""
    root, _ = signed_tree
    claims = refute_a_claim(root)
    commit(root, "a refuted claim")
    audited = head_of(root)
    code, out = audit_cmd(root, capsys)
    assert code == 0, out
    git(root, "reset", "-q", "--hard", "HEAD~1")
    assert not (root / "runs" / claims.name).exists()
    code, out = audit_cmd(root, capsys)
    assert code == 0, "without the head a reviewer kept, a rewritten history looks clean"
    code, out = cli(capsys, "audit", "--root", str(root), "--expect-ancestor", audited)
    assert code == 1, out
    assert f"HEAD: history-rewritten: {audited} ({audited[:12]}) is not an ancestor of HEAD" in out, out
    code, out = cli(capsys, "audit", "--root", str(root), "--expect-ancestor", head_of(root))
    assert code == 0, out
    assert f"expected ancestor: {head_of(root)}" in out, out


def test_cli_duplicate_keys_in_the_registry_are_refused_in_one_line(signed_tree, capsys):
    """(5a) A second ``runners:`` key in lessons/runners.yaml: YAML keeps the last, so an apparent
    addition replaced the H200 key on 347efc1. Refused, in one line naming the key and its line."""
    root, _ = signed_tree
    registry_file = root / "lessons" / "runners.yaml"
    theirs = entry(new_signer(), owner="an addition").model_dump(mode="json", exclude_none=True)
    import yaml

    registry_file.write_text(registry_file.read_text() + yaml.safe_dump({"runners": [theirs]}, sort_keys=False))
    commit(root, "one more runner")
    for argv in (("audit", "--root", str(root)), ("publish", "01-vector-add", "--root", str(root))):
        code, out = cli(capsys, *argv)
        assert code == 2, out
        assert "lessons/runners.yaml: runners: written twice (line" in out, out
        assert len(out.strip().splitlines()) == 1


def test_cli_unsigned_record_from_a_branch_older_than_the_first_key(signed_tree, capsys):
    """(5b) An unsigned record added on a branch started before the first key, merged after it: on
    347efc1 its first commit's registry listed no key, so it passed as legacy. Only records committed
    before the first key (ancestors of it) are legacy; this one is a record-unsigned finding."""
    root, _ = signed_tree
    git(root, "checkout", "-q", "-b", "old", "HEAD~1")  # the commit before the registry listed a key
    path = store.write_record(root, real_run(run_id=real_run().run_id.replace("-run-", "-run-b")))
    commit(root, "a record from the old branch", "runs")
    git(root, "checkout", "-q", "-")
    git(root, "merge", "-q", "--no-ff", "-m", "merge the old branch", "old")
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert f"runs/{path.name}: record-unsigned:" in out, out


def test_cli_trust_root_from_the_command_line_outranks_the_trees_pin(signed_tree, capsys, tmp_path):
    """A reviewer's own root: a commit, or a registry file they keep. The tree's moved pin does not move it."""
    root, _ = signed_tree
    trusted = head_of(root)
    kept = tmp_path / "runners.yaml"
    kept.write_bytes((root / "lessons" / "runners.yaml").read_bytes())
    add_key(root, new_signer())
    commit(root, "a new key", "lessons/runners.yaml")
    _pin(root, head_of(root), "moved by whoever added the key")
    commit(root, "move the pin", ".ci")
    code, out = audit_cmd(root, capsys)
    assert code == 0, "the tree's own pin accepts the reset, and says it moved"
    assert "pin moved in" in out, "the tree's own pin accepts the reset, and says it moved"
    for given in (trusted, f"file:{kept}"):
        code, out = cli(capsys, "audit", "--root", str(root), "--trust-root", given)
        assert code == 1, out
        assert "registry-root-reset" in out, out
        assert "from --trust-root" in out, out
    code, out = cli(capsys, "audit", "--root", str(root), "--trust-root", "f" * 40)
    assert code == 1, out
    assert "trust-root-not-in-history" in out, out


def test_cli_a_dropped_revocation_is_loosened_and_still_counts(signed_tree, capsys):
    """A revocation taken back out of the registry: the revocation stays (history keeps it), and the
    registry saying otherwise is registry-loosened."""
    from signing_keys import write_registry

    root, _ = signed_tree
    write_registry(root, _signed_registry(entry(RUNNER, owner="lead on the H200 runner",
                                                revoked_since=LATER + timedelta(hours=1))))
    commit(root, "revoke", "lessons/runners.yaml")
    write_registry(root, _signed_registry())
    path = fake_h200_softmax(root, RUNNER, when=LATER + timedelta(hours=2))
    commit(root, "un-revoke, and a run")
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert "lessons/runners.yaml: registry-loosened:" in out, out
    assert f"runs/{path.name}: record-revoked-key:" in out


def test_an_independent_verifier_checks_every_statement_subject_of_the_tree(signed_tree, capsys):
    """tests/benchmarks/subject_check.py (git, hashlib, PyNaCl, jsonschema; no tileproof code) over the
    signed tree: every v2 subject (a product) matches at HEAD, every material at the commit the record ran
    from; a lesson rewritten afterwards (as publish does) changes no subject; a transcript edited and
    committed is a mismatch. The script's ``main``, in this process (its command line only parses the two
    arguments given here)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("subject_check", REPO / "tests" / "benchmarks" / "subject_check.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    root, info = signed_tree

    def check() -> tuple[int, str]:
        code = script.main(root, REPO / "schema")
        return code, capsys.readouterr().out
    code, out = check()
    assert code == 0, out
    assert "0 mismatches by the rule" in out, out
    assert "statements urn:tileproof:record:v2 6" in out
    assert "signature verified 6" in out
    lesson = root / "lessons" / "01-vector-add.md"
    lesson.write_text(lesson.read_text() + "\nA sentence added after publishing.\n")
    commit(root, "a lesson edited")
    assert check()[0] == 0, "a lesson is an input: never a subject"
    stdout = info["run"].step.stdout.path
    (root / stdout).write_text("every check passed\n")
    commit(root, "tidy a transcript")
    code, out = check()
    assert code == 1
    assert f"{stdout} at " in out
    assert "1 mismatches by the rule" in out


# --- one verdict: status says ready exactly when publish --dry-run exits 0, and the audit agrees ---
#
# Every attack above, and what a growing course does (a new lesson with new tolerance entries, committed or
# not; a newer passing run; a newer failing one; records from a GPU node that ran tileproof from its checkout),
# replayed on the signed tree. For each lesson: ``status`` says "ready" exactly when ``publish --dry-run``
# exits 0, and the case says which; then each lesson is published (by ``publish`` when it may be, else
# flipped by hand, as a careless author would) and the audit has a finding against the lesson, or a history
# finding, exactly when it was not ready.

VECTOR_ADD, SOFTMAX = "01-vector-add", "02-softmax"


def newer_vector_add_run(root: Path, *, passed: bool = True, checkout_node: bool = False, later: int = 0,
                         env: dict[str, str] | None = None) -> Path:
    """A newer H200 session of kernels/vector_add.py signed by the registered runner, at HEAD: passing or
    failing; ``checkout_node``: made on a GPU node that ran tileproof from its checkout (environment version
    2, tileproof recorded by its source identity, a pip freeze that lists no tileproof); ``later``: hours after
    ``LATER``; ``env``: variables set over the recorded environment's."""
    from tileproof.records.models import ENVIRONMENT_VERSION, TileproofOrigin

    when = LATER + timedelta(hours=later)
    sid = store.new_run_id("session", when)
    freeze = audit_tree.PIP_FREEZE.replace("-e git+https://example.invalid/tileproof.git@0d1f2e3c#egg=tileproof\n", "")
    captured = audit_tree.environment(root, sid, which="H200",
                                      freeze=freeze if checkout_node else audit_tree.PIP_FREEZE)
    if checkout_node:
        origin = TileproofOrigin(kind="checkout", version="0.1.0", commit="0" * 40, sources_sha256="1" * 64)
        captured = captured.model_copy(update={"environment_version": ENVIRONMENT_VERSION, "tileproof": origin})
    captured = captured.model_copy(update={"env": {**captured.env, **(env or {})}})
    run = audit_tree.run_record(root, captured, "kernels/vector_add.py", checks=["vector_add"], lessons=[VECTOR_ADD],
                                when=when + timedelta(seconds=10), passed=passed)
    head = head_of(root)
    path = store.write_record(root, at_head(root, run, head), RUNNER)
    store.write_record(root, at_head(root, audit_tree.session_record(sid, [run], when + timedelta(minutes=1)), head),
                       RUNNER)
    return path


def c_control(root, info):
    pass


def c_edited_result(root, info):
    forge(store.record_path(root, info["run"].run_id),
          lambda r: {**r, "report": {**r["report"], "checks": [{**r["report"]["checks"][0], "max_abs_err": 1e-12}]}})
    commit(root, "a better result")


def c_broken_source(root, info):
    source = root / "kernels" / "vector_add.py"
    source.write_text('"""Lesson program: c = a + b."""\nraise SystemExit("broken")\n')
    new = store.sha256_file(source)

    def attest_broken(r):
        for s in r["sources"]:
            if s["path"] == "kernels/vector_add.py":
                s["sha256"] = new
        return r
    forge(store.record_path(root, info["run"].run_id), attest_broken)


def c_fake_gpu(signer):
    def case(root, info):
        fake_h200_softmax(root, signer)
        commit(root, "an H200 run of softmax")
    return case


def c_hand_edited_lesson(root, info):
    path = root / "lessons" / f"{VECTOR_ADD}.md"
    path.write_text(path.read_text().replace("gpu: NVIDIA H200", "gpu: NVIDIA B200"))
    commit(root, "it ran on a B200")


def c_refutation_kept(root, info):
    refute_a_claim(root)
    commit(root, "a refuted claim")


def c_refutation_deleted(root, info):
    """An earlier claims record confirmed the claim; the newer one refutes it and is ``git rm``-ed: the
    decision alone then sees only the confirmation and would publish."""
    claims = refute_a_claim(root)
    refuting = store.load_record(claims)
    earlier = LATER - timedelta(minutes=30)
    confirmed = refuting.model_copy(update={
        "run_id": store.new_run_id("claims", earlier), "created": earlier,
        "results": [r.model_copy(update={"verdict": "confirmed", "why": "wrong: compiles (exit 0)"})
                    for r in refuting.results]})
    store.write_record(root, confirmed, RUNNER)
    commit(root, "a confirmed claim, then a refuted one")
    git(root, "rm", "-q", f"runs/{claims.name}")
    commit(root, "drop the refutation")


def c_revoked(root, info):
    from signing_keys import write_registry

    write_registry(root, _signed_registry(entry(RUNNER, owner="lead on the H200 runner",
                                                revoked_since=LATER - timedelta(minutes=1))))
    fake_h200_softmax(root, RUNNER)
    commit(root, "revoke the runner key; a new softmax run")


def c_transcript_edited(root, info):
    (root / info["run"].step.stdout.path).write_text("every check passed\n")
    commit(root, "tidy a transcript")


def c_new_lesson(committed: bool):
    def case(root, info):
        assert main(["new-lesson", "03-growth", "--python", "growth_kernel", "--root", str(root)]) == 0
        table = root / "kernels" / "tolerances.py"
        table.write_text(table.read_text().replace(
            "TOLERANCES = {\n", 'TOLERANCES = {\n    "growth_other": Tolerance(rtol=0.0, atol=0.0),\n', 1))
        if committed:
            commit(root, "a new lesson, its program and two tolerance entries")
    return case


def c_newer_run(**kind):
    def case(root, info):
        newer_vector_add_run(root, **kind)
        commit(root, "a newer H200 session")
    return case


SHIM = {"PATH": f"/tmp/shim/bin:{audit_tree.BIN}:/usr/bin:/bin"}
"""A recorded PATH whose first entry is a scratch folder the runner's first record lacked: where a fake
nvidia-smi answers first (``plausibility-shim-path``)."""
SHIM_SUBJECT = "PATH=/tmp/shim/bin"
EXPLANATION = ("plausibility:\n- signal: shim-path\n  subject: PATH=/tmp/shim/bin\n  explanation: the runner's "
               "CUDA 13 tools, unpacked there by its owner for each session\n")
"""A front-matter note that explains the shim signal (written by the author, never by publish)."""


def explain(root: Path, lesson_id: str) -> None:
    path = root / "lessons" / f"{lesson_id}.md"
    text = path.read_text()
    empty = "\nplausibility: []\n"  # audit_tree writes every front-matter field
    path.write_text(text.replace(empty, "\n" + EXPLANATION, 1) if empty in text
                    else text.replace("\nstatus:", "\n" + EXPLANATION + "status:", 1))
    assert lessons.load(root, lesson_id).front.plausibility[0].subject == SHIM_SUBJECT


def c_shim_path(explained: bool):
    """A passing H200 run of softmax signed by the registered runner, with a shim first on its PATH: the
    plausibility signal blocks the draft, unless its front matter explains it."""
    def case(root, info):
        fake_h200_softmax(root, RUNNER, env=SHIM)
        if explained:
            explain(root, SOFTMAX)
        commit(root, "an H200 run of softmax, /tmp/shim first on its PATH")
    return case


def c_cited_record_explanation_removed(root, info):
    """vector-add republished from a newer run whose shim PATH its front matter explained, then the
    explanation deleted: the lesson rests on a record with an unsettled signal (``gate.decide_cited``)."""
    from tileproof.commands.publish import publish

    newer_vector_add_run(root, env=SHIM)
    explain(root, VECTOR_ADD)
    commit(root, "a newer H200 session, its /tmp/shim explained")
    code, lines = publish(root, VECTOR_ADD, republish=True)
    assert code == 0, lines
    assert "republished" in lines[0], lines
    commit(root, "republish vector-add from the newer session")
    path = root / "lessons" / f"{VECTOR_ADD}.md"
    path.write_text(path.read_text().replace(EXPLANATION, "plausibility: []\n", 1))
    assert not lessons.load(root, VECTOR_ADD).front.plausibility
    commit(root, "drop the explanation")


def c_transcript_linked(root, info):
    """A committed transcript (one no decision reads) replaced by a link to a copy of itself outside the
    repository: ``history-refused``, and an input publish refuses."""
    transcript = root / info["run"].step.stdout.path
    outside = root.parent / "elsewhere.txt"
    shutil.copyfile(transcript, outside)
    transcript.unlink()
    transcript.symlink_to(outside)


def c_link_under_evidence(root, info):
    """A new, uncommitted link under evidence/ leading out of the repository: no history finding, but an
    input the audit refuses by what it is, so publish refuses the tree."""
    outside = root.parent / "notes.txt"
    outside.write_text("notes\n")
    (root / "evidence" / "notes.txt").symlink_to(outside)


AGREEMENT = {
    "control": (c_control, {VECTOR_ADD}),
    "edited-result-resealed": (c_edited_result, set()),
    "broken-source-digest-resealed": (c_broken_source, set()),
    "fake-gpu-own-key": (c_fake_gpu(new_signer()), {VECTOR_ADD}),
    "fake-gpu-unsigned": (c_fake_gpu(None), {VECTOR_ADD}),
    "fake-gpu-registered-key": (c_fake_gpu(RUNNER), {VECTOR_ADD, SOFTMAX}),
    "hand-edited-published-lesson": (c_hand_edited_lesson, set()),
    "refuted-claim-kept": (c_refutation_kept, set()),
    "git-rm-of-the-refuting-claims-record": (c_refutation_deleted, set()),
    "record-signed-after-revocation": (c_revoked, {VECTOR_ADD}),
    "transcript-edited-and-committed": (c_transcript_edited, set()),
    "new-lesson-with-entries-uncommitted": (c_new_lesson(False), {VECTOR_ADD}),
    "new-lesson-with-entries-committed": (c_new_lesson(True), {VECTOR_ADD}),
    "newer-passing-run": (c_newer_run(), {VECTOR_ADD}),
    "newer-failing-run": (c_newer_run(passed=False), set()),
    "records-from-a-checkout-run-node": (c_newer_run(checkout_node=True), {VECTOR_ADD}),
    "plausibility-shim-path-on-a-registered-runner": (c_shim_path(False), {VECTOR_ADD}),
    "plausibility-shim-path-explained": (c_shim_path(True), {VECTOR_ADD, SOFTMAX}),
    "plausibility-on-a-cited-record-explanation-removed": (c_cited_record_explanation_removed, set()),
    "history-refused-transcript-linked-out": (c_transcript_linked, set()),
    "uncommitted-link-under-evidence": (c_link_under_evidence, set()),
}
"""Case → (what it does to the signed tree, the lessons that are ready after it); any other lesson: not ready."""


TREE_WIDE = (*HISTORY.values(), *INPUT.values())
"""Findings about the tree that keep every lesson from being ready (history, and inputs refused by what they
are): the audit names the file, not each lesson."""


def status_footer(root: Path, lesson_id: str, capsys) -> str:
    code, out = cli(capsys, "status", lesson_id, "--root", str(root))
    assert code == 0, out
    return next(line for line in out.splitlines() if line.startswith(f"{lesson_id}: "))


@pytest.mark.parametrize("case, ready", AGREEMENT.values(), ids=AGREEMENT.keys())
def test_status_publish_dry_run_and_audit_agree(signed_tree, capsys, case, ready):
    root, info = signed_tree
    case(root, info)
    ids = lessons.lesson_ids(root)
    code, out = cli(capsys, "status", "--root", str(root))  # every lesson's line, from one status of the tree
    assert code == 0, out
    footers = {i: next(line for line in out.splitlines() if line.startswith(f"{i}: ")) for i in ids}
    said = {}
    for lesson_id in ids:
        footer = footers[lesson_id]
        dry, out = cli(capsys, "publish", lesson_id, "--dry-run", "--root", str(root))
        said[lesson_id] = any(f"; {state.message}" in footer for state in LessonState if state.ready)
        assert said[lesson_id] == (dry == 0), (lesson_id, footer, out)
    assert {i for i, ok in said.items() if ok} == ready, said
    for lesson_id in ids:
        lesson = lessons.load(root, lesson_id)
        if lesson.front.status == "published":
            continue
        if said[lesson_id]:
            assert publish_cmd(root, lesson_id, capsys)[0] == 0
        else:  # a careless author: published by hand
            lesson.path.write_text(lesson_text.render(lesson, lesson.front.model_copy(update={"status": "published"})))
    code, out = audit_cmd(root, capsys)
    tree_wide = any(f": {rule}: " in out for rule in TREE_WIDE)
    for lesson_id in ids:
        against = any(line.startswith(f"lessons/{lesson_id}.md: ") for line in out.splitlines())
        assert (against or tree_wide) == (lesson_id not in ready), (lesson_id, out)
    if ready == set(ids):
        assert code == 0, out


def test_newer_evidence_is_a_note_and_a_newer_failure_blocks_republishing(signed_tree, capsys):
    """A valid published lesson with a newer passing run: status notes it, publish --republish refreshes it.
    A newer failing run: the lesson is no longer ready, and --republish is refused."""
    root, _ = signed_tree
    newer_vector_add_run(root)
    commit(root, "a newer passing session")
    footer = status_footer(root, VECTOR_ADD, capsys)
    assert footer.endswith(f"; newer evidence: republish to refresh (nox -s publish -- {VECTOR_ADD} --republish)")
    code, out = cli(capsys, "publish", VECTOR_ADD, "--republish", "--root", str(root))
    assert code == 0, out
    assert "republished from NVIDIA H200" in out, out
    assert "newer evidence" not in status_footer(root, VECTOR_ADD, capsys)
    failing = newer_vector_add_run(root, passed=False, later=1)
    commit(root, "a newer failing session")
    footer = status_footer(root, VECTOR_ADD, capsys)
    assert footer.endswith("published, but its evidence no longer holds (nox -s audit fails)"), footer
    code, out = audit_cmd(root, capsys)
    assert code == 1
    assert f"lessons/{VECTOR_ADD}.md: lesson-published-without-evidence:" in out
    assert "a newer run than the cited" in out, out
    assert failing.stem in out, out
    path = root / "lessons" / f"{VECTOR_ADD}.md"
    before = path.read_text()
    code, out = cli(capsys, "publish", VECTOR_ADD, "--republish", "--root", str(root))
    assert code == 1, out
    assert "not republished" in out, out
    assert path.read_text() == before, out


# --- a root nobody can shadow; --since that says what it judged; what rests on a committer's word --------
#
# Each attack below got a forged record counted, or a hand-edited lesson passed, with the audit at exit 0 on
# 6e3bf99. The reviewer's values (--trust-root, $TILEPROOF_TRUST_ROOT, --expect-ancestor, --since) are now full
# commit ids or file:PATH outside the tree (gather.given_commit); what only a committer's word settles is a
# notice, and a finding under --strict.


def self_rooted(root: Path) -> tuple[str, str, Path]:
    """The committer's own key added to the registry unendorsed, and a fake-GPU softmax record signed with it,
    committed: (the root the reviewer trusts, the committer's commit, the record)."""
    trusted = head_of(root)
    mine = new_signer()
    add_key(root, mine)
    path = fake_h200_softmax(root, mine, board="H200-second")  # a board of its own: no plausibility signal
    commit(root, "H200 session 20251129T130000Z (6/6 passed)")
    return trusted, head_of(root), path


def cli_at(root: Path, *argv: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The command as nox and CI run it: in the repository root (``--root .``, the working directory ``root``), with
    ``env`` set; the command line's own ``main`` (conftest's ``run_cli``), in this process."""
    from conftest import run_cli

    code, out, err = run_cli(*argv, "--root", ".", cwd=root, env=env)
    return code, out + err


@pytest.mark.parametrize("length", [40, 12, 7])
@pytest.mark.parametrize("via", ["--trust-root", "$TILEPROOF_TRUST_ROOT"])
def test_cli_a_committed_file_named_like_the_root_does_not_replace_it(signed_tree, length, via):
    """(1) A file at the top of the tree named like the reviewer's root (in full, or as the audit's 12-character
    and git's 7-character ids) holding a pin to the committer's own registry commit. The reviewer runs from the
    repository root, as nox and CI do: on 6e3bf99 the file was read first and became the root (audit and
    publish --dry-run exit 0, the committer's "why" printed). A full id is now the commit; an abbreviated one is
    refused in one line giving the full id."""
    root, _ = signed_tree
    trusted, theirs, path = self_rooted(root)
    (root / trusted[:length]).write_text(f"pin_version: 1\ncommit: '{theirs}'\nwhy: reviewed by the lead\n")
    commit(root, "notes")
    argv: tuple[str, ...] = ("--trust-root", trusted[:length]) if via == "--trust-root" else ()
    env = {"TILEPROOF_TRUST_ROOT": trusted[:length]} if via != "--trust-root" else None
    code, out = cli_at(root, "audit", *argv, env=env)
    publish_code, publish_out = cli_at(root, "publish", "02-softmax", "--dry-run", *argv, env=env)
    assert "reviewed by the lead" not in out + publish_out
    if length == 40:
        assert code == 1, out
        assert f"trust root: commit {trusted[:12]}, from {via}" in out, out
        assert "lessons/runners.yaml: registry-root-reset:" in out, out
        assert f"runs/{path.name}: record-unendorsed-key:" in out, out
        assert publish_code == 1, publish_out
        return
    for status, said in ((code, out), (publish_code, publish_out)):
        assert status == 2, said
        assert len(said.strip().splitlines()) == 1, said
        assert f"{via} {trusted[:length]}: an abbreviated commit id" in said, said
        assert f"(fix: pass the full id: {trusted})" in said, said


def test_cli_a_file_root_is_named_as_a_file_and_kept_outside_the_tree(signed_tree, capsys, tmp_path):
    """(1) The reviewer's own pin file is read only when named file:PATH, and only outside the audited tree: the
    committer's file in the tree is refused in one line, a bare path too."""
    root, _ = signed_tree
    trusted, theirs, path = self_rooted(root)
    (root / "pin.yaml").write_text(f"pin_version: 1\ncommit: '{theirs}'\nwhy: reviewed by the lead\n")
    commit(root, "notes")
    for given, said in (("file:pin.yaml", f"{root.resolve() / 'pin.yaml'} is inside the audited tree"),
                        ("pin.yaml", "(fix: for that file, pass file:pin.yaml (it must lie outside the repository))")):
        code, out = cli_at(root, "audit", "--trust-root", given)
        assert code == 2, out
        assert len(out.strip().splitlines()) == 1 and said in out, out
    kept = tmp_path / "my-pin.yaml"
    kept.write_text(f"pin_version: 1\ncommit: '{trusted}'\nwhy: the registry I reviewed\n")
    code, out = cli(capsys, "audit", "--root", str(root), "--trust-root", f"file:{kept}")
    assert code == 1, out
    assert f"runs/{path.name}: record-unendorsed-key:" in out, out


def clone(root: Path, tmp_path: Path) -> Path:
    """The reviewer's clone, with every tag the committer pushed."""
    copy = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(root), str(copy)], check=True, capture_output=True)
    return copy


@pytest.mark.parametrize("length", [12, 7])
def test_cli_a_pushed_tag_named_like_an_abbreviated_root_does_not_shadow_it(signed_tree, capsys, tmp_path, length):
    """(2) A tag named like the root's abbreviated id (the audit prints 12 characters, reviewers copy them),
    pointing at the committer's commit, pushed: git takes a ref before an abbreviation, so on 6e3bf99 the root
    was the committer's (audit and publish --dry-run exit 0). Refused now, in one line naming the full id and
    the tag; a tag named like the full id does not shadow it."""
    root, _ = signed_tree
    trusted, theirs, path = self_rooted(root)
    git(root, "tag", trusted[:length], theirs)
    git(root, "tag", trusted, theirs)
    reviewer = clone(root, tmp_path)
    for argv in (("audit",), ("publish", "02-softmax", "--dry-run")):
        code, out = cli(capsys, *argv, "--root", str(reviewer), "--trust-root", trusted[:length])
        assert code == 2, out
        assert len(out.strip().splitlines()) == 1, out
        assert f"refs/tags/{trusted[:length]} names {theirs} (a ref shadows the abbreviation)" in out, out
        assert f"(fix: pass the full id: {trusted})" in out, out
    code, out = cli(capsys, "audit", "--root", str(reviewer), "--trust-root", trusted)
    assert code == 1, out
    assert f"trust root: commit {trusted[:12]}, from --trust-root" in out, out
    assert f"runs/{path.name}: record-unendorsed-key:" in out, out


def test_cli_a_tag_named_like_an_abbreviated_audited_head_hides_no_rewrite(signed_tree, capsys):
    """(2) History rewritten to drop a refuting record, and a tag named like the abbreviated head the reviewer
    audited put on the new HEAD: on 6e3bf99 ``--expect-ancestor`` and ``--since`` took the tag (exit 0). Both
    refuse an abbreviation now; with the full id the rewrite is history-rewritten, and --since, whose commit is
    no ancestor of HEAD, audits the whole tree and says so (since-not-ancestor)."""
    root, _ = signed_tree
    refute_a_claim(root)
    commit(root, "a refuted claim")
    audited = head_of(root)
    git(root, "reset", "-q", "--hard", "HEAD~1")
    git(root, "tag", audited[:12], "HEAD")
    for option in ("--expect-ancestor", "--since"):
        code, out = cli(capsys, "audit", "--root", str(root), option, audited[:12])
        assert code == 2, out
        assert f"{option} {audited[:12]}: an abbreviated commit id" in out, out
        assert f"refs/tags/{audited[:12]} names {head_of(root)}" in out, out
    code, out = cli(capsys, "audit", "--root", str(root), "--expect-ancestor", audited)
    assert code == 1, out
    assert "HEAD: history-rewritten:" in out, out
    code, out = cli(capsys, "audit", "--root", str(root), "--since", audited)
    assert code == 1, out
    assert f"HEAD: since-not-ancestor: --since {audited} ({audited[:12]}) is not an ancestor of HEAD" in out, out
    assert "not an ancestor of HEAD: the whole tree audited" in out, out


def test_cli_since_a_tag_moved_to_head_judges_nothing_and_says_so(signed_tree, capsys, tmp_path):
    """(3) A hand-edited published lesson committed, and the tag CI audits from moved to HEAD after it: on
    6e3bf99 ``audit --since last-audited`` judged 0 records and 0 lessons and exited 0. A tag is refused now (the
    line gives the id it names, to pass once checked); that id, HEAD, judges nothing: since-judged-nothing. From
    the head really audited, the lesson is judged and the edit found. A file holding the id is read as the id."""
    root, _ = signed_tree
    audited = head_of(root)
    git(root, "tag", "last-audited")
    lesson = root / "lessons" / "01-vector-add.md"
    lesson.write_text(lesson.read_text().replace("gpu: NVIDIA H200", "gpu: NVIDIA B200"))
    commit(root, "it ran on a B200")
    git(root, "tag", "-f", "last-audited", "HEAD")
    for name in ("last-audited", "refs/tags/last-audited", "HEAD"):
        code, out = cli(capsys, "audit", "--root", str(root), "--since", name)
        assert code == 2, out
        assert len(out.strip().splitlines()) == 1, out
        assert f"--since {name}: neither a full commit id nor file:PATH" in out, out
        assert f"pass the full id it names now, once checked: {head_of(root)}" in out, out
    code, out = cli(capsys, "audit", "--root", str(root), "--since", head_of(root))
    assert code == 1, out
    assert "records and their evidence, 0 lessons judged" in out, out
    assert f"HEAD: since-judged-nothing: --since {head_of(root)} ({head_of(root)[:12]}) judged 0 records and 0 " \
           "lessons: it is HEAD, and the working tree holds no change" in out, out
    kept = tmp_path / "audited-head"
    kept.write_text(audited + "\n")
    for given in (audited, f"file:{kept}"):
        code, out = cli(capsys, "audit", "--root", str(root), "--since", given)
        assert code == 1, out
        assert "lessons/01-vector-add.md: lesson-rederive: hardware.gpu" in out, out
        assert f"audit scope: since {given} ({audited[:12]}): 0 records and their evidence, 2 lessons judged" in out


def test_cli_a_signal_explained_in_front_matter_is_a_notice_and_a_finding_under_strict(signed_tree, capsys,
                                                                                       tmp_path):
    """(8) A fake GPU's shim PATH and PYTHONPATH on a run signed by the registered runner, both explained in the
    lesson's front matter by the committer: on 6e3bf99 no line at all said so. Now a notice each in the printed
    audit and both reports, and a finding under --strict (the reviewer's mode)."""
    root, _ = signed_tree
    path = fake_h200_softmax(root, RUNNER, env={**SHIM, "PYTHONPATH": "/tmp/site"})  # a fake cupy's folder too
    explain(root, SOFTMAX)
    lesson = root / "lessons" / f"{SOFTMAX}.md"
    lesson.write_text(lesson.read_text().replace(EXPLANATION, EXPLANATION + "- signal: shim-path\n  subject: "
                                                 "PYTHONPATH=/tmp/site\n  explanation: the runner's own site "
                                                 "packages, installed there by its owner\n", 1))
    commit(root, "an H200 run of softmax")
    md, html = tmp_path / "a.md", tmp_path / "a.html"
    code, out = cli(capsys, "audit", "--root", str(root), "--md", str(md), "--html", str(html))
    assert code == 0, out
    said = [f"runs/{path.name}: plausibility-explained: shim-path {subject}: settled only by lessons/{SOFTMAX}.md's "
            f"front matter, which says: the runner's {words}"
            for subject, words in ((SHIM_SUBJECT, "CUDA 13 tools"), ("PYTHONPATH=/tmp/site", "own site packages"))]
    for line in said:
        assert f"notice: {line}" in out, out
    assert "0 findings, 2 notices (findings under --strict)" in out, out
    assert "## Notices" in md.read_text() and f"| `runs/{path.name}` | plausibility-explained |" in md.read_text()
    assert 'id="notices"' in html.read_text() and "settled only by" in html.read_text()
    code, out = cli(capsys, "audit", "--root", str(root), "--strict")
    assert code == 1, out
    for line in said:
        assert line in out and f"notice: {line}" not in out, out


def test_cli_a_moved_pin_is_a_notice_and_a_finding_under_strict_unless_the_reviewer_roots_there(signed_tree, capsys):
    """(8) A root reset accepted by moving the tree's pin (docs/keys.md): on 6e3bf99 one informational line. Now
    a notice, and a finding under --strict, unless the reviewer's own root names the commit the pin moved to."""
    root, _ = signed_tree
    add_key(root, new_signer(), may_sign=["compile", "claims", "registry"], owner="lead's new CPU build key")
    commit(root, "runner registry: root reset (every key lost)", "lessons/runners.yaml")
    reset = head_of(root)
    _pin(root, reset)
    commit(root, "move the trust root to the reset", ".ci")
    code, out = audit_cmd(root, capsys)
    assert code == 0, out
    assert f"notice: .ci/trust-root: trust-pin-moved: pin moved in {head_of(root)[:12]}: .ci/trust-root absent -> " \
           f"{reset[:12]}" in out, out
    code, out = cli(capsys, "audit", "--root", str(root), "--strict")
    assert code == 1, out
    assert ".ci/trust-root: trust-pin-moved:" in out and "the root in force is the tree's own pin" in out, out
    code, out = cli(capsys, "audit", "--root", str(root), "--strict", "--trust-root", reset)
    assert code == 0, out
    assert f"pin moved in {head_of(root)[:12]}" in out and "trust-pin-moved" not in out, out
