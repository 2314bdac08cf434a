"""Performance claims against bench records, as a pure function of its inputs.

``decide(claims, bench_records)`` reads no file: it takes a lesson's ``PerfClaim``s (front matter ``performance:``)
and bench records, and gives each claim one ``ClaimDecision``: an outcome from a closed set, a one-line reason and,
unless the claim is supported, the command that would produce the missing evidence. Which record decides (the newest
by ``standing.age`` among those ``trust.split`` counts) and the rule (``value >= at_least``, not noisy, and the
value beyond its noise above the bound by ``judge.noise``, the rule ``diff`` judges bench cases by: its margin at
least its spread): docs/benchmarks.md, "Performance claims". A metric is a ``BenchCase`` field or derived property
(``models.PerfMetric``).

A published lesson's claims (``published``) are weighed the way its result rows are: the claim stands on the
newest record that supports it, and a newer counted record is weighed against the bound by the same noise rule:
one that agrees within its noise (a margin smaller than its spread, or a value below the bound by less than its
spread, or a noisy case) is a note (``ClaimDecision.newer``), never a finding; only one below the bound beyond
its noise makes the claim false (``below-claim``, decided by that record).
docs/reviewing-changes.md, "Published performance claims and newer evidence".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from tileproof.judge import noise, trust
from tileproof.judge.selection import Need, needs
from tileproof.records.models import BenchCase, BenchRecord, PerfClaim

Outcome = Literal["supported", "no-bench-record", "wrong-hardware", "below-claim", "spread-exceeds-margin", "noisy"]
OUTCOMES: tuple[str, ...] = Outcome.__args__  # type: ignore[attr-defined]
NOISY_SPREAD = 0.10
"""Same threshold as ``bench.NOISY_SPREAD`` (a case above it is flagged noisy when measured)."""
UNITS = {"pct_of_reference": "%", "pct_of_ceiling": "%", "tflops": " TFLOP/s", "gbps": " GB/s", "times_floor": "x",
         "pct_of_power_limit": "%", "pct_below_max_clock": "%", "pct_of_peak_at_clock": "%"}
OF = {"pct_of_reference": " of reference", "pct_of_ceiling": " of ceiling", "tflops": "", "gbps": "",
      "times_floor": " its roofline floor", "pct_of_power_limit": " of the power limit",
      "pct_below_max_clock": " below the maximum SM clock", "pct_of_peak_at_clock": " of the dense peak at its clock"}
DIGITS = {"times_floor": 2}
"""Decimals shown for a metric's values (1 unless named)."""
POINTS = {"pct_of_reference": " points", "pct_of_ceiling": " points", "tflops": " TFLOP/s", "gbps": " GB/s",
          "times_floor": "x", "pct_of_power_limit": " points", "pct_below_max_clock": " points",
          "pct_of_peak_at_clock": " points"}


@dataclass(frozen=True)
class ClaimDecision:
    claim: PerfClaim
    outcome: Outcome
    reason: str
    """One line: what was found."""
    command: str | None
    """What would produce the missing evidence; None when supported."""
    record: BenchRecord | None = None
    """The bench record that decided the claim, if any."""
    case: BenchCase | None = None
    """The case whose value decided it."""
    value: float | None = None
    margin: float | None = None
    """value - at_least, in the metric's units."""
    ignored: tuple[str, ...] = field(default_factory=tuple)
    """Run ids of the program's bench records with a broken seal (they never count)."""
    bound: float | None = None
    """The bound the value was judged against: ``at_least``, or the one the claim's history gives (``reference``)."""
    newer: tuple[str, ...] = field(default_factory=tuple)
    """For a published lesson's claim that stands: each newer counted record that agrees with the bound only
    within its noise, in words (a note: a newer record that supports it with margin refreshes it)."""

    @property
    def supported(self) -> bool:
        return self.outcome == "supported"

    def value_text(self) -> str:
        """``93.6% of reference >= 80%``, or ``-`` without a value."""
        if self.value is None:
            return "-"
        m = self.claim.metric
        at_least = self.bound if self.bound is not None else bound(self.claim)
        op = ">=" if self.value >= at_least else "<"
        return f"{self.value:.{DIGITS.get(m, 1)}f}{UNITS[m]}{OF[m]} {op} {at_least:g}{UNITS[m]}"

    def __str__(self) -> str:
        return f"perf claim {self.claim.id}: {self.outcome}: {self.reason}"


