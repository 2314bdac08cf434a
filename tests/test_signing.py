"""Signed records: the DSSE envelope and in-toto statement on disk, checked by a second
implementation (securesystemslib's DSSE + key code; PyNaCl/libsodium over a PAE built
here from the DSSE spec), the unsigned form, and loading signing keys."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from one_freeze import pip_freeze_once  # noqa: F401  # used by usefixtures
from signing_keys import REPO, entry, new_signer, real_run, registry_of, write_registry

from tileproof.records import store
from tileproof.records.errors import RecordError, TileproofError
from tileproof.records.trust import runner_keys, signing


@pytest.fixture
def signed(tmp_path):
    """A real H200 run record written signed into a fresh tree."""
    signer = new_signer()
    path = store.write_record(tmp_path, real_run(), signer)
    return tmp_path, signer, path


def test_signed_file_is_a_dsse_envelope_of_an_in_toto_statement(signed):
    _root, signer, path = signed
    env = json.loads(path.read_text())
    assert set(env) == {"payloadType", "payload", "signatures"}
    assert env["payloadType"] == "application/vnd.in-toto+json"
    assert env["signatures"] == [{"keyid": hashlib.sha256(signing.raw_public(signer.public)).hexdigest(),
                                  "sig": env["signatures"][0]["sig"]}]
    statement = json.loads(base64.b64decode(env["payload"]))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "urn:tileproof:record:v2"
    rec = store.load_record(path)
    assert statement["predicate"]["record"] == json.loads(rec.model_dump_json())
    names = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    materials = {s["name"]: s["digest"]["sha256"] for s in statement["predicate"]["materials"]}
    # subjects: what the run produced, every transcript: step streams, report, pip freeze, nvidia-smi
    for f in [rec.step.stdout, rec.step.stderr, rec.report_file, rec.environment.pip_freeze,
              rec.environment.nvidia_smi, rec.environment.nvidia_smi_query]:
        assert names[f.path] == f.sha256
    # materials: what it read (the program, its helpers, the lesson), never a subject
    for f in rec.sources:
        assert materials[f.path] == f.sha256
        assert f.path not in names
    assert all(n.startswith("evidence/") for n in names)
    assert "kernels/fused.py" in materials or any(n.startswith("kernels/") for n in materials)


V1_SIGNED = "runs/20261201T092315Z-run-4f961181.json"
"""A committed record signed before statement v2: it is never rewritten, and reads as it was signed."""


def test_records_signed_before_v2_keep_their_v1_statement(repo_root):
    """The v1 statement (predicate = the record; every file digest, inputs included, a subject) reads back."""
    env = json.loads((repo_root / V1_SIGNED).read_text())
    statement = json.loads(base64.b64decode(env["payload"]))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "urn:tileproof:record:v1"
    rec = store.load_record(repo_root / V1_SIGNED)
    assert statement["predicate"] == rec.model_dump(mode="json", exclude_unset=True)  # as read: what was signed
    names = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    # sources, and every transcript: step streams, report, pip freeze, nvidia-smi
    for f in [*rec.sources, rec.step.stdout, rec.step.stderr, rec.report_file, rec.environment.pip_freeze,
              rec.environment.nvidia_smi, rec.environment.nvidia_smi_query]:
        assert names[f.path] == f.sha256
    assert "kernels/fused.py" in names or any(n.startswith("kernels/") for n in names)
    assert store.read_record(repo_root / V1_SIGNED, runner_keys.load_registry(repo_root)).trust == "verified"


def test_securesystemslib_verifies_the_envelope(signed):
    """A second DSSE implementation (its own envelope parsing, PAE and key handling)."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    _root, signer, path = signed
    key = SSlibKey.from_dict(signer.keyid, {"keytype": "ed25519", "scheme": "ed25519",
                                            "keyval": {"public": signing.raw_public(signer.public).hex()}})
    envelope = Envelope.from_dict(json.loads(path.read_text()))
    assert set(envelope.verify([key], 1)) == {signer.keyid}
    other = new_signer()
    stranger = SSlibKey.from_dict(signer.keyid, {"keytype": "ed25519", "scheme": "ed25519",
                                                 "keyval": {"public": signing.raw_public(other.public).hex()}})
    with pytest.raises(Exception, match="threshold|Accepted signatures"):
        envelope.verify([stranger], 1)


