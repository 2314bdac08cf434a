"""A check's error or a bench case's rate across records, in commit order, and the steps in it. Pure.

A **series** follows one thing across the counted records of one program (``trust.split``: a broken seal or a
refused signature never counts), oldest first by ``standing.age`` (the commit that first added each record, then
its time), on one GPU class when asked (``NVIDIA H200``, or ``NVIDIA H200, cc 9.0``):

- a bench case key: its rate (``pct_of_ceiling`` when every point has it, the fraction of the measured ceiling,
  e.g. of the device copy; else TFLOP/s or GB/s), each point with its band (``judge.noise.case_noise`` across
  runs, the same band ``diff`` uses);
- ``name/variant/shape/*``: the fastest tile kernel of that computation, variant and shape in each record (what
  ``diff`` compares too), naming which configuration it was;
- a run program's check: its largest absolute error in each run record, with the relative band
  :data:`ERROR_NOISE`.

**Steps** (:func:`steps`) are found by binary segmentation with the noise rule as its threshold: split the series
where the two sides' means differ most (each side at least one point); keep the split when the two means differ
beyond noise by ``judge.noise.judge``, each side's band being the larger of its points' mean band and the pooled
standard deviation of the points about their own side's mean (how far points scatter within a level, which a lone
point cannot say alone); then split each side again the same way. A series of one level has no step, and a lone
point far off inside a scattered level is absorbed by that level's scatter.
docs/reviewing-changes.md, "History and steps".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tileproof.judge import noise, trust
from tileproof.judge.diff import fastest, gpu_class
from tileproof.records.models import BenchCase, BenchRecord, RunRecord
from tileproof.records.store import Examined

ERROR_NOISE = 0.5
"""A check's error has no spread of its own: two errors are taken to differ beyond noise when they differ by
more than half of each (a factor of three between them, the bands touching), an order-of-magnitude statement as a
tolerance is."""


@dataclass(frozen=True)
class Point:
    run_id: str
    when: str
    """``2026-12-01 22:18`` (the record's ``created``, UTC)."""
    value: float
    band: float
    case: str
    """The case key the value is from (for a ``/*`` series, which configuration was fastest)."""


@dataclass(frozen=True)
class Step:
    """A change of level between ``points[index - 1]`` and ``points[index]``."""

    index: int
    before: noise.Measured
    after: noise.Measured
    judged: noise.Change

    @property
    def change(self) -> float:
        return (self.after.value - self.before.value) / self.before.value if self.before.value else math.inf


@dataclass(frozen=True)
class Series:
    program: str
    key: str
    metric: str
    unit: str
    higher_is_better: bool
    points: tuple[Point, ...]
    steps: tuple[Step, ...]

    def level(self, i: int) -> int:
        """Which level (0 for the first) point ``i`` is on."""
        return sum(1 for s in self.steps if s.index <= i)


def _squares(points: list[Point]) -> float:
    mean = statistics.fmean(p.value for p in points)
    return sum((p.value - mean) ** 2 for p in points)


def _level(points: list[Point], pooled: float) -> noise.Measured:
    return noise.Measured(statistics.fmean(p.value for p in points), max(statistics.fmean(p.band for p in points),
                                                                         pooled))


def steps(points: list[Point], higher_is_better: bool = True, offset: int = 0) -> list[Step]:
    """The steps of ``points`` by binary segmentation (the module docstring), in order."""
    if len(points) < 2:
        return []
    best = max(range(1, len(points)),
               key=lambda i: abs(statistics.fmean(p.value for p in points[i:])
                                 - statistics.fmean(p.value for p in points[:i])))
    freedom = len(points) - 2
    pooled = math.sqrt((_squares(points[:best]) + _squares(points[best:])) / freedom) if freedom > 0 else 0.0
    left, right = _level(points[:best], pooled), _level(points[best:], pooled)
    judged = noise.judge(left, right, higher_is_better)
    if judged == "within-noise":
        return []
    return [*steps(points[:best], higher_is_better, offset), Step(offset + best, left, right, judged),
            *steps(points[best:], higher_is_better, offset + best)]


def _counted(records: Iterable, kind: type, program: str) -> list:
    """``program``'s records of ``kind`` that count, oldest first: ``store.Examined`` ones through ``trust.split``
    (in commit order, ``standing.age``); plain records are taken as the caller judged them (the audit's, its bad
    ones left out), ordered by their time."""
    items: list[Any] = list(records)
    examined = [r for r in items if isinstance(r, Examined)]
    plain: list[Any] = sorted((r for r in items if not isinstance(r, Examined)), key=lambda r: (r.created, r.run_id))
    counted: list[Any] = trust.split(examined)[0] + plain
    return [r for r in counted if isinstance(r, kind) and getattr(r, "program", None) == program]


def _when(rec: BenchRecord | RunRecord) -> str:
    return rec.created.strftime("%Y-%m-%d %H:%M")


def _rate(case: BenchCase, metric: str) -> float | None:
    v = getattr(case, metric)
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


METRICS = (("pct_of_ceiling", "% of ceiling"), ("tflops", "TFLOP/s"), ("gbps", "GB/s"))


def bench_series(records: Iterable, program: str, gpu: str | None = None, case: str | None = None) -> list[Series]:
    """Every case key (or only ``case``, which may be ``name/variant/shape/*``) of ``program``'s counted bench
    records with verdict passed, on GPU class ``gpu`` (``NVIDIA H200`` or ``NVIDIA H200, cc 9.0``; None: every
    class, each its own series), the fastest-of-shape series first."""
    benches = [r for r in _counted(records, BenchRecord, program) if r.verdict == "passed"]
    by_class: dict[str, list[BenchRecord]] = {}
    for rec in benches:
        cls = gpu_class(rec)
        if cls is not None and (gpu is None or cls == gpu or cls.split(",")[0] == gpu):
            by_class.setdefault(cls, []).append(rec)
    out = []
    for cls, recs in sorted(by_class.items()):
        found: dict[str, list[tuple[BenchRecord, BenchCase]]] = {}
        for rec in recs:
            for slot, best in fastest(rec).items():
                found.setdefault(slot, []).append((rec, best))
            for c in rec.cases:
                if c.key and math.isfinite(c.median_ms):
                    found.setdefault(c.key, []).append((rec, c))
        for key, pairs in found.items():
            if case is not None and key != case:
                continue
            metric, unit = next(((m, u) for m, u in METRICS if all(_rate(c, m) is not None for _r, c in pairs)),
                                (None, ""))
            if metric is None:
                continue
            points = []
            for rec, c in pairs:
                value = _rate(c, metric)
                assert value is not None
                relative = noise.case_noise(c, rec.repeat_spread, noise.control_noise(rec.head_to_head), True)
                points.append(Point(rec.run_id, _when(rec), value, value * relative if math.isfinite(relative)
                                    else math.inf, c.key))
            out.append(Series(program, f"{key} on {cls}", metric, unit, True, tuple(points), tuple(steps(points))))
    out.sort(key=lambda s: (not s.key.split(" on ")[0].endswith("/*"), s.key))
    return out


def check_series(records: Iterable, program: str, gpu: str | None = None, check: str | None = None) -> list[Series]:
    """Every check (or only ``check``) of ``program``'s counted run records: its largest absolute error per record,
    on GPU class ``gpu`` as for :func:`bench_series` (a record without a GPU is its own class, ``no GPU``)."""
    runs = _counted(records, RunRecord, program)
    found: dict[tuple[str, str], list[Point]] = {}
    for rec in runs:
        facts = rec.environment.gpu
        cls = f"{facts.name}, cc {facts.compute_capability}" if facts else "no GPU"
        if gpu is not None and cls != gpu and cls.split(",")[0] != gpu:
            continue
        for c in rec.report.checks if rec.report else ():
            err = c.max_abs_err
            if (check is None or c.name == check) and isinstance(err, (int, float)) and math.isfinite(err):
                found.setdefault((c.name, cls), []).append(
                    Point(rec.run_id, _when(rec), float(err), abs(float(err)) * ERROR_NOISE, c.name))
    return [Series(program, f"{name} on {cls}", "max_abs_err", "", False, tuple(points),
                   tuple(steps(points, higher_is_better=False)))
            for (name, cls), points in sorted(found.items())]

