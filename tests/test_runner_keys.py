"""The runner registry and verification against it: rotation, revocation, kinds,
several signatures, a malformed registry in one line; and the trust policy switch."""

from __future__ import annotations

import json
import typing
from datetime import datetime, timedelta, timezone

import pytest
from signing_keys import entry, new_signer, real_run, registry_of, v1_subjects, write_registry

from tileproof.judge import trust
from tileproof.records import store
from tileproof.records.errors import RecordError
from tileproof.records.trust import runner_keys, signing

RECORD_TIME = real_run().created


def signed(tmp_path, signer, **update):
    return store.write_record(tmp_path, real_run(**update), signer)


def test_missing_registry_is_empty_and_nothing_verifies(tmp_path):
    assert runner_keys.load_registry(tmp_path) == runner_keys.EMPTY
    path = signed(tmp_path, new_signer())
    assert store.read_record(path, runner_keys.load_registry(tmp_path)).trust == "unknown-key"


def test_registry_round_trips_through_yaml(tmp_path):
    reg = registry_of(entry(new_signer()), entry(new_signer(), revoked_since=RECORD_TIME))
    write_registry(tmp_path, reg)
    assert runner_keys.load_registry(tmp_path) == reg


@pytest.mark.parametrize("change, field", [
    (lambda e: e.update(keyid="0" * 64), "runners.0"),
    (lambda e: e.update(may_sign=["run", "deploy"]), "runners.0.may_sign.1"),
    (lambda e: e.update(may_sign=[]), "runners.0.may_sign"),
    (lambda e: e.update(revoked_since="2026-12-01T00:00:00"), "runners.0.revoked_since"),  # no time zone
    (lambda e: e.pop("owner"), "runners.0.owner"),
], ids=["keyid-not-the-key", "unknown-kind", "no-kinds", "naive-revocation", "no-owner"])
def test_a_bad_entry_is_one_line_naming_the_field(tmp_path, change, field):
    raw = registry_of(entry(new_signer())).model_dump(mode="json", exclude_none=True)
    change(raw["runners"][0])
    (tmp_path / "lessons").mkdir()
    (tmp_path / runner_keys.REGISTRY).write_text(json.dumps(raw))
    with pytest.raises(RecordError) as e:
        runner_keys.load_registry(tmp_path)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"lessons/runners.yaml: {field}:")
    assert "fix:" in msg


def test_a_key_listed_twice_is_refused(tmp_path):
    e = entry(new_signer())
    with pytest.raises(ValueError, match="listed twice"):
        registry_of(e, e)


def test_not_yaml_is_one_line(tmp_path):
    (tmp_path / "lessons").mkdir()
    (tmp_path / runner_keys.REGISTRY).write_text("runners: [\n")
    with pytest.raises(RecordError, match="not valid YAML"):
        runner_keys.load_registry(tmp_path)


def test_rotation_old_key_valid_before_its_revocation_refused_after(tmp_path):
    """Rotate at T: the new key is added, the old one revoked from T. Records the old key
    signed dated before T stay verified; dated at or after T are refused; the new key's verify."""
    old, new = new_signer(), new_signer()
    t = RECORD_TIME + timedelta(days=1)
    reg = registry_of(entry(old, revoked_since=t), entry(new))
    before = signed(tmp_path / "a", old)
    at = signed(tmp_path / "b", old, created=t)
    after = signed(tmp_path / "c", old, created=t + timedelta(seconds=1))
    fresh = signed(tmp_path / "d", new, created=t + timedelta(seconds=1))
    assert store.read_record(before, reg).trust == "verified"
    assert store.read_record(at, reg).trust == "revoked"
    v = store.read_record(after, reg).verification
    assert v.trust == "revoked"
    assert "revoked since" in v.reason
    assert v.keyid == old.keyid
    assert store.read_record(fresh, reg).trust == "verified"


def test_kind_not_allowed(tmp_path):
    bench_only = new_signer()
    reg = registry_of(entry(bench_only, may_sign=["bench"]))
    v = store.read_record(signed(tmp_path, bench_only), reg).verification
    assert v.trust == "kind-not-allowed"
    assert "not run records" in v.reason


def test_any_one_good_signature_verifies(tmp_path):
    good, stranger = new_signer(), new_signer()
    path = signed(tmp_path, stranger)
    raw = json.loads(path.read_text())
    payload = signing.payload_bytes(signing.Envelope.model_validate(raw))
    raw["signatures"].append({"keyid": good.keyid, "sig": good.sign(signing.pae(signing.PAYLOAD_TYPE, payload))})
    path.write_text(json.dumps(raw))
    assert store.read_record(path, registry_of(entry(good))).trust == "verified"
    assert store.read_record(path, registry_of()).trust == "unknown-key"


def test_a_registered_keys_bad_signature_is_reported_over_an_unknown_key(tmp_path):
    good, stranger = new_signer(), new_signer()
    path = signed(tmp_path, stranger)
    raw = json.loads(path.read_text())
    raw["signatures"].append({"keyid": good.keyid, "sig": raw["signatures"][0]["sig"]})
    path.write_text(json.dumps(raw))
    assert store.read_record(path, registry_of(entry(good))).trust == "bad-signature"