def test_pynacl_verifies_over_a_pae_built_from_the_spec(signed):
    """libsodium's ed25519 over ``DSSEv1 SP LEN(type) SP type SP LEN(body) SP body``."""
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    _root, signer, path = signed
    env = json.loads(path.read_text())
    body = base64.b64decode(env["payload"])
    ptype = env["payloadType"].encode()
    message = b" ".join([b"DSSEv1", str(len(ptype)).encode(), ptype, str(len(body)).encode(), body])
    sig = base64.b64decode(env["signatures"][0]["sig"])
    VerifyKey(signing.raw_public(signer.public)).verify(message, sig)
    with pytest.raises(BadSignatureError):
        VerifyKey(signing.raw_public(signer.public)).verify(message + b" ", sig)


def test_signed_record_reads_back_verified_and_equal_to_the_plain_one(signed, tmp_path):
    root, signer, path = signed
    loaded = store.read_record(path, registry_of(entry(signer)))
    assert loaded.trust == "verified"
    assert loaded.verification.keyid == signer.keyid
    plain = store.write_record(tmp_path / "plain", real_run())
    assert store.load_record(plain) == loaded.record
    assert loaded.record.seal == store.seal_of(loaded.record)  # the seal stays inside the predicate


def test_without_a_key_the_record_is_plain_and_unsigned(tmp_path):
    path = store.write_record(tmp_path, real_run())
    assert "schema_version" in json.loads(path.read_text())  # the pre-signing format, unchanged
    loaded = store.read_record(path, runner_keys.EMPTY)
    assert loaded.trust == "unsigned"
    assert loaded.verification.keyid is None


def test_envelope_without_signatures_is_unsigned(signed, tmp_path):
    _root, signer, path = signed
    env = json.loads(path.read_text())
    env["signatures"] = []
    path.write_text(json.dumps(env))
    assert store.read_record(path, registry_of(entry(signer))).trust == "unsigned"


