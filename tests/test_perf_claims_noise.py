"""A published performance claim weighed against newer bench records by the noise rule ``diff`` uses
(``judge.noise``): a newer record that agrees within its noise is a note, only one below the bound beyond its noise
makes the claim false. The case measured on a fresh H200: ``cublas-power-8192`` (>= 88% of the power limit)
measured 90.2% with a 2.6-point spread, which the newest-record rule turned into PUBLISHED WITHOUT EVIDENCE.
Every bench record here is a FIXTURE built in code."""

import pytest
from test_perf_claims import LOAD, NOTE, bench_record, case, perf_yaml

from tileproof.__main__ import main
from tileproof.commands import status
from tileproof.gather.tree import Tree
from tileproof.judge import perf_claims
from tileproof.judge.verdict import WITHOUT_EVIDENCE
from tileproof.records import lessons, store
from tileproof.records.models import PerfClaim

CUBLAS = "matmul/cublas/8192x8192x8192"
POWER = dict(id="cublas-power-8192", statement="at 8192^3 cuBLAS draws 88% or more of the card's power limit",
             case=CUBLAS, metric="pct_of_power_limit", at_least=88.0, compute_capability="9.0")


def power(n: int, pct: float, spread: float):
    """Bench record n (larger is newer) whose cuBLAS 8192^3 case drew ``pct``% of the power limit (its lower
    quartile) with timing spread ``spread``."""
    load = LOAD.model_copy(update={"power_q1_w": pct * 7.0, "power_limit_w": 700.0})
    c = case(CUBLAS, spread=spread).model_copy(update={"roofline": None, "load": load, "tflops": None})
    return bench_record(n, [c], bench_version=3, load_unavailable="FIXTURE")


SUPPORTS = power(1, 91.3, 0.005)
"""Published on: 91.3% with 0.46 points of spread, a 3.3-point margin."""
AGREES = power(2, 90.2, 0.0288)
"""The fresh H200's: 90.2%, spread 2.6 points, margin 2.2: within its noise of the bound."""
CLAIM = PerfClaim(**POWER)


def test_the_newest_record_rule_alone_fails_the_measured_case():
    """What a first publish asks (the newest record supports the claim with margin) the fresh H200 record fails."""
    (d,) = perf_claims.decide([CLAIM], [SUPPORTS, AGREES])
    assert d.outcome == "spread-exceeds-margin" and d.record.run_id == AGREES.run_id


def test_a_published_claim_stays_when_a_newer_record_agrees_within_noise():
    (d,) = perf_claims.decide([CLAIM], [SUPPORTS, AGREES], published=True)
    assert d.outcome == "supported" and d.record.run_id == SUPPORTS.run_id
    (note,) = d.newer
    assert note.startswith(f"bench {AGREES.run_id} measured {CUBLAS} at 90.2% of the power limit, within its noise "
                           "(spread 2.9% = 2.6 points) of the claimed 88")


@pytest.mark.parametrize("pct, spread, outcome, notes", [
    (87.0, 0.02, "supported", 1),     # below the bound by 1.0, its band 1.74: within noise
    (60.0, 0.15, "supported", 1),     # a noisy case says nothing beyond noise
    (84.0, 0.01, "below-claim", 0),   # below by 4.0, its band 0.84: beyond noise
    (87.0, 0.005, "below-claim", 0),  # below by 1.0, its band 0.44: beyond noise
    (95.0, 0.005, "supported", 0),    # supports it with margin: it is the record the claim now stands on
], ids=["within", "noisy", "far-below", "just-below", "supports"])
def test_a_newer_record_against_the_bound(pct, spread, outcome, notes):
    newer = power(3, pct, spread)
    (d,) = perf_claims.decide([CLAIM], [SUPPORTS, AGREES, newer], published=True)
    assert d.outcome == outcome, d.reason
    assert len(d.newer) == notes + (1 if outcome == "supported" and notes else 0)
    if outcome == "below-claim":
        assert d.record.run_id == newer.run_id and "beyond its noise" in d.reason
        assert SUPPORTS.run_id in d.reason
    if pct == 95.0:
        assert d.record.run_id == newer.run_id and d.newer == ()


def test_an_older_record_below_the_bound_changes_nothing():
    (d,) = perf_claims.decide([CLAIM], [power(0, 70.0, 0.001), SUPPORTS], published=True)
    assert d.outcome == "supported" and d.newer == ()


def cli(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_the_published_note_through_status_publish_and_the_audit_verdict(tree, capsys):
    path = tree / "lessons" / "perf-note.md"
    path.write_text(NOTE.replace("{claims}", perf_yaml(POWER)))
    store.write_record(tree, SUPPORTS)
    code, out = cli(capsys, "publish", "perf-note", "--root", str(tree))
    assert code == 0, out
    # the fresh H200's record: within noise, a note, the lesson holds
    store.write_record(tree, AGREES)
    note = lessons.load(tree, "perf-note")
    verdict = Tree.load(tree).verdict(note)
    assert verdict.findings() == [] and verdict.valid
    assert verdict.note().startswith("newer evidence within noise: perf claim cublas-power-8192: bench "
                                     f"{AGREES.run_id} measured")
    (line,) = [x for x in status.status(tree, ["perf-note"]) if x.startswith("perf-note: ")]
    assert "ready: published, its records hold; newer evidence within noise" in line
    code, out = cli(capsys, "publish", "perf-note", "--root", str(tree), "--dry-run")
    assert code == 0, out
    # a newer counted record below the bound beyond its noise: the published claim is false
    store.write_record(tree, power(3, 84.0, 0.01))
    verdict = Tree.load(tree).verdict(lessons.load(tree, "perf-note"))
    ((rule, reason),) = verdict.findings()
    assert rule == WITHOUT_EVIDENCE and "below-claim" in reason and "beyond its noise" in reason