# --- helpers (pure) ------------------------------------------------------------------


def bound(claim: PerfClaim) -> float:
    """The claim's bound: its ``at_least`` (a claim with a ``reference`` is decided through a copy that states the
    bound its history gives: ``decide_claim``)."""
    if claim.at_least is None:
        raise ValueError(f"perf claim {claim.id}: no fixed bound (it names a reference from history)")
    return claim.at_least


def matches(pattern: str, key: str) -> bool:
    """``name/variant/shape/*`` matches any one last part; anything else matches exactly."""
    if pattern.endswith("/*"):
        prefix = pattern[:-1]
        return key.startswith(prefix) and len(key) > len(prefix) and "/" not in key[len(prefix):]
    return key == pattern


def record_cc(rec: BenchRecord) -> str | None:
    """The compute capability the record states, when every place it states one agrees."""
    gpu = rec.environment.gpu
    if gpu is None:
        return None
    seen = {gpu.compute_capability, gpu.runtime_compute_capability or gpu.compute_capability}
    if rec.report is not None and rec.report.device is not None:
        seen.add(rec.report.device.compute_capability)
    return seen.pop() if len(seen) == 1 else None


def _value(case: BenchCase, metric: str) -> float | None:
    v = getattr(case, metric)
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def _steady(case: BenchCase) -> bool:
    """Not noisy: flagged quiet and a finite spread within [0, 10%] (anything else fails closed)."""
    return not case.noisy and math.isfinite(case.spread) and 0 <= case.spread <= NOISY_SPREAD


def _cases(rec: BenchRecord, claim: PerfClaim) -> list[tuple[BenchCase, float]]:
    out = []
    for c in rec.cases:
        v = _value(c, claim.metric)
        if matches(claim.case, c.key) and v is not None:
            out.append((c, v))
    return out


def against_bound(claim: PerfClaim, case: BenchCase, value: float) -> noise.Change:
    """The value against the claim's bound by the one noise rule (``judge.noise``): the bound has no band, the
    value its case's spread (an unsteady case's noise is unbounded: never beyond it)."""
    band = value * case.spread if _steady(case) else math.inf
    return noise.judge(noise.Measured(bound(claim)), noise.Measured(value, band))


def case_outcome(claim: PerfClaim, case: BenchCase, value: float) -> Outcome:
    """The rule for one case (see the module docstring)."""
    if value < bound(claim):
        return "below-claim"
    if not _steady(case):
        return "noisy"
    if against_bound(claim, case, value) != "improvement":
        return "spread-exceeds-margin"
    return "supported"


def holds_up_to(cases: Iterable[tuple[BenchCase, float]]) -> float | None:
    """The largest ``at_least`` these cases would support (rounded down to 0.1), None if none would."""
    best = max((v * (1 - c.spread) for c, v in cases if _steady(c)), default=None)
    return math.floor(best * 10) / 10 if best is not None and best > 0 else None


def _command(claim: PerfClaim, outcome: Outcome, holds: float | None = None) -> str | None:
    cc = claim.compute_capability
    bench = f"nox -s bench -- --program {claim.program}"
    if outcome == "supported":
        return None
    if outcome in ("no-bench-record", "wrong-hardware"):
        return f"on a GPU of compute capability {cc}: {bench}"
    weaker = f"lower at_least to {holds:g} (what the record supports)" if holds is not None else "withdraw the claim"
    if outcome == "below-claim":
        return f"make the kernel faster and rerun on a GPU of compute capability {cc}: {bench}; or {weaker}"
    return f"rerun on an idle GPU (nothing else running) of compute capability {cc}: {bench}; or {weaker}"


