"""The one rule that tells a change from noise: two measurements, each with its noise band.

Pure. ``diff`` judges a bench case's median between two records with it, ``perf_claims`` judges a measured value
against a claim's bound with it (a bound is a measurement with no band), ``history`` finds steps with it, and
``reproduce`` compares a fresh record with the one it reproduces through ``diff``. The rule
(docs/reviewing-changes.md, "When a change is noise"):

- a measurement's **band** is its value times its relative noise: for a bench case the largest of its spread (the
  standard deviation over the mean of its timed repeats), its repeat spread (its median measured twice in one run,
  when the record has it) and the record's A/A control (the library reference against a second copy of itself:
  how far from 100% the method alone puts a ratio, when the record has one); and, when two records (two runs:
  another boot, another card of the class, another day) are compared, at least :data:`ACROSS_RUNS`, which no
  measurement inside one run can see (:func:`case_noise`). A bound (a claim's ``at_least``) has no band;
- two measurements differ **beyond noise** when the change between them is at least the sum of their bands
  (and not zero): the two intervals ``value ± band`` do not overlap, or just touch; otherwise the change is
  **within noise**;
- beyond noise, the change is an **improvement** or a **regression** by its sign and the direction the quantity
  is better in (a rate higher, a time lower).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tileproof.records.models import BenchCase, PairedRatio

Change = Literal["improvement", "regression", "within-noise"]
"""What the rule says of a change from one measurement to another."""
CHANGES: tuple[Change, ...] = ("improvement", "regression", "within-noise")
ACROSS_RUNS = 0.02
"""The least relative noise of a bench case's median when it is compared with another run's: the committed H200
records of one program, run on the same class of card hours or days apart, move a case's median by 1-2% where its
own spread says a few tenths of a percent (``online_softmax/cupy/4096x100000``: 6.5627, 6.5862, 6.5612, 6.5624,
6.5724 ms in five records, spread 0.03-0.13%)."""


@dataclass(frozen=True)
class Measured:
    """A value and its noise band (absolute, in the value's units, half the width of ``value ± band``)."""

    value: float
    band: float = 0.0

    @classmethod
    def relative(cls, value: float, noise: float) -> Measured:
        """``value`` with a relative noise (``0.026`` for 2.6%): band ``|value| * noise``."""
        return cls(value, abs(value) * noise)

    def text(self, digits: int = 4) -> str:
        return f"{self.value:.{digits}f} ± {self.band:.{digits}f}"


def judge(before: Measured, after: Measured, higher_is_better: bool = True) -> Change:
    """The rule of the module docstring. A value or band that is not finite, or a negative band, is never beyond
    noise (fails closed: nothing is claimed from it)."""
    values = (before.value, before.band, after.value, after.band)
    if not all(math.isfinite(v) for v in values) or before.band < 0 or after.band < 0:
        return "within-noise"
    delta = after.value - before.value
    if delta == 0 or abs(delta) < before.band + after.band:
        return "within-noise"
    return "improvement" if (delta > 0) == higher_is_better else "regression"


def control_noise(head_to_head: Mapping[str, PairedRatio]) -> float:
    """The record's A/A control as relative noise: the largest ``|ratio - 100%|`` of its control pairs; 0 when it
    has none."""
    offsets = [abs(p.pct_of_reference - 100.0) / 100.0 for p in head_to_head.values()
               if p.control and math.isfinite(p.pct_of_reference)]
    return max(offsets, default=0.0)


def case_noise(case: BenchCase, repeat_spread: Mapping[str, float], control: float = 0.0,
               across_runs: bool = False) -> float:
    """A bench case's relative noise: the largest of its spread, its repeat spread, the record's control
    (:func:`control_noise`) and, ``across_runs`` (compared with another record), :data:`ACROSS_RUNS`. Infinite when
    one of them is not a finite non-negative number (fails closed: nothing is then beyond noise)."""
    parts = [case.spread, repeat_spread.get(case.key, 0.0), control, ACROSS_RUNS if across_runs else 0.0]
    if not all(math.isfinite(p) and p >= 0 for p in parts):
        return math.inf
    return max(parts)
