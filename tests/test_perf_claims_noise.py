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
             case=CUBLAS, metric="pct_of_power_limit", at_least=88.0, compute_capability="9.0",
             program="kernels/bench/matmul_bench.py")


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
    assert "already published, its records hold" in line and "newer evidence within noise" in line, line
    code, out = cli(capsys, "publish", "perf-note", "--root", str(tree), "--dry-run")
    assert code == 0, out
    # a newer counted record below the bound beyond its noise: the published claim is false
    store.write_record(tree, power(3, 84.0, 0.01))
    verdict = Tree.load(tree).verdict(lessons.load(tree, "perf-note"))
    ((rule, reason),) = verdict.findings()
    assert rule == WITHOUT_EVIDENCE and "below-claim" in reason and "beyond its noise" in reason


# --- a bound from the claim's recorded history (``reference``) instead of a fixed at_least ------------------

REFERENCE = dict(POWER, at_least=None, reference={"percentile": 10, "last": 5})


def history_of(*pcts, spread=0.005, gpu=None):
    made = [power(n, pct, spread) for n, pct in enumerate(pcts, start=10)]
    return [_on(r, gpu) for r in made] if gpu else made


def _on(rec, gpu):
    facts = rec.environment.gpu.model_copy(update={"name": gpu})
    return rec.model_copy(update={"environment": rec.environment.model_copy(update={"gpu": facts})})


def test_a_claim_states_exactly_one_bound():
    from pydantic import ValidationError
    with pytest.raises(ValidationError, match="exactly one of at_least"):
        PerfClaim(**dict(POWER, reference={"percentile": 10, "last": 5}))
    with pytest.raises(ValidationError, match="exactly one of at_least"):
        PerfClaim(**dict(POWER, at_least=None))
    with pytest.raises(ValidationError):
        PerfClaim(**dict(REFERENCE, reference={"percentile": 10, "last": 2}))
    assert "reference" not in PerfClaim(**POWER).model_dump(), "a fixed claim is written as before"


@pytest.mark.parametrize("newest, spread, outcome", [
    (91.0, 0.005, "supported"),    # the 10th percentile of 91.3, 91.0, 90.8, 91.5, 91.1 is 90.88: above it
    (90.5, 0.005, "supported"),    # below it by 0.38, its band 0.45: within noise
    (89.0, 0.005, "below-claim"),  # below it by 1.88, its band 0.45: drifted
    (80.0, 0.15, "noisy"),
], ids=["above", "within-noise", "drifted", "noisy"])
def test_a_reference_from_history(newest, spread, outcome):
    records = history_of(91.3, 91.0, 90.8, 91.5, 91.1) + [power(20, newest, spread)]
    (d,) = perf_claims.decide([PerfClaim(**REFERENCE)], records)
    assert d.outcome == outcome, d.reason
    assert d.bound == 90.88 and "the 10th percentile over the 5 earlier records on NVIDIA H200, cc 9.0, is 90.88" \
        in d.reason
    assert d.value_text().endswith(("% of the power limit >= 90.88%", "% of the power limit < 90.88%"))
    if outcome == "below-claim":
        assert "drifted below it beyond its noise" in d.reason


def test_a_reference_is_taken_per_gpu_class_and_needs_three_earlier_records():
    other = history_of(60.0, 60.0, 60.0, gpu="NVIDIA GH200 480GB")
    (d,) = perf_claims.decide([PerfClaim(**REFERENCE)], [*other, *history_of(91.0, 91.2), power(20, 91.1, 0.005)])
    assert d.outcome == "no-bench-record" and "2 exist (at least 3 needed)" in d.reason
    # the last 5 of this GPU only: the older, lower records of another card of the same cc never lower the bound
    records = [*history_of(91.3, 91.0, 90.8, 91.5, 91.1), *other, power(30, 89.0, 0.005)]
    (d,) = perf_claims.decide([PerfClaim(**REFERENCE)], records)
    assert (d.outcome, d.bound) == ("below-claim", 90.88)


def test_a_reference_claim_in_a_lesson_renders_canonically(tree):
    path = tree / "lessons" / "perf-note.md"
    path.write_text(NOTE.replace("{claims}", perf_yaml({k: v for k, v in REFERENCE.items() if v is not None})))
    note = lessons.load(tree, "perf-note")
    from tileproof import lesson_text
    assert lesson_text.render(note, note.front) == path.read_text()
    assert note.front.performance[0].reference.percentile == 10