def test_subjects_must_be_the_records_own_digests(tmp_path):
    """A registered key that signed a statement whose subjects are not the record's
    digests (a buggy or lying signer) is not verified."""
    signer = new_signer()
    rec = store.load_record(store.write_record(tmp_path / "plain", real_run()))
    body = json.loads(rec.model_dump_json())
    subjects = v1_subjects(rec)[1:]  # one attested file left out
    statement = signing.Statement(type_=signing.STATEMENT_TYPE, subject=subjects,  # a v1 statement, as before v2
                                  predicateType=signing.PREDICATE_TYPE_V1, predicate=body)
    env = signing.envelope_of(statement, signer)
    path = tmp_path / "r.json"
    path.write_text(env.model_dump_json())
    assert store.read_record(path, registry_of(entry(signer))).trust == "subject-mismatch"


@pytest.mark.parametrize("drop", ["subject", "material"])
def test_a_v2_statement_must_name_every_product_and_material(tmp_path, drop):
    """A v2 statement whose subjects (the products) or materials (what the step read) leave one out."""
    signer = new_signer()
    rec = store.load_record(store.write_record(tmp_path / "plain", real_run()))
    statement = signing.record_statement(json.loads(rec.model_dump_json()), rec)
    if drop == "subject":
        statement = statement.model_copy(update={"subject": statement.subject[1:]})
    else:
        statement = statement.model_copy(update={"predicate": statement.predicate.model_copy(
            update={"materials": statement.predicate.materials[1:]})})
    path = tmp_path / "r.json"
    path.write_text(signing.envelope_of(statement, signer).model_dump_json())
    assert store.read_record(path, registry_of(entry(signer))).trust == "subject-mismatch"


# --- the policy switch -----------------------------------------------------------------


def test_every_failed_trust_has_a_rule():
    assert set(trust.FINDING) == set(typing.get_args(runner_keys.Trust)) - {"verified"}
    assert set(trust.FINDING.values()) == set(trust.RULES)


def test_policy_today_keeps_unsigned_legacy_records_counting():
    assert trust.POLICY == "unsigned-counts"
    assert trust.counts("verified")
    assert trust.counts("unsigned")
    for word in ("unknown-key", "bad-signature", "revoked", "kind-not-allowed", "subject-mismatch"):
        assert not trust.counts(word, "unsigned-counts")
        assert not trust.counts(word, "signed-only")


def test_signed_only_refuses_unsigned():
    assert not trust.counts("unsigned", "signed-only")
    assert trust.counts("verified", "signed-only")
    assert trust.issues(runner_keys.UNSIGNED, "signed-only") == [("record-unsigned", runner_keys.UNSIGNED.reason)]
    assert trust.issues(runner_keys.UNSIGNED, "unsigned-counts") == []


def test_revocation_instant_is_time_zone_aware():
    e = entry(new_signer(), revoked_since=datetime(2026, 12, 1, tzinfo=timezone.utc))
    assert e.revoked_since.utcoffset() == timedelta(0)


def test_unsigned_records_committed_before_the_first_key_are_legacy_not_findings(tmp_path):
    """A record first committed while the registry listed no key stays, counts toward nothing
    (signed-only), and is no finding; one committed after a key was registered is a finding."""
    import subprocess

    from tileproof.judge import trust
    from tileproof.judge.trust import standing, trust_root
    from tileproof.records.trust.runner_keys import UNSIGNED, registry_lists_keys
    from tileproof.runner import git_history

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    (tmp_path / "lessons").mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "lessons" / "runners.yaml").write_text("registry_version: 1\nrunners: []\n")
    (tmp_path / "runs" / "old.json").write_text("{}")
    git("add", "-A")
    git("commit", "-qm", "before signing")
    (tmp_path / "lessons" / "runners.yaml").write_text("registry_version: 1\nrunners:\n- owner: x\n")
    (tmp_path / "runs" / "new.json").write_text("{}")
    git("add", "-A")
    git("commit", "-qm", "a key, and an unsigned record after it")
    (tmp_path / "runs" / "uncommitted.json").write_text("{}")
    graph = git_history.trust_history(tmp_path)
    state = trust_root.evaluate(graph, (tmp_path / "lessons" / "runners.yaml").read_bytes(), [])
    first = {path: graph.first_commit(commit) for path, commit in git_history.read(tmp_path).record_commits().items()}
    paths = ["runs/old.json", "runs/new.json", "runs/uncommitted.json"]
    found = ({p for p in paths if p in first and standing.legacy(first[p], state)},
             {p for p in paths if p not in first and standing.legacy(None, state)})
    assert found == ({"runs/old.json"}, {"runs/uncommitted.json"})
    assert not trust.counts(UNSIGNED.trust, "signed-only")
    assert trust.issues(UNSIGNED, "signed-only", legacy=True) == []
    assert [r for r, _ in trust.issues(UNSIGNED, "signed-only")] == ["record-unsigned"]
    assert not registry_lists_keys(None)
    assert not registry_lists_keys(b"registry_version: 1\nrunners: []\n")
    assert registry_lists_keys(b"\xff")
    assert registry_lists_keys(b"runners:\n- owner: x\n")
