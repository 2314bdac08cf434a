"""Timing for the bench programs: CUDA events around each launch, L2 flushed before each.

One concern: turn "launch this" into a list of per-launch milliseconds that measure the
kernel and not the cache, the clock ramp or the order the cases ran in.

* Every timed launch is preceded by writing a 256 MiB scratch buffer (cudaMemsetAsync),
  more than four times the H200's 60 MB L2, so no launch finds its inputs in L2 from
  the launch before. The flush is outside the events, so it is not timed.
* A pair of CUDA events brackets each launch; their difference is the sample.
* Each timed batch starts behind LEAD_IN_MS of untimed GPU work (more flushes), so
  that the CPU has queued the next launch before the GPU reaches it. Without it the
  stream is empty when a batch starts, the GPU waits for Python to enqueue the launch
  after the start event, and that wait lands in the first sample. (Seen on an H200,
  2026-11-29: the first sample of every batch 0.33-0.37 ms for a 0.22 ms cuBLAS
  product, which alone made its spread 12%.)
* Each batch starts with untimed launches of the same case until it has kept the GPU
  busy for WARMUP_MS: the clocks then follow this case's own power draw, not the
  previous case's. (Seen on an H200, 2026-11-29, with one warm-up launch per batch:
  at 8192^3 a fast matmul batched right after a slow, low-power one ran up to 23%
  faster than the same matmul timed again later among fast ones, while cuBLAS, always
  after a fast case, moved 1.3%.) A case's very first launch (JIT compile, module
  load, cuBLAS heuristics) is measured separately by the programs.
* interleave() runs the cases in rounds, a batch of each case per round, in a new
  seeded random order each round (or rotated by one), so that drift (clocks,
  temperature) and any leftover effect of the case before spread over all cases
  instead of landing on whichever ran last or next to a particular neighbour.

Needs only the standard library; cupy is passed in by the caller (the gate imports it).
"""

from __future__ import annotations

import contextlib
import math
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

L2_FLUSH_BYTES = 256 << 20
"""Bytes written between timed launches: 256 MiB, over 4x the H200's 60 MB L2."""
WARMUP_MS = 250.0
"""Untimed GPU time of a case itself before each of its timed batches."""
MAX_WARMUP_LAUNCHES = 1000
"""...but never more launches than this (small cases: the flushes dominate anyway)."""
LEAD_IN_MS = 2.0
"""Untimed GPU work queued ahead of each timed batch (see the module docstring)."""


@dataclass
class Case:
    """A timed case: how to launch it once, and what the results file says about it."""

    key: str
    launch: Callable[[], None]
    info: dict[str, Any]
    samples_ms: list[float] = field(default_factory=list)
    round_medians_ms: list[float] = field(default_factory=list)
    warmup_launches: list[int] = field(default_factory=list)
    wall_unix: list[list[float]] = field(default_factory=list)
    """[start, end] wall-clock seconds (time.time()) of each region holding this case's timed samples (a
    batch with its warm-up; a head-to-head chunk): tileproof holds them against its own bracket of the
    step and against the rate the events claim."""

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, **self.info, "samples_ms": list(self.samples_ms),
                "round_medians_ms": list(self.round_medians_ms),
                "warmup_launches": list(self.warmup_launches), "wall_unix": [list(w) for w in self.wall_unix]}


class Timer:
    """Per-launch CUDA event timing on the current stream, with an L2 flush before each."""

    def __init__(self, cp: Any, flush_bytes: int = L2_FLUSH_BYTES):
        self.cp = cp
        self.stream = cp.cuda.get_current_stream()
        self.scratch = cp.empty(flush_bytes, dtype=cp.uint8)
        self._fills = 0
        self.flush_ms = self._flush_time()
        self.lead_in_flushes = max(1, math.ceil(LEAD_IN_MS / self.flush_ms))

    def _flush_time(self, count: int = 10) -> float:
        """GPU time of one flush, the median of ``count`` (ms, never below 1 us)."""
        events = [(self.cp.cuda.Event(), self.cp.cuda.Event()) for _ in range(count)]
        for start, end in events:
            start.record(self.stream)
            self.flush()
            end.record(self.stream)
        events[-1][1].synchronize()
        return max(1e-3, statistics.median(float(self.cp.cuda.get_elapsed_time(s, e)) for s, e in events))

    def flush(self) -> None:
        """Overwrite the scratch buffer (a new byte value each time) on the stream."""
        self._fills += 1
        self.cp.cuda.runtime.memsetAsync(self.scratch.data.ptr, self._fills & 0xFF,
                                         self.scratch.nbytes, self.stream.ptr)

    def timed(self, launch: Callable[[], None], launches: int) -> list[float]:
        """``launches`` launches, each after a flush and between two events: ms each."""
        return self.timed_sequence([launch] * launches)

    def timed_sequence(self, launches: list[Callable[[], None]]) -> list[float]:
        """Each launch in turn, after a flush and between two events: ms each, in order.
        The lead-in flushes go first, untimed."""
        cp = self.cp
        events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in launches]
        for _ in range(self.lead_in_flushes):
            self.flush()
        for launch, (start, end) in zip(launches, events):
            self.flush()
            start.record(self.stream)
            launch()
            end.record(self.stream)
        events[-1][1].synchronize()
        return [float(cp.cuda.get_elapsed_time(start, end)) for start, end in events]

    def warm(self, launch: Callable[[], None], warmup_ms: float,
             max_launches: int = MAX_WARMUP_LAUNCHES) -> int:
        """Untimed launches until they add up to ``warmup_ms`` of GPU time or ``max_launches``:
        one first, then as many as that one's time says are still needed. Returns how many ran."""
        spent, done, chunk = 0.0, 0, 1
        while True:
            spent += sum(self.timed(launch, chunk))
            done += chunk
            if spent >= warmup_ms or done >= max_launches:
                return done
            per_launch = spent / done
            chunk = max(1, min(max_launches - done, math.ceil((warmup_ms - spent) / per_launch)))

    def batch(self, launch: Callable[[], None], launches: int,
              warmup_ms: float = WARMUP_MS) -> tuple[list[float], int]:
        """Warm up on this case, then ``launches`` timed launches: (ms each, warm-up launches)."""
        warmed = self.warm(launch, warmup_ms)
        return self.timed(launch, launches), warmed

    def first_launch_ms(self, launch: Callable[[], None]) -> float:
        """Wall time of one launch up to its completion: for a first launch, setup included."""
        import time  # noqa: PLC0415

        self.stream.synchronize()
        t0 = time.perf_counter()
        launch()
        self.stream.synchronize()
        return (time.perf_counter() - t0) * 1e3


