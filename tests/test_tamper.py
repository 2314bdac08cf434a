"""The tamper suite: issue 14's attacks, each replayed against a signed record or a
real git repository, decided at the records layer (``store.read_record`` with the
registry, ``judge.trust.counts``, ``runner.history``). Each edit is the careful
forger's: the record's seal recomputed with tileproof's own ``store.seal_of`` (which
the seal alone did not catch). Where the final refusal belongs to the publish decision
and the audit (wired at merge), the test stops at the API they will call.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from signing_keys import REPO, entry, new_signer, real_run, registry_of

from tileproof.judge import trust
from tileproof.records import signing, store
from tileproof.records.errors import TileproofError
from tileproof.runner import history

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
    statement["predicate"] = json.loads(edited.model_dump_json())
    statement["subject"] = [s.model_dump() for s in signing.subjects_of(edited)]  # consistent, too
    env["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    path.write_text(json.dumps(env))


def trust_of(path: Path) -> str:
    return store.read_record(path, REGISTRY).trust


def test_untouched_signed_record_verifies(signed):
    assert trust_of(signed) == "verified" and trust.counts("verified", "signed-only")


def test_edited_result_resealed_is_bad_signature(signed):
    def fail_to_pass(r):
        r["report"]["checks"][0]["max_abs_err"] = 1e-9
        r["reason"] = "every check passed (edited)"
        return r
    forge(signed, fail_to_pass)
    v = store.read_record(signed, REGISTRY).verification
    assert v.trust == "bad-signature" and not trust.counts(v.trust)
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
    assert v.trust == "unknown-key" and "lessons/runners.yaml" in v.reason and not trust.counts(v.trust)


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
    assert store.read_record(path, reg).trust == "revoked" and not trust.counts("revoked")


def test_key_signing_a_kind_it_may_not_is_refused(tmp_path):
    claims_only = new_signer()
    path = store.write_record(tmp_path, real_run(), claims_only)
    reg = registry_of(entry(claims_only, may_sign=["claims"]))
    assert store.read_record(path, reg).trust == "kind-not-allowed" and not trust.counts("kind-not-allowed")


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
    report = history.check_repository(root)
    assert report.status == "checked"
    assert [(f.path, f.problem) for f in report.findings] == [(claims, "missing")]


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
    assert code == 0 and "1 verified" in out and "history: checked" in out


def test_verify_command_names_a_resealed_edit(repo, capsys):
    root, path = repo
    forge(path, lambda r: {**r, "reason": "edited"})
    code, out = verify_cmd(root, capsys)
    assert code == 1 and f"runs/{path.name}: record-bad-signature:" in out
    assert f"runs/{path.name}: differs from its first committed version" in out  # and the history says so


def test_verify_command_names_a_foreign_key_and_a_git_rm(repo, capsys):
    root, path = repo
    other = store.write_record(root, real_run(run_id=real_run().run_id.replace("-run-", "-run-f")), new_signer())
    code, out = verify_cmd(root, capsys)
    assert code == 1 and f"runs/{other.name}: record-unknown-key:" in out
    other.unlink()
    git(root, "rm", "-q", f"runs/{path.name}")
    git(root, "commit", "-q", "-m", "drop it")
    code, out = verify_cmd(root, capsys)
    assert code == 1 and f"runs/{path.name}: is missing" in out


def test_verify_command_without_history_does_not_pass(tmp_path, capsys):
    store.write_record(tmp_path, real_run(), RUNNER)
    from signing_keys import write_registry

    write_registry(tmp_path, REGISTRY)
    code, out = verify_cmd(tmp_path, capsys)
    assert code == 1 and "history: no-history" in out and "1 verified" in out
