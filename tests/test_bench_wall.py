"""The wall clock around a bench case's timed regions (bench_version 4) and the audit rule ``bench-wall-clock``:
a rate the CUDA events claim but the wall clock cannot support is a finding (judge/audit/rules/outside.py)."""

from __future__ import annotations

import statistics

import pytest

from tileproof.bench import core as bench
from tileproof.judge.audit.rules import outside as rules
from tileproof.records.models import WALL_BENCH_VERSION, BenchCase

T0 = 1_780_000_000.0
"""The step's start, Unix seconds, as tileproof bracketed it; it ends 100 s later."""
WINDOW = (T0, T0 + 100.0)
MATMUL_8192 = 2 * 8192 ** 3


def results(ms: float, regions: list[list[float]], flops: int = MATMUL_8192) -> dict:
    """A matmul bench results file with one cuBLAS case (the ceiling) and one tile case timed at ``ms`` per launch
    (20 samples) in ``regions``."""
    def case(key: str, variant: str, per_launch: float, walls: list[list[float]]) -> dict:
        samples = [per_launch] * 20
        return {"key": key, "name": "matmul", "variant": variant, "shape": [8192] * 3,
                "dtype": "float16->float32", "tiles": None, "config": {}, "flops": flops, "bytes": None,
                "phase": "sweep", "first_launch_ms": 10.0, "check_index": None, "samples_ms": samples,
                "round_medians_ms": [statistics.median(samples)], "wall_unix": walls}
    honest = [[T0 + 10.0, T0 + 10.2]]
    return {"results_version": 1, "reference": {"matmul": "cublas"},
            "ceilings": {"tflops": "matmul/cublas/8192x8192x8192"}, "peak": {"tflops": 989.0},
            "cases": [case("matmul/cublas/8192x8192x8192", "cublas", 1.6, honest),
                      case("matmul/tile/8192x8192x8192/x", "tile", ms, regions)], "skipped": []}


def tile_case(ms: float, regions: list[list[float]]) -> BenchCase:
    cases, _, _ = bench.build_cases(results(ms, regions), None, WINDOW)
    return next(c for c in cases if c.variant == "tile")


def wall_issues(case: BenchCase) -> list[str]:
    return [why for rule, why in rules.case_issues(case, 989.0) if rule == rules.WALL]


def test_an_honest_case_keeps_its_wall_clock_and_is_no_finding():
    case = tile_case(1.7, [[T0 + 20.0, T0 + 20.05]])  # 20 launches of 1.7 ms in 50 ms of wall clock
    assert case.wall_s == pytest.approx(0.05)
    assert case.events_ms == pytest.approx(34.0)
    assert case.wall_in_step is True
    assert wall_issues(case) == []


def test_events_claiming_more_time_than_the_wall_clock_held_are_a_finding():
    case = tile_case(1.7, [[T0 + 20.0, T0 + 20.001]])  # 34 ms of events inside 1 ms of wall clock
    found = wall_issues(case)
    assert any("CUDA events add up to 34 ms inside 1 ms of wall clock" in w for w in found), found


def test_a_rate_the_wall_clock_cannot_support_is_a_finding():
    """A rewritten timer: 1e-6 ms per 8192^3 product (an exaFLOP/s), in a region of a few microseconds: the
    counted work needs far more wall clock at the dense peak (1.1 ms each), and the rate is above it."""
    case = tile_case(1e-6, [[T0 + 20.0, T0 + 20.000005]])
    found = wall_issues(case)
    assert any("above the dense tensor peak 989.0 TFLOP/s" in w for w in found), found
    assert any("20 launches in 0.005" in w and "their counted work needs 22.2 ms at the dense peak" in w
               for w in found), found


def test_timed_regions_outside_the_step_are_a_finding():
    case = tile_case(1.7, [[T0 - 3600.0, T0 - 3599.9]])  # reported from an hour before the step began
    assert case.wall_in_step is False
    assert any("outside the step" in w for w in wall_issues(case))


def test_a_region_that_ends_before_it_starts_is_an_unreadable_results_file():
    with pytest.raises(ValueError, match="ends before it starts"):
        tile_case(1.7, [[T0 + 20.0, T0 + 19.0]])


def test_results_without_wall_clocks_read_as_before():
    """A program that reports no regions (before bench_version 4): no wall fields, no finding from them."""
    data = results(1.7, [])
    for c in data["cases"]:
        del c["wall_unix"]
    cases, _, _ = bench.build_cases(data, None, WINDOW)
    assert all(c.wall_s is None and c.events_ms is None and c.wall_in_step is None for c in cases)
    assert WALL_BENCH_VERSION == 4


def test_the_bench_timer_reports_the_regions_of_each_batch():
    """kernels/bench/timing.py brackets each batch with the wall clock, inside the caller's own bracket."""
    import importlib.util  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import time  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    path = Path(__file__).resolve().parents[1] / "kernels" / "bench" / "timing.py"
    spec = importlib.util.spec_from_file_location("wall_timing", path)
    timing = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = timing
    spec.loader.exec_module(timing)

    class Timer:
        def batch(self, launch, launches, warmup_ms):
            launch()
            time.sleep(0.01)
            return [1.0] * launches, 1

    cases = [timing.Case(key=k, launch=lambda: None, info={}) for k in "ab"]
    before = time.time()
    timing.interleave(Timer(), cases, rounds=2, launches=3)
    after = time.time()
    regions = cases[0].to_dict()["wall_unix"]
    assert len(regions) == 2
    assert all(before <= a <= b <= after and b - a >= 0.01 for a, b in regions)
    del sys.modules[spec.name]
