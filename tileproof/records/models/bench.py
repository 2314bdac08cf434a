"""Bench records: timed cases, their rooflines and GPU load, paired ratios against the library reference."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field, model_validator

from tileproof.records.base import Model
from tileproof.records.models.common import ADDED_FIELD, SCHEMA_VERSION, Versioned, counter
from tileproof.records.models.facts import OutsideVerdict, RecordBase
from tileproof.records.models.reports import CheckReport
from tileproof.records.models.run import Environment
from tileproof.records.models.steps import FileDigest, Step, Transcript
from tileproof.records.schemas import schema

BENCH_VERSION: Final = 5
"""``BenchRecord.bench_version`` of the bench records written now: 5 keeps tileproof's own check of every case's
handed-over output (``BenchRecord.outside``) and makes the verdict from both words, as a run record's
(``checker-disagrees``, ``unverified``); 4 keeps, beside the CUDA-event timings, the
wall-clock time of each case's timed region as the program reported it and whether tileproof's own bracket of
the step holds it (``BenchCase.wall_s``, ``wall_in_step``); 3 gives every timed case the GPU's
SM clock and power draw while it ran (``load``), against the card's maximum SM clock and power limit;
2 (still read) gives every timed case its ``roofline`` (what bounds it, against which ceiling of the
same run) and flags results too good to believe unseen (``second_look``); 1 (records written before,
field absent; still read) has neither."""


ROOFLINE_BENCH_VERSION: Final = 2
"""The first bench_version whose cases carry ``roofline`` and ``second_look``."""


LOAD_BENCH_VERSION: Final = 3
"""The first bench_version whose cases carry ``load``."""


WALL_BENCH_VERSION: Final = 4
"""The first bench_version whose cases carry ``wall_s`` and ``wall_in_step``."""


OUTSIDE_BENCH_VERSION: Final = 5
"""The first bench_version that keeps tileproof's own check (``outside``) and whose verdict is both words."""


BenchVerdict = Literal["passed", "failed", "gated", "no-gpu", "error", "timeout", "checker-disagrees", "unverified"]
"""A bench record's verdict: ``Verdict``, and from bench_version 5 (``OUTSIDE_BENCH_VERSION``) the two verdicts of
tileproof's own check (``RunVerdict``): ``passed`` only when the program and tileproof's own check agree on every
check; ``unverified`` when a check could not be recomputed (it never counts as passing)."""


SECOND_LOOK_COPY_PCT: Final = 95.0
"""A bytes-bound case above this % of the device copy measured in the same run is flagged for a second look."""


Bound = Literal["flops", "bytes"]
"""The resource that bounds a case: its counted FLOPs at the dense peak take longer than its counted
bytes at the device copy's bandwidth (``flops``), or not (``bytes``)."""


Ceiling = Literal["device copy", "dense peak", "largest cuBLAS product"]
"""What a case's rate is measured against: for ``bytes`` the device copy timed in the same run; for
``flops`` the tensor cores' dense peak (``ceilings['peak_tflops']``), or, where the program knows no
peak for the GPU, the largest cuBLAS product of the same run. cuBLAS at the case's own shape is the
other flops ceiling: ``pct_of_reference`` and the head-to-head ratio."""


class Roofline(Model):
    """Where a case stands against the ceiling that bounds it (bench_version 2)."""

    bound: Bound
    ceiling: Ceiling
    ceiling_key: str | None
    """The case key of the ceiling's own measurement in this record (the copy, the cuBLAS product);
    None for the dense peak, which is computed, not timed."""
    ceiling_rate: float
    """The ceiling in the case's unit: GB/s for ``bytes``, TFLOP/s for ``flops``."""
    pct_of_ceiling: float
    """The case's rate as % of ``ceiling_rate``."""
    floor_ms: float
    """The larger of (counted FLOPs at the FLOP ceiling) and (counted bytes at the copy's bandwidth):
    no version of this computation can take less; the case's median over it is its gap."""

    def text(self) -> str:
        """``bytes-bound: 63.0% of the device copy (4202 GB/s)``."""
        unit = "GB/s" if self.bound == "bytes" else "TFLOP/s"
        return f"{self.bound}-bound: {self.pct_of_ceiling:.1f}% of the {self.ceiling} ({self.ceiling_rate:.0f} {unit})"


SecondLookRule = Literal["above-copy", "above-reference"]
"""``above-copy``: a bytes-bound case above ``SECOND_LOOK_COPY_PCT`` of the device copy;
``above-reference``: a flops-bound case above cuBLAS by more than the cuBLAS-against-itself control's
spread at that shape."""