def interleave(timer: Timer, cases: list[Case], rounds: int, launches: int,
               warmup_ms: float = WARMUP_MS, order: random.Random | None = None,
               watch: Callable[[str], ContextManager[None]] | None = None) -> None:
    """Time every case in ``rounds`` rounds of ``launches`` launches; each round in an
    order drawn from ``order``, or, without one, the list rotated by one more each round.
    ``watch(key)``, when given, brackets each batch of the case ``key`` (its warm-up and its
    timed launches): kernels/bench/gpu_load.py reads the GPU's clock and power inside it."""
    n = len(cases)
    for r in range(rounds):
        if order is not None:
            this_round = order.sample(cases, n)
        else:
            this_round = [cases[(i + r) % n] for i in range(n)]
        for case in this_round:
            with watch(case.key) if watch is not None else contextlib.nullcontext():
                start = time.time()  # the batch: its warm-up, then its timed launches, synchronised
                ms, warmed = timer.batch(case.launch, launches, warmup_ms)
                case.wall_unix.append([start, time.time()])
            case.samples_ms.extend(ms)
            case.round_medians_ms.append(statistics.median(ms))
            case.warmup_launches.append(warmed)


PAIRED_CHUNK = 50
"""Cycles per synchronisation in ``alternate`` (bounds the events alive at once)."""


def alternate(timer: Timer, cases: list[Case], cycles: int, warmup_ms: float = WARMUP_MS) -> None:
    """Head to head: the cases launched in turn, one launch each per cycle, for ``cycles``
    cycles after ``warmup_ms`` of untimed cycles. Sample i of every case comes from cycle
    i, so the samples of different cases with the same index ran next to each other, at
    the same clocks: their ratio does not move with the GPU's clock and power swings,
    which shift whole batches of one case by several percent (seen on an H200: batch
    medians of one matmul from 0.207 to 0.229 ms within one run)."""
    def cycle() -> None:
        for case in cases:
            case.launch()

    warmed = timer.warm(cycle, warmup_ms)
    for first in range(0, cycles, PAIRED_CHUNK):
        n = min(PAIRED_CHUNK, cycles - first)
        start = time.time()
        ms = timer.timed_sequence([case.launch for case in cases] * n)
        region = [start, time.time()]  # shared by the cases launched in turn: each case's samples lie in it
        for case in cases:
            case.wall_unix.append(list(region))
        for j, case in enumerate(cases):
            mine = ms[j::len(cases)]
            case.samples_ms.extend(mine)
            case.round_medians_ms.append(statistics.median(mine))
    for case in cases:
        case.warmup_launches.append(warmed)


def method(rounds: int, launches: int, warmup_ms: float = WARMUP_MS) -> dict[str, Any]:
    """How the samples were taken, for a bench program's results file."""
    return {
        "timer": "CUDA events around each launch",
        "rounds": rounds, "launches_per_round": launches,
        "warmup": f"before every timed batch, untimed launches of the same case until "
                  f"{warmup_ms:g} ms of its GPU time (at most {MAX_WARMUP_LAUNCHES})",
        "lead_in": f"{LEAD_IN_MS:g} ms of untimed L2 flushes queued ahead of every timed batch",
        "order": "interleaved: every case once per round, in a random order per round "
                 "(seeded by the report's seed)",
        "cache": f"L2 flushed before every timed launch by writing {L2_FLUSH_BYTES >> 20} MiB",
    }


def spread(samples: list[float]) -> float:
    """Standard deviation over mean (0.0 for fewer than two samples)."""
    if len(samples) < 2:
        return 0.0
    return statistics.stdev(samples) / statistics.fmean(samples)
