"""Timing for the bench programs: CUDA events around each launch, L2 flushed before each.

One concern: turn "launch this" into a list of per-launch milliseconds that measure the
kernel and not the cache, the clock ramp or the order the cases ran in.

* Every timed launch is preceded by writing a 256 MiB scratch buffer (cudaMemsetAsync),
  more than four times the H200's 60 MB L2, so no launch finds its inputs in L2 from
  the launch before. The flush is outside the events, so it is not timed.
* A pair of CUDA events brackets each launch; their difference is the sample.
* Each batch starts with untimed warm-up launches; a case's very first launch (JIT
  compile, module load, cuBLAS heuristics) is measured separately by the programs.
* interleave() runs the cases in rounds, a batch of each case per round, starting each
  round one case later, so that drift (clocks, temperature) spreads over all cases
  instead of landing on whichever ran last.

Needs only the standard library; cupy is passed in by the caller (the gate imports it).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

L2_FLUSH_BYTES = 256 << 20
"""Bytes written between timed launches: 256 MiB, over 4x the H200's 60 MB L2."""


@dataclass
class Case:
    """A timed case: how to launch it once, and what the results file says about it."""

    key: str
    launch: Callable[[], None]
    info: dict[str, Any]
    samples_ms: list[float] = field(default_factory=list)
    round_medians_ms: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, **self.info, "samples_ms": list(self.samples_ms),
                "round_medians_ms": list(self.round_medians_ms)}


class Timer:
    """Per-launch CUDA event timing on the current stream, with an L2 flush before each."""

    def __init__(self, cp: Any, flush_bytes: int = L2_FLUSH_BYTES):
        self.cp = cp
        self.stream = cp.cuda.get_current_stream()
        self.scratch = cp.empty(flush_bytes, dtype=cp.uint8)
        self._fills = 0

    def flush(self) -> None:
        """Overwrite the scratch buffer (a new byte value each time) on the stream."""
        self._fills += 1
        self.cp.cuda.runtime.memsetAsync(self.scratch.data.ptr, self._fills & 0xFF,
                                         self.scratch.nbytes, self.stream.ptr)

    def batch(self, launch: Callable[[], None], launches: int, warmup: int = 1) -> list[float]:
        """``warmup`` untimed launches, then ``launches`` timed ones: one sample each (ms)."""
        cp = self.cp
        for _ in range(warmup):
            self.flush()
            launch()
        events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(launches)]
        for start, end in events:
            self.flush()
            start.record(self.stream)
            launch()
            end.record(self.stream)
        events[-1][1].synchronize()
        return [float(cp.cuda.get_elapsed_time(start, end)) for start, end in events]

    def first_launch_ms(self, launch: Callable[[], None]) -> float:
        """Wall time of one launch up to its completion: for a first launch, setup included."""
        import time  # noqa: PLC0415

        self.stream.synchronize()
        t0 = time.perf_counter()
        launch()
        self.stream.synchronize()
        return (time.perf_counter() - t0) * 1e3


def interleave(timer: Timer, cases: list[Case], rounds: int, launches: int,
               warmup: int = 1, progress: Callable[[str], None] | None = None) -> None:
    """Time every case in ``rounds`` rounds of ``launches`` launches, rotating the order."""
    n = len(cases)
    for r in range(rounds):
        for i in range(n):
            case = cases[(i + r) % n]
            ms = timer.batch(case.launch, launches, warmup)
            case.samples_ms.extend(ms)
            case.round_medians_ms.append(statistics.median(ms))
        if progress is not None:
            progress(f"round {r + 1}/{rounds} done")


def spread(samples: list[float]) -> float:
    """Standard deviation over mean (0.0 for fewer than two samples)."""
    if len(samples) < 2:
        return 0.0
    return statistics.stdev(samples) / statistics.fmean(samples)
