"""The publish rule asks the claim verdicts of the release the lesson's evidence was made with.

A table of cases over FIXTURE records built in code: one passing run record on an H200
(made with a toolchain of one release) and claims records of one or more releases.
"""

from __future__ import annotations

import fixture_records as fx
import pytest

from tileproof.claims import matrix
from tileproof.judge import claim_verdicts, gate
from tileproof.judge.claim_verdicts import ClaimsToday, Release
from tileproof.records.models import Hardware, LessonFront, LessonProgram, ResultRow

PY, HELPER = "kernels/prog.py", "kernels/harness.py"
FRONT = LessonFront(lesson_version=1, id="demo", title="Demo", status="draft",
                    programs=[LessonProgram(path=PY, checks=["matmul"])], hardware=Hardware(),
                    results=[ResultRow(program=PY, check="matmul", bound="rtol 1e-4, atol 1e-3")])
DIGESTS = {PY: fx.sha("py v1"), HELPER: fx.sha("harness v1")}
CLAIMS = ClaimsToday("lessons/claims/demo.claims.yaml", {"c1": True}, {})
TABLE = {"matmul": gate.Bound(1e-4, 1e-3)}


def _tc(release: str):
    v = f"{release}.90"
    return fx.toolchain(nvcc=v, tileiras=v, nvvm=v)


def _decide(tmp_path, run_release: str, claims: list[tuple[str, str]]) -> gate.Decision:
    """The decision for a passing run made with ``run_release`` and claims records (release, verdict of c1)."""
    query = tmp_path / "evidence" / "s" / "nvidia-smi-query.csv"
    query.parent.mkdir(parents=True, exist_ok=True)
    query.write_text(fx.query_csv(fx.H200))
    run = fx.run_record(n=1, program=PY, front=FRONT, sources={PY: DIGESTS[PY], HELPER: DIGESTS[HELPER]},
                        checks=[fx.check("matmul", 1e-4, 1e-3)], tc=_tc(run_release),
                        query=fx.transcript("evidence/s/nvidia-smi-query.csv", query.read_text()))
    records = [run] + [fx.claims_record(n=2 + i, document="demo", claim="c1", tc=_tc(rel), verdict=verdict,
                                        why=f"{verdict} on {rel}")
                       for i, (rel, verdict) in enumerate(claims)]

    def read(rel: str) -> bytes | None:
        path = tmp_path / rel
        return path.read_bytes() if path.is_file() else None
    return gate.decide(FRONT, records, gate.Today(DIGESTS, CLAIMS), TABLE, read)


@pytest.mark.parametrize("run_release, claims, blocked", [
    # refuted on 13.5 only, evidence made with 13.4: the 13.4 verdict decides, not the newest record
    ("13.4", [("13.4", "confirmed"), ("13.5", "refuted")], []),
    # refuted on the evidence's release: blocked, whatever a newer release says
    ("13.4", [("13.4", "refuted"), ("13.5", "confirmed")], [("refuted-claim", "claim c1")]),
    ("13.5", [("13.4", "refuted"), ("13.5", "confirmed")], []),
    # no claims record of the evidence's release: blocked, with the matrix session as the fix
    ("13.4", [("13.5", "confirmed")], [("claims-unchecked", "claims on 13.4")]),
    ("13.4", [], [("claims-unchecked", "claims on 13.4")]),
])
def test_the_claim_verdict_of_the_evidence_release_decides(tmp_path, run_release, claims, blocked):
    decision = _decide(tmp_path, run_release, claims)
    assert [r.outcome for r in decision.rows] == ["passed"]
    assert [(b.kind, b.subject) for b in decision.blockers] == blocked
    assert decision.publishable == (not blocked)


def test_a_refutation_on_the_evidence_release_says_which_release(tmp_path):
    (blocker,) = _decide(tmp_path, "13.4", [("13.4", "refuted"), ("13.5", "confirmed")]).blockers
    assert "refuted on 13.4, the release of the lesson's evidence" in blocker.reason
    assert "asserted: false" in blocker.command


def test_no_claims_record_for_the_release_names_the_matrix_session(tmp_path):
    decision = _decide(tmp_path, "13.4", [("13.5", "refuted")])
    (blocker,) = decision.blockers
    assert blocker.command == "nox -s \"claims-matrix(release='13.4')\""
    assert "no claims record of release 13.4 checked demo's claims" in blocker.reason
    assert "FIXTURE-20260901T120100Z-run-00000001" in blocker.reason
    assert decision.lacking() == "its claims are unchecked on 13.4"


def test_without_accepted_evidence_every_release_newest_decision_counts(tmp_path):
    """No passing row yet: no release to ask, so the newest decision over all releases is shown
    (the rows block anyway), and no release is reported unchecked."""
    records = [fx.claims_record(n=2, document="demo", claim="c1", tc=_tc("13.4"), verdict="confirmed"),
               fx.claims_record(n=3, document="demo", claim="c1", tc=_tc("13.5"), verdict="refuted")]
    decision = gate.decide(FRONT, records, gate.Today(DIGESTS, CLAIMS), TABLE, lambda _p: None)
    assert [b.kind for b in decision.blockers] == ["row", "refuted-claim"]
    assert decision.unchecked == ()


def test_a_lesson_without_claims_needs_no_claims_record(tmp_path):
    decision = _decide(tmp_path, "13.4", [])
    no_claims = gate.decide(FRONT, [], gate.Today(DIGESTS), TABLE, lambda _p: None)
    assert decision.unchecked
    assert not no_claims.unchecked
    assert claim_verdicts.unchecked_releases("demo", [], claim_verdicts.NO_CLAIMS, {Release(13, 4): ["r"]}) == []


def test_the_matrix_and_the_decision_share_one_fold():
    """``claims.matrix`` builds its cells with the judge's fold and grouping: one implementation."""
    assert matrix.Release is claim_verdicts.Release
    assert matrix.release_of is claim_verdicts.release_of
    records = [fx.claims_record(n=2, document="demo", claim="c1", tc=_tc("13.4"), verdict="refuted"),
               fx.claims_record(n=3, document="demo", claim="c1", tc=_tc("13.4"), verdict="unverifiable-here")]
    cell = matrix.claim_matrix(records).cell("demo", "c1", Release(13, 4))
    on_13_4 = claim_verdicts.by_release(claim_verdicts.counted(records))[0][Release(13, 4)]
    decided = claim_verdicts.fold(on_13_4, "demo")[("demo", "c1")]
    assert (cell.verdict, cell.run_id) == (decided.result.verdict, decided.run_id) == ("refuted", records[0].run_id)