class SecondLook(Model):
    """A result good enough that it must be measured again before it is believed."""

    rule: SecondLookRule
    value: float
    """The % that tripped the rule (of the copy; of cuBLAS, head to head when the case was paired)."""
    threshold: float
    """What it exceeded, in the same %."""
    basis: str
    """Where the numbers come from, e.g. ``head to head, 200 cycles; control 100.1% [99.8, 100.5]``."""

    def text(self) -> str:
        """``second look: 102.8% > 100.5% of the reference (head to head, ...): measure it again``."""
        what = "the device copy" if self.rule == "above-copy" else "the reference"
        return (f"second look: {self.value:.1f}% > {self.threshold:.1f}% of {what} ({self.basis}); "
                "measure it again before believing it")


ClockEventReason = Literal["gpu_idle", "applications_clocks", "sw_power_cap", "hw_slowdown", "sync_boost",
                           "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock",
                           "other"]
"""NVML's clocks event reasons, why the SM clock is below its most: ``sw_power_cap`` the driver holding
the board at its power limit, ``*_thermal_slowdown`` heat, ``hw_slowdown``/``hw_power_brake_slowdown`` the
board's own protection, ``gpu_idle`` nothing to run; ``other`` any bit NVML set that the bench names not."""


PowerReading = Literal["instant", "average"]
"""How NVML gave the power draw: ``instant`` (its instantaneous field) or ``average`` (over the last second,
nvmlDeviceGetPowerUsage on Ampere and newer GPUs: longer than one batch of a fast case)."""


class GpuLoad(Model):
    """What the GPU did while one case ran (bench_version 3): its SM clock and power draw, read through
    NVML by the bench program every few milliseconds during the case's batches (the warm-up launches of
    the case and its timed launches, the L2 flushes between them included) and once as each batch ended,
    against the card's maximum SM clock and enforced power limit. Only reads: the bench never sets a clock
    or a limit."""

    samples: int = Field(ge=1)
    """Readings inside the case's batches."""
    window_s: float
    """Seconds the case's batches lasted in all (the thread reads every ``interval_ms`` of the results file's
    ``load``, so ``samples`` is about ``window_s`` over that, plus one a batch)."""
    sm_clock_mhz: float
    """Median SM clock over the readings."""
    sm_clock_q1_mhz: float
    sm_clock_q3_mhz: float
    """Quartiles of the SM clock over the readings."""
    max_sm_clock_mhz: float = Field(gt=0)
    """The card's maximum SM clock (NVML's max clock), the clock the dense peak is computed at."""
    power_w: float
    """Median power draw over the readings."""
    power_q1_w: float
    power_q3_w: float
    """Quartiles of the power draw."""
    power_limit_w: float = Field(gt=0)
    """The power limit the driver enforced (NVML's enforced power limit)."""
    power_reading: PowerReading
    reasons: dict[ClockEventReason, float] = Field(default_factory=dict)
    """Fraction of the readings in which each clock event reason was active; reasons never active are left out."""
    pct_of_peak_at_clock: float | None = None
    """For a case whose FLOPs bound it: its rate as % of the dense peak scaled from the clock the peak was
    computed at to this case's median SM clock, i.e. how much of the tensor cores' work per clock it got at
    the clock it ran at; None otherwise."""

    @property
    def pct_of_power_limit(self) -> float:
        """The lower quartile of the power draw as % of the limit: in three readings of four it drew at least this."""
        return 100.0 * self.power_q1_w / self.power_limit_w

    @property
    def pct_below_max_clock(self) -> float:
        """How far below its maximum the SM clock ran, from the upper quartile of the clock, in % of the maximum:
        in three readings of four the clock was at least this far below it."""
        return 100.0 * (1.0 - self.sm_clock_q3_mhz / self.max_sm_clock_mhz)

    def text(self) -> str:
        """``SM 1515 of 1980 MHz, 688 of 700 W (instant; sw_power_cap 97%), 149 readings``."""
        seen = ", ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(self.reasons.items(), key=lambda kv: -kv[1]))
        return (f"SM {self.sm_clock_mhz:.0f} of {self.max_sm_clock_mhz:.0f} MHz, {self.power_w:.0f} of "
                f"{self.power_limit_w:.0f} W ({self.power_reading}{'; ' + seen if seen else ''}), "
                f"{self.samples} readings")


