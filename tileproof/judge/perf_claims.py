"""Performance claims against bench records, as a pure function of its inputs.

``decide(claims, bench_records)`` reads no file: it takes a lesson's ``PerfClaim``s (front matter ``performance:``)
and bench records, and gives each claim one ``ClaimDecision``: an outcome from a closed set, a one-line reason and,
unless the claim is supported, the command that would produce the missing evidence. Which record decides (the newest
by ``standing.age`` among those ``trust.split`` counts) and the rule (``value >= at_least``, not noisy, one spread below
the measurement): docs/benchmarks.md, "Performance claims". A metric is a ``BenchCase`` field or derived
property (``models.PerfMetric``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from tileproof.judge import trust
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

    @property
    def supported(self) -> bool:
        return self.outcome == "supported"

    def value_text(self) -> str:
        """``93.6% of reference >= 80%``, or ``-`` without a value."""
        if self.value is None:
            return "-"
        m = self.claim.metric
        op = ">=" if self.value >= self.claim.at_least else "<"
        return f"{self.value:.{DIGITS.get(m, 1)}f}{UNITS[m]}{OF[m]} {op} {self.claim.at_least:g}{UNITS[m]}"

    def __str__(self) -> str:
        return f"perf claim {self.claim.id}: {self.outcome}: {self.reason}"


# --- helpers (pure) ------------------------------------------------------------------


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


def case_outcome(claim: PerfClaim, case: BenchCase, value: float) -> Outcome:
    """The rule for one case (see the module docstring)."""
    if value < claim.at_least:
        return "below-claim"
    if not _steady(case):
        return "noisy"
    if case.spread * value > value - claim.at_least:
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
    margin = value - claim.at_least
    head = f"bench {rec.run_id}: {case.key} {claim.metric} {value:.{d}f}{unit}"
    if outcome == "below-claim":
        return f"{head}, below the claimed {claim.at_least:g} by {-margin:.{d}f}{points}"
    if outcome == "noisy":
        return f"{head}, but the case is noisy: spread {case.spread:.1%} > {NOISY_SPREAD:.0%}"
    spread = f"spread {case.spread:.1%} of {value:.{d}f} = {case.spread * value:.{d}f}{points}"
    if outcome == "spread-exceeds-margin":
        return f"{head}: margin {margin:.{d}f}{points} over {claim.at_least:g} is smaller than its {spread}"
    return f"{head} >= {claim.at_least:g}: margin {margin:.{d}f}{points}, {spread}"


# --- the decision --------------------------------------------------------------------


def decide_claim(claim: PerfClaim, bench_records: Iterable) -> ClaimDecision:
    """One claim's decision; ``bench_records``: ``store.Examined`` records (plain ones are examined here)."""
    counted, refused = trust.split(r for r in trust.examined(bench_records)
                                   if isinstance(r.record, BenchRecord) and r.record.program == claim.program)

    def done(outcome: Outcome, reason: str, rec=None, case=None, value=None, holds=None) -> ClaimDecision:
        reason += trust.ignored_note(refused)
        margin = value - claim.at_least if value is not None else None
        return ClaimDecision(claim, outcome, reason, _command(claim, outcome, holds), rec, case, value, margin,
                             trust.ignored_ids(refused))

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
    rec = fitting[-1]
    cases = _cases(rec, claim)
    judged = [(case_outcome(claim, c, v), c, v) for c, v in cases]
    good = [j for j in judged if j[0] == "supported"]
    outcome, case, value = max(good or judged, key=lambda j: j[2])
    return done(outcome, _describe(claim, rec, case, value, outcome), rec, case, value, holds_up_to(cases))


@needs(Need.OTHER_KINDS)
def decide(claims: Iterable[PerfClaim], bench_records: Iterable) -> list[ClaimDecision]:
    """One ``ClaimDecision`` per claim, in order; records of other kinds are ignored."""
    claims = list(claims)
    if not claims:
        return []
    records = [r for r in trust.examined(bench_records) if isinstance(r.record, BenchRecord)]
    return [decide_claim(c, records) for c in claims]