def _describe(claim: PerfClaim, rec: BenchRecord, case: BenchCase, value: float, outcome: Outcome) -> str:
    unit, points, d = UNITS[claim.metric] + OF[claim.metric], POINTS[claim.metric], DIGITS.get(claim.metric, 1)
    at_least = bound(claim)
    margin = value - at_least
    head = f"bench {rec.run_id}: {case.key} {claim.metric} {value:.{d}f}{unit}"
    if outcome == "below-claim":
        return f"{head}, below the claimed {at_least:g} by {-margin:.{d}f}{points}"
    if outcome == "noisy":
        return f"{head}, but the case is noisy: spread {case.spread:.1%} > {NOISY_SPREAD:.0%}"
    spread = f"spread {case.spread:.1%} of {value:.{d}f} = {case.spread * value:.{d}f}{points}"
    if outcome == "spread-exceeds-margin":
        return f"{head}: margin {margin:.{d}f}{points} over {at_least:g} is smaller than its {spread}"
    return f"{head} >= {at_least:g}: margin {margin:.{d}f}{points}, {spread}"


# --- the decision --------------------------------------------------------------------


def decide_claim(claim: PerfClaim, bench_records: Iterable, published: bool = False) -> ClaimDecision:
    """One claim's decision; ``bench_records``: ``store.Examined`` records (plain ones are examined here);
    ``published``: the claim of a published lesson, weighed against newer records (the module docstring)."""
    counted, refused = trust.split(r for r in trust.examined(bench_records)
                                   if isinstance(r.record, BenchRecord) and r.record.program == claim.program)

    def done(outcome: Outcome, reason: str, rec=None, case=None, value=None, holds=None) -> ClaimDecision:
        reason += trust.ignored_note(refused)
        margin = value - bound(claim) if value is not None and claim.at_least is not None else None
        return ClaimDecision(claim, outcome, reason, _command(claim, outcome, holds), rec, case, value, margin,
                             trust.ignored_ids(refused), claim.at_least)

    usable = [r for r in counted if r.verdict == "passed" and _cases(r, claim)]
    fitting = [r for r in usable if record_cc(r) == claim.compute_capability]
    if not fitting:
        if usable:
            rec = usable[-1]  # trust.split orders oldest first: the last is the newest
            gpu = rec.environment.gpu
            where = f"{gpu.name}, cc {record_cc(rec) or 'disagreeing'}" if gpu else "no GPU"
            return done("wrong-hardware", f"bench records of {claim.program} with {claim.case} come only from other "
                                          f"hardware (newest: run {rec.run_id}, {where}); the claim is about cc "
                                          f"{claim.compute_capability}")
        if not counted:
            why = f"no bench record of {claim.program}"
        elif not any(r.verdict == "passed" for r in counted):
            why = f"no bench record of {claim.program} with verdict passed"
        else:
            why = f"no passed bench record of {claim.program} has a case {claim.case} with {claim.metric}"
        return done("no-bench-record", why)
    if claim.reference is not None:
        return _from_history(claim, fitting, done)
    judged_all = [_judged(claim, r) for r in fitting]
    supporting = [i for i, (outcome, _c, _v) in enumerate(judged_all) if outcome == "supported"]
    if published and supporting:
        at = supporting[-1]
        notes = []
        for newer, (_outcome, case, value) in zip(fitting[at + 1:], judged_all[at + 1:], strict=True):
            if against_bound(claim, case, value) == "regression":  # below the bound beyond its noise: false
                return done("below-claim", _describe(claim, newer, case, value, "below-claim")
                            + f" beyond its noise (spread {case.spread:.1%}), newer than the supporting bench "
                              f"{fitting[at].run_id}", newer, case, value, holds_up_to(_cases(newer, claim)))
            notes.append(_within(claim, newer, case, value))
        rec, (outcome, case, value) = fitting[at], judged_all[at]
        decided = done(outcome, _describe(claim, rec, case, value, outcome), rec, case, value)
        return replace(decided, newer=tuple(notes))
    rec = fitting[-1]
    outcome, case, value = judged_all[-1]
    return done(outcome, _describe(claim, rec, case, value, outcome), rec, case, value,
                holds_up_to(_cases(rec, claim)))