class BenchCase(Model):
    """One timed case: a kernel variant at one shape, or its library reference."""

    name: str
    """What is computed: ``matmul``, ``softmax``, ``online_softmax``, ``copy``."""
    variant: str
    """``tile``, ``grouped``, ``persistent``, ``cublas``, ``cupy``..."""
    shape: list[int]
    dtype: str
    tiles: list[int] | None
    repeats: int
    first_launch_ms: float | None
    """The first launch, JIT compile included; never part of the statistics."""
    median_ms: float
    min_ms: float
    max_ms: float
    spread: float
    """Standard deviation over mean of the timed repeats."""
    noisy: bool
    """spread > 0.10 (pyperf's rule)."""
    tflops: float | None
    gbps: float | None
    pct_of_reference: float | None
    """Rate as % of the same-run library reference (cuBLAS / cupy) at the same shape."""
    pct_of_ceiling: float | None
    """Rate as % of the measured ceiling (large cuBLAS product / large copy)."""
    max_rel_err: float | None
    """Checked once against a reference before timing."""
    checked: bool
    config: dict[str, int | str | list[int] | None] = Field(default_factory=dict)
    """Compiler hints and launch settings beyond the tile shape (``num_worker_warps``,
    ``occupancy``, ``group_m``, ``grid``), or the library call for a reference."""
    key: str = ""
    """The program's case key, ``name/variant/shape[/tiles+hints]``; ``repeat_spread`` uses it."""
    tiles_per_sm: float | None = None
    """Output tiles over the GPU's SMs: the waves a one-tile-per-block grid needs (a
    fraction means the last wave leaves SMs idle)."""
    resources: dict[str, int | str] | None = None
    """What the compiled kernel costs, read by the driver from the JIT's cubin:
    ``registers`` and ``local_bytes`` (spills) per thread, ``shared_bytes``,
    ``max_threads_per_block``, ``blocks_per_sm``; or ``error`` saying why not."""
    roofline: Roofline | None = None
    """From bench_version 2: what bounds the case and how close it comes to that ceiling (None for a
    case that counts neither FLOPs nor bytes); always None in bench_version 1 records."""
    second_look: SecondLook | None = None
    """From bench_version 2: set when the result is too good to believe from one measurement."""
    load: GpuLoad | None = None
    """From bench_version 3: the GPU's SM clock and power draw during this case's batches; None where the
    program could not read them (the record's ``load_unavailable`` says why)."""
    events_ms: float | None = ADDED_FIELD
    """From bench_version 4: the sum of the case's CUDA-event samples (ms), what the timed launches took by the
    program's own clock."""
    wall_s: float | None = ADDED_FIELD
    """From bench_version 4: the wall-clock seconds of the regions in which the case's samples were timed (the
    program's ``time.time()`` around each timed batch, summed); None when the program reported none."""
    wall_in_step: bool | None = ADDED_FIELD
    """From bench_version 4: whether every timed region the program reported lies inside the step as tileproof
    bracketed it (its own start and end times); None when the program reported none. The audit
    (``bench-wall-clock``) finds a case whose wall clock cannot hold the rate its events claim."""

    # The metrics a performance claim can name beyond the fields above (``PerfMetric``), derived here so
    # that the claim rule reads each from one place.

    @property
    def times_floor(self) -> float | None:
        """The median over the roofline's floor: how many times longer the case took than its counted work
        at the ceiling of the same run (1.0 would be the roofline itself); None without a roofline."""
        return self.median_ms / self.roofline.floor_ms if self.roofline and self.roofline.floor_ms > 0 else None

    @property
    def pct_of_power_limit(self) -> float | None:
        """``GpuLoad.pct_of_power_limit``; None without ``load``."""
        return self.load.pct_of_power_limit if self.load else None

    @property
    def pct_below_max_clock(self) -> float | None:
        """``GpuLoad.pct_below_max_clock``; None without ``load``."""
        return self.load.pct_below_max_clock if self.load else None

    @property
    def pct_of_peak_at_clock(self) -> float | None:
        """``GpuLoad.pct_of_peak_at_clock``; None without ``load`` or for a case its bytes bound."""
        return self.load.pct_of_peak_at_clock if self.load else None


class PairedRatio(Model):
    """A case against its library reference when both were launched in turn, cycle by cycle."""

    reference: str
    """The reference case's key (same computation and shape)."""
    cycles: int
    pct_of_reference: float
    """Median over cycles of (reference ms / case ms) x 100: the case's rate as % of the
    reference's, each cycle's pair taken at the same clocks."""
    q1: float
    q3: float
    """Quartiles of the same per-cycle percentages: how much one pair can say."""
    control: bool = False
    """The reference against a second copy of itself (A/A): how far from 100% the method
    alone puts a ratio."""