def test_committed_records_all_load_unsigned_or_verified(repo_root):
    """Records written before signing existed (before 2026-12-01) stay unsigned; every later one verifies."""
    reg = runner_keys.load_registry(repo_root)
    tracked = subprocess.run(["git", "-C", str(repo_root), "ls-files", "runs"], capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout: which records are committed is git's to say")
    committed = {line.rsplit("/", 1)[-1].removesuffix(".json") for line in tracked.stdout.split()}
    loaded = [x for x in store.read_records(repo_root, reg) if x.record.run_id in committed]
    later = {x.trust for x in loaded if x.record.run_id >= "20261201"}
    earlier = {x.trust for x in loaded if x.record.run_id < "20261201"}
    assert later == {"verified"}
    assert earlier == {"unsigned"}
    assert [x.record for x in loaded] == [r for r in store.load_records(repo_root) if r.run_id in committed]


def test_a_broken_envelope_is_one_line(signed):
    _root, _signer, path = signed
    env = json.loads(path.read_text())
    env["payload"] = "not base64!"
    path.write_text(json.dumps(env))
    with pytest.raises(RecordError) as e:
        store.load_record(path)
    assert "\n" not in str(e.value)
    assert "payload" in str(e.value)
    assert "fix:" in str(e.value)


def test_audit_reads_a_signed_record_as_sealed(tmp_path):
    """The audit's byte pass takes the seal of the predicate, not of the envelope."""
    from tileproof.catalog import byte_pass as audit_scan

    path = store.write_record(tmp_path, real_run(), new_signer())
    seals, _disk, _diffs, _refused, _notes = audit_scan.byte_pass(str(tmp_path), [path.name])
    assert seals[path.name] == store.load_record(path).seal


# --- keys ------------------------------------------------------------------------------


def pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def test_load_signer_reads_a_0600_key_outside_the_repo(tmp_path):
    key = Ed25519PrivateKey.generate()
    path = tmp_path / "key.pem"
    path.write_bytes(pem(key))
    path.chmod(0o600)
    signer = signing.load_signer(path, tmp_path / "repo")
    assert signer.keyid == signing.keyid_of(key.public_key())
    assert signer.path == path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_load_signer_refuses_a_key_others_can_read(tmp_path, mode):
    path = tmp_path / "key.pem"
    path.write_bytes(pem(Ed25519PrivateKey.generate()))
    path.chmod(mode)
    with pytest.raises(RecordError, match=f"mode {mode:o}.*chmod 600"):
        signing.load_signer(path, tmp_path / "repo")


def test_load_signer_refuses_a_key_that_is_not_ed25519(tmp_path):
    path = tmp_path / "key.pem"
    path.write_bytes(pem(generate_private_key(SECP256R1())))
    path.chmod(0o600)
    with pytest.raises(RecordError, match="not an unencrypted PEM ed25519"):
        signing.load_signer(path, tmp_path / "repo")


def test_signer_from_env(tmp_path, monkeypatch):
    monkeypatch.delenv(signing.KEY_ENV, raising=False)
    assert signing.signer_from_env(tmp_path) is None
    monkeypatch.setenv(signing.KEY_ENV, str(tmp_path / "missing.pem"))
    with pytest.raises(RecordError, match="cannot read the signing key"):
        signing.signer_from_env(tmp_path / "repo")  # named but absent: fail closed, never unsigned


def test_keygen_writes_0600_outside_and_prints_a_valid_entry(tmp_path, capsys, monkeypatch):
    from tileproof.__main__ import main

    monkeypatch.delenv(signing.KEY_ENV, raising=False)
    key = tmp_path / "home" / "k.pem"
    assert main(["keygen", "--root", str(tmp_path / "repo"), "--key", str(key), "--owner", "lead",
                 "--may-sign", "run,session"]) == 0
    assert os.stat(key).st_mode & 0o777 == 0o600
    out = capsys.readouterr().out
    signer = signing.load_signer(key, tmp_path / "repo")
    assert signer.keyid in out
    assert signing.raw_public(signer.public).hex() in out
    import yaml

    listed = yaml.safe_load(out[out.index("- owner"):])
    reg = runner_keys.RunnerRegistry(registry_version=1, runners=listed)
    assert reg.runners[0].keyid == signer.keyid
    assert reg.runners[0].may_sign == ["run", "session"]
    assert main(["keygen", "--root", str(tmp_path / "repo"), "--key", str(key)]) == 2  # never overwritten
    assert "already exists" in capsys.readouterr().err


def test_keygen_takes_the_path_from_the_environment(tmp_path, monkeypatch):
    from tileproof.__main__ import main

    key = tmp_path / "env.pem"
    monkeypatch.setenv(signing.KEY_ENV, str(key))
    assert main(["keygen", "--root", str(tmp_path / "repo")]) == 0
    assert key.is_file()
    assert signing.signer_from_env(tmp_path / "repo").keyid == signing.load_signer(key, tmp_path / "repo").keyid


@pytest.mark.usefixtures("pip_freeze_once")
def test_run_command_signs_with_the_environment_key(tmp_path, monkeypatch):
    """``tileproof run`` end to end (its no-GPU gate path here): every record it writes
    is an envelope that verifies; a key inside the root is refused before anything runs."""
    import shutil

    from conftest import cli_args

    from tileproof.commands import run

    root = tmp_path / "repo"
    for folder in ("kernels", "lessons"):
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "cpp").mkdir()
    key = tmp_path / "k.pem"
    key.write_bytes(pem(Ed25519PrivateKey.generate()))
    key.chmod(0o600)
    monkeypatch.setenv(signing.KEY_ENV, str(key))
    ns = cli_args("run", "--program", "vector_add", "--timeout", "300", "--root", str(root), "--record-no-gpu")
    run.run(ns)
    reg = registry_of(entry(signing.load_signer(key, root)))
    loaded = store.read_records(root, reg)
    assert {x.record.kind for x in loaded} == {"run", "session"}
    assert {x.trust for x in loaded} == {"verified"}
    inside = root / "k.pem"
    shutil.copy(key, inside)
    monkeypatch.setenv(signing.KEY_ENV, str(inside))
    with pytest.raises(TileproofError, match="inside the repository"):
        run.run(ns)
    assert len(store.record_files(root)) == 2  # nothing more was written


def test_repo_has_the_registry_file():
    assert (REPO / runner_keys.REGISTRY).is_file()
    runner_keys.load_registry(REPO)