REFERENCE_MIN = 3
"""Earlier counted records a bound from history needs at the least (a percentile of fewer says little)."""


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile of ``values`` (linear between the two nearest ranks, as numpy's default)."""
    xs = sorted(values)
    at = (len(xs) - 1) * p / 100
    lo = math.floor(at)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (at - lo)


def _from_history(claim: PerfClaim, fitting: list[BenchRecord], done) -> ClaimDecision:
    """A claim whose bound is its history's (``PerfClaim.reference``): the newest fitting record against the
    percentile of the claim's value over the ``last`` earlier fitting records of the same GPU (name and compute
    capability): below it beyond its noise (``against_bound``) it has drifted (``below-claim``); a noisy case says
    nothing (``noisy``); anything else holds."""
    ref = claim.reference
    assert ref is not None
    rec = fitting[-1]
    name = rec.environment.gpu.name if rec.environment.gpu else None
    earlier = [r for r in fitting[:-1] if r.environment.gpu is not None and r.environment.gpu.name == name][-ref.last:]
    where = f"{name}, cc {claim.compute_capability}"
    if len(earlier) < REFERENCE_MIN:
        return done("no-bench-record", f"its bound is the {ref.percentile:g}th percentile of the last {ref.last} "
                                       f"counted bench records on {where} before the newest, and {len(earlier)} "
                                       f"exist (at least {REFERENCE_MIN} needed)")
    values = [max(v for _c, v in _cases(r, claim)) for r in earlier]
    at_least = math.floor(percentile(values, ref.percentile) * 100 + 1e-9) / 100  # rounded down to 0.01
    fixed = claim.model_copy(update={"at_least": at_least})
    case, value = max(_cases(rec, claim), key=lambda cv: cv[1])
    head = (f"bench {rec.run_id}: {case.key} {claim.metric} {value:.{DIGITS.get(claim.metric, 1)}f}"
            f"{UNITS[claim.metric]}{OF[claim.metric]}; its reference, the {ref.percentile:g}th percentile over the "
            f"{len(earlier)} earlier records on {where}, is {at_least:g}")
    if not _steady(case):
        outcome: Outcome = "noisy"
        reason = f"{head}, but the case is noisy: spread {case.spread:.1%} > {NOISY_SPREAD:.0%}"
    elif against_bound(fixed, case, value) == "regression":
        outcome, reason = "below-claim", f"{head}: drifted below it beyond its noise (spread {case.spread:.1%})"
    else:
        outcome, reason = "supported", f"{head}: not below it beyond its noise (spread {case.spread:.1%})"
    return replace(done(outcome, reason, rec, case, value), bound=at_least)


def _judged(claim: PerfClaim, rec: BenchRecord) -> tuple[Outcome, BenchCase, float]:
    """The record's deciding case for the claim: its best supported case, else its best value."""
    judged = [(case_outcome(claim, c, v), c, v) for c, v in _cases(rec, claim)]
    good = [j for j in judged if j[0] == "supported"]
    return max(good or judged, key=lambda j: j[2])


def _within(claim: PerfClaim, rec: BenchRecord, case: BenchCase, value: float) -> str:
    """A newer record that agrees with the bound only within its noise, in words."""
    m, d = claim.metric, DIGITS.get(claim.metric, 1)
    return (f"bench {rec.run_id} measured {case.key} at {value:.{d}f}{UNITS[m]}{OF[m]}, within its noise (spread "
            f"{case.spread:.1%} = {case.spread * value:.{d}f}{POINTS[m]}) of the claimed {bound(claim):g}")


@needs(Need.OTHER_KINDS)
def decide(claims: Iterable[PerfClaim], bench_records: Iterable, published: bool = False) -> list[ClaimDecision]:
    """One ``ClaimDecision`` per claim, in order; records of other kinds are ignored; ``published``: the claims of
    a published lesson (``decide_claim``)."""
    claims = list(claims)
    if not claims:
        return []
    records = [r for r in trust.examined(bench_records) if isinstance(r.record, BenchRecord)]
    return [decide_claim(c, records, published) for c in claims]
