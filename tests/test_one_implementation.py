"""One implementation each: the release rule, the seal check, atomic writing, records by type,
typed toolchain problems, the trust funnel and typed claim evidence."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import fixture_records as fx
import pytest
from pydantic import ValidationError
from test_gate import FRONT, TABLE, TODAY, World

from tileproof.judge import claim_verdicts, gate, trust
from tileproof.judge.audit.rules.toolchain import toolchain_issues
from tileproof.records import release, store
from tileproof.records.models import (
    AS_READ,
    CLAIMS_SCHEMA_VERSION,
    ClaimResult,
    ClaimsRecord,
    ProbeKind,
    RunRecord,
    SessionRecord,
    Toolchain,
    ToolchainProblem,
    Transcript,
)
from tileproof.toolchain.find import coherence

TOOLS = {"nvcc": "13.4.92", "tileiras": "13.4.92", "ptxas": "13.4.92"}
PKGS = {p: "13.4.92" for p in release.PACKAGES}


@pytest.mark.parametrize("package", release.PACKAGES)
def test_every_reader_of_the_release_rule_flags_every_listed_package(tmp_path, package):
    """find.coherence, the gate and the audit read one list: a stray release of any piece in it
    is caught by all three (the gate used to look at 3 of the 6)."""
    odd = {**PKGS, package: "13.5.1"}
    shared, problems = coherence(TOOLS, odd, {})
    assert shared is None
    assert [p.kind for p in problems] == ["mixed-releases"]
    assert package in problems[0].detail
    tc = fx.toolchain().model_copy(update={"packages": odd})
    w = World(tmp_path)
    assert package in (gate.toolchain_problem(w.rec(tc=tc)) or "")
    assert toolchain_issues(tc)
    assert package in toolchain_issues(tc)[0][1]


def test_nvjitlink_is_left_out_and_says_why():
    assert "nvidia-nvjitlink" not in release.PACKAGES
    assert "nvidia-nvjitlink" in release.__doc__
    assert "left out" in release.__doc__
    assert coherence(TOOLS, {**PKGS, "nvidia-nvjitlink": "13.5.37"}, {}) == ("13.4", [])


def test_toolchain_problems_are_typed_in_version_2_and_text_in_version_1():
    typed = ToolchainProblem(kind="hazard-var", subject="CUDA_HOME", detail="CUDA_HOME=/x names CUDA 12.6")
    v2 = Toolchain(version=2, source="pip", tools=[], packages={}, major_minor=None, coherent=False, problems=[typed])
    assert Toolchain.model_validate_json(v2.model_dump_json()).problems == [typed]
    old = json.loads(v2.model_dump_json())
    del old["version"]
    old["problems"] = ["CUDA_HOME=/x names CUDA 12.6"]
    assert Toolchain.model_validate(old, context=AS_READ).problems == ["CUDA_HOME=/x names CUDA 12.6"]  # as written
    with pytest.raises(ValidationError):
        Toolchain.model_validate({**old, "version": 2}, context=AS_READ)
    with pytest.raises(ValidationError):
        Toolchain.model_validate({**old, "problems": [typed.model_dump()]}, context=AS_READ)
    with pytest.raises(ValidationError):
        ToolchainProblem(kind="something-else", subject="x", detail="y")


def test_committed_records_still_load_seal_and_select_by_type(repo_root):
    records = store.load_records(repo_root)
    assert records
    assert all(store.seal_status(r) == "intact" for r in records)
    runs = store.of_kind(records, RunRecord)
    assert runs
    assert all(isinstance(r, RunRecord) for r in runs)
    examined = [store.examine(r) for r in records]
    assert [e.record for e in store.of_kind(examined, SessionRecord)] == store.of_kind(records, SessionRecord)


def test_seal_status_is_the_one_check(tmp_path):
    w = World(tmp_path)
    rec = w.rec()
    assert store.seal_status(rec) == "intact"
    assert store.seal_status(rec.model_copy(update={"reason": "edited"})) == "broken"
    assert store.seal_status(rec.model_copy(update={"seal": ""})) == "missing"
    assert store.seal_of(rec) == store.seal_of_json(rec.model_dump(mode="json", exclude_unset=True))


def test_write_atomic_replaces_and_leaves_no_temp(tmp_path):
    path = tmp_path / "sub" / "file.txt"
    store.write_atomic(path, "one")
    store.write_atomic(path, b"two")
    assert path.read_text() == "two"
    assert [p.name for p in path.parent.iterdir()] == ["file.txt"]
    assert path.stat().st_mode & 0o777 == 0o644


def test_the_trust_funnel_is_one_place(tmp_path, monkeypatch):
    """A record that the funnel refuses is ignored by every part of the decision, with the
    funnel's words: the place a signature check plugs in."""
    w = World(tmp_path)
    records = [w.rec()]
    assert gate.decide(FRONT, records, TODAY, TABLE, w.read).rows[0].outcome == "passed"
    monkeypatch.setattr(trust, "refusal", lambda item: "signature does not verify")
    row = gate.decide(FRONT, records, TODAY, TABLE, w.read).rows[0]
    assert row.outcome == "no-record"
    assert "ignored, signature does not verify" in row.reason
    assert claim_verdicts.latest([refuting_record()]) == {}
    assert not trust.admits(store.examine(records[0]))  # plausibility's question for one record: the same funnel


def refuting_record(evidence: Transcript | None = None, why: str = "check: compiles (exit 0)") -> ClaimsRecord:
    result = ClaimResult(id="c1", document="demo", statement="s", check=[ProbeKind(role="check", kind="compile")],
                         verdict="refuted", why=why, toolchain=None, steps=[], evidence=evidence)
    rec = ClaimsRecord(schema_version=CLAIMS_SCHEMA_VERSION, kind="claims",
                       run_id="FIXTURE-20260901T000000Z-claims-00000001",
                       created=datetime(2026, 9, 1, tzinfo=timezone.utc), tileproof_version="0",
                       git=fx.GitState(commit=fx.COMMIT, dirty=False),
                       host=fx.HostFacts(system="f", release="f", machine="x", python="3.11", cpu_count=1),
                       toolchain=fx.toolchain(), gpu=None, claims_files=[], results=[result])
    return rec.model_copy(update={"seal": store.seal_of(rec)})


def test_claim_evidence_is_a_typed_field_not_read_from_the_why():
    t = Transcript(path="evidence/x/claims.demo.c1.right.stderr.txt", sha256="0" * 64, bytes=3)
    (got,) = claim_verdicts.refuted("demo", [refuting_record(t, why="wrong: looks like a role")],
                                    claim_verdicts.NO_CLAIMS, {})
    assert got.why.endswith(f"(evidence: {t.path})")
    assert got.reason.endswith("(claims record " + got.run_id + ")")
    assert claim_verdicts.evidence_of(refuting_record().results[0]) is None
    blocker = gate.Decision("demo", (), (), (got,)).blockers[0]
    assert blocker.kind == "refuted-claim"
    assert blocker.reason
    assert "asserted: false" in blocker.command


def test_a_blocker_never_has_an_empty_reason():
    with pytest.raises(ValueError):
        gate.Blocker("row", "kernels/x.py matmul", "failed", " ", None)