@schema("bench-record", SCHEMA_VERSION)
class BenchRecord(RecordBase, Versioned):
    VERSION_FIELD = "bench_version"
    kind: Literal["bench"]
    bench_version: Literal[1, 2, 3, 4, 5] = counter(BENCH_VERSION)
    """3 (``BENCH_VERSION``) for records written now: cases carry ``load`` besides what 2 has; 2: cases carry
    ``roofline`` and ``second_look``, and ``ceilings`` may hold ``peak_tflops``; 1 (records written before,
    field absent): none of these."""
    environment: Environment
    program: str
    sources: list[FileDigest]
    step: Step
    report: CheckReport | None = None
    """The program's check report: one check per case, run once before any timing."""
    report_file: Transcript | None = None
    results_file: Transcript | None
    """The bench program's JSON output, verbatim."""
    gpu_before: Transcript | None
    """``nvidia-smi --query-gpu`` (clocks, temperature, power) before the bench."""
    gpu_after: Transcript | None
    cases: list[BenchCase]
    ceilings: dict[str, float]
    """``tflops``: a large cuBLAS product's rate; ``gbps``: a large device copy's bandwidth; from
    bench_version 2 ``peak_tflops``: the dense tensor-core peak the program computed for this GPU."""
    repeat_spread: dict[str, float]
    """Case key → relative difference of its median measured twice in this run."""
    head_to_head: dict[str, PairedRatio] = Field(default_factory=dict)
    """Case key → its rate against the reference's when the two were launched in turn
    (the programs' phase ``paired``); empty when the program has no such phase."""
    load_unavailable: str | None = None
    """From bench_version 3: why some case has no ``load`` (the program could not read the GPU's clock and
    power through NVML, or read nothing during its batches); None when every case with a rate has one."""
    outside: OutsideVerdict | None = None
    """From bench_version 5: tileproof's own check of the outputs the program handed over (each case's check
    ``index`` in ``report``), None when the program ran no check; before, absent (the verdict was the program's)."""
    verdict: BenchVerdict
    reason: str

    @property
    def verdict_by(self) -> Literal["program", "program-and-checker"]:
        """Whose word the verdict is: the program's report alone before ``OUTSIDE_BENCH_VERSION``, else both."""
        return "program-and-checker" if self.bench_version >= OUTSIDE_BENCH_VERSION else "program"

    @property
    def has_rooflines(self) -> bool:
        """Written since cases carry ``roofline`` and ``second_look`` (``bench_version`` >=
        ``ROOFLINE_BENCH_VERSION``): a case without a roofline then has none; an older record has none at all."""
        return self.bench_version >= ROOFLINE_BENCH_VERSION

    @model_validator(mode="after")
    def _fits_version(self) -> BenchRecord:
        rated = [c for c in self.cases if c.tflops is not None or c.gbps is not None]
        if self.bench_version < ROOFLINE_BENCH_VERSION:
            if any(c.roofline or c.second_look for c in self.cases) or "peak_tflops" in self.ceilings:
                raise ValueError(f"bench records before bench_version {ROOFLINE_BENCH_VERSION} hold no roofline, "
                                 "second look or peak_tflops")
        elif any(c.roofline is None for c in rated):
            raise ValueError(f"bench records of bench_version {ROOFLINE_BENCH_VERSION} and later give every case "
                             "with a rate its roofline")
        if self.bench_version < LOAD_BENCH_VERSION:
            if any(c.load for c in self.cases) or self.load_unavailable is not None:
                raise ValueError(f"bench records before bench_version {LOAD_BENCH_VERSION} hold no load and no "
                                 "load_unavailable")
        elif any(c.load is None for c in rated) and not self.load_unavailable:
            raise ValueError(f"bench records of bench_version {LOAD_BENCH_VERSION} give every case with a rate its "
                             "load, or say in load_unavailable why not")
        if self.bench_version < WALL_BENCH_VERSION and any(
                c.wall_s is not None or c.wall_in_step is not None or c.events_ms is not None for c in self.cases):
            raise ValueError(f"bench records before bench_version {WALL_BENCH_VERSION} hold no wall-clock times")
        if self.bench_version < OUTSIDE_BENCH_VERSION and (
                self.outside is not None or self.verdict in ("checker-disagrees", "unverified")):
            raise ValueError(f"bench records before bench_version {OUTSIDE_BENCH_VERSION} hold no outside check and "
                             "no verdict of one")
        return self