def _one_committed_record_per_kind_and_version():
    seen = {}
    for path in store.record_files(REPO):
        rec = store.load_record(path)
        seen.setdefault((rec.kind, rec.schema_version), path)
    return sorted(seen.values())


@pytest.mark.parametrize("path", _one_committed_record_per_kind_and_version(), ids=lambda p: p.stem)
def test_every_committed_kind_signs_and_verifies(tmp_path, path):
    """compile, run, session, bench and claims (v1 and v2) records, as committed: signed,
    they verify here and in securesystemslib, and read back as the same record."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    signer = new_signer()
    rec = store.load_record(path)
    out = store.write_record(tmp_path, rec, signer)
    loaded = store.read_record(out, registry_of(entry(signer)))
    assert loaded.trust == "verified"
    assert loaded.record.model_dump(mode="json") == store.load_record(store.write_record(
        tmp_path / "plain", rec)).model_dump(mode="json")
    key = SSlibKey.from_dict(signer.keyid, {"keytype": "ed25519", "scheme": "ed25519",
                                            "keyval": {"public": signing.raw_public(signer.public).hex()}})
    assert set(Envelope.from_dict(json.loads(out.read_text())).verify([key], 1)) == {signer.keyid}


def _signed_audit_tree(tmp_path, monkeypatch, signer):
    """The audit's clean tree (its lesson published by ``publish``) with every record signed by
    ``signer``, registered in the tree's lessons/runners.yaml."""
    import functools
    import sys

    sys.path.insert(0, str(REPO / "tests" / "data" / "audit"))
    import audit_tree

    monkeypatch.setattr(store, "write_record", functools.partial(store.write_record, signer=signer))
    write_registry(tmp_path, registry_of(entry(signer)))
    audit_tree.clean_tree(tmp_path)
    assert all("payloadType" in json.loads(p.read_text()) for p in store.record_files(tmp_path))


def test_a_fully_signed_tree_audits_clean(tmp_path, monkeypatch):
    """The audit's clean tree with every record written signed by a registered runner: 0 findings."""
    from tileproof.gather import audit

    _signed_audit_tree(tmp_path, monkeypatch, new_signer())
    result = audit.audit(tmp_path)
    assert result.findings == []
    assert result.validated == 6


def test_records_signed_by_an_unregistered_key_are_findings_and_never_count(tmp_path, monkeypatch):
    """The signature check is wired into the one funnel (``trust.refusal``): the audit names every
    such record, and the published lesson that rests on them loses its evidence."""
    from tileproof.gather import audit

    _signed_audit_tree(tmp_path, monkeypatch, new_signer())
    write_registry(tmp_path, registry_of())  # the runner's key is no longer (or never was) registered
    result = audit.audit(tmp_path)
    rules = {f.rule for f in result.findings}
    assert "record-unknown-key" in rules
    assert sum(f.rule == "record-unknown-key" for f in result.findings) == 6
    published = [lesson for lesson in result.lessons if lesson.status == "published"]
    assert published
    assert not any(lesson.publishable for lesson in published)
    assert "lesson-published-without-evidence" in rules
    (row,) = [r for r in published[0].decision.rows if not r.row.optional][:1]
    assert "ignored, signature unknown-key" in row.reason


def test_keygen_default_path_is_under_the_home_config(tmp_path, monkeypatch):
    from tileproof.__main__ import main

    monkeypatch.delenv(signing.KEY_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert main(["keygen", "--root", str(tmp_path / "repo")]) == 0
    key = tmp_path / "home" / ".config" / "tileproof" / "signing-key.pem"
    assert key.is_file()
    assert key.stat().st_mode & 0o777 == 0o600
    assert key.parent.stat().st_mode & 0o777 == 0o700


def test_no_record_model_field_is_left_a_forward_reference():
    """The statement's subjects come from a walk of the record's field annotations (``signing._walk``). A field
    still a forward reference (its type defined below the model naming it) is invisible to that walk until
    pydantic happens to rebuild the model, so one process signed a digest another did not find."""
    import pydantic

    from tileproof.records import models

    found = [(name, field) for name, cls in vars(models).items()
             if isinstance(cls, type) and issubclass(cls, pydantic.BaseModel)
             for field, info in cls.model_fields.items() if "ForwardRef" in repr(info.annotation)]
    assert found == []
