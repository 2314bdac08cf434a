"""The bench command and programs: statistics, percentages, records, the no-GPU path.

CPU only, except the one GPU test (skipped with a reason where there is no GPU).
Synthetic results are built here; the results files that committed bench records
point at (captured on a GPU by ``python -m tileproof bench``) are re-read too.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import shutil
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import cli_args, gpu, no_gpu

from tileproof.bench import core as bench
from tileproof.commands import bench as bench_cmd
from tileproof.records.errors import TileproofError
from tileproof.records.models import (
    AS_READ,
    BenchRecord,
    Check,
    CheckReport,
    Environment,
    GitState,
    HostFacts,
    Step,
    Transcript,
)
from tileproof.records.store import load_record, load_records, seal_of, write_record

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "kernels" / "bench"



# --- synthetic results -----------------------------------------------------------


def case(key, name, variant, shape, ms, *, flops=None, nbytes=None, check_index=None, phase="sweep",
         tiles=None):
    samples = ms if isinstance(ms, list) else [ms] * 20
    return {"key": key, "name": name, "variant": variant, "shape": shape, "dtype": "float16->float32",
            "tiles": tiles, "config": {"grid": [8, 8, 1]} if tiles else {"api": "cublasGemmEx"},
            "flops": flops, "bytes": nbytes, "phase": phase, "first_launch_ms": 1234.5,
            "check_index": check_index, "samples_ms": samples, "round_medians_ms": [statistics.median(samples)]}


def mm(n):
    return 2 * n ** 3


def matmul_results():
    return {
        "results_version": 1,
        "reference": {"matmul": "cublas"},
        "ceilings": {"tflops": "matmul/cublas/8192x8192x8192"},
        "cases": [
            case("matmul/tile/4096x4096x4096/128x128x64", "matmul", "tile", [4096] * 3, 0.25, flops=mm(4096),
                 check_index=0, tiles=[128, 128, 64]),
            case("matmul/cublas/4096x4096x4096", "matmul", "cublas", [4096] * 3, 0.20, flops=mm(4096), check_index=1),
            case("matmul/cublas/8192x8192x8192", "matmul", "cublas", [8192] * 3, 1.60, flops=mm(8192), check_index=2),
            case("matmul/tile/4096x4096x4096/128x128x64", "matmul", "tile", [4096] * 3, 0.255, flops=mm(4096),
                 phase="repeat", tiles=[128, 128, 64]),
        ],
        "skipped": [],
    }


def report(errs=(0.0, 0.0, "nan"), passed=(True, True, True)):
    """A check report as the programs write it (non-finite numbers are strings)."""
    checks = [Check(name="matmul", shape=[4096, 4096], dtype="float32", rtol=1e-4, atol=1e-3, checked=16,
                    mismatches=0 if ok else 1, max_abs_err=e, max_rel_err=e, first_failure=None, passed=ok)
              for e, ok in zip(errs, passed, strict=True)]
    return CheckReport(report_version=1, program="bench/matmul_bench.py", seed=1,
                       device={"name": "NVIDIA H200", "compute_capability": "9.0"}, gate="ok",
                       gate_message="ok", checks=checks, passed=all(passed))


# --- statistics ------------------------------------------------------------------


def test_stats_of_a_timing_list():
    s = bench.stats([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s["median_ms"], s["min_ms"], s["max_ms"], s["repeats"]) == (3.0, 1.0, 100.0, 5)
    assert s["spread"] == pytest.approx(statistics.stdev([1, 2, 3, 4, 100]) / 22.0)
    assert s["noisy"]


def test_constant_and_single_samples_have_no_spread():
    assert bench.stats([0.5] * 20)["spread"] == 0.0
    assert not bench.stats([0.5] * 20)["noisy"]
    assert bench.stats([0.5])["spread"] == 0.0
    with pytest.raises(ValueError):
        bench.stats([])


@pytest.mark.parametrize("spread,noisy", [(0.05, False), (0.0999, False), (0.1001, True), (0.5, True)],
                         ids=["quiet", "just-under", "just-over", "far-over"])
def test_noisy_is_pyperfs_ten_percent(spread, noisy):
    # Two samples 1 -/+ d have stdev d*sqrt(2) and mean 1.
    d = spread / math.sqrt(2)
    s = bench.stats([1 - d, 1 + d])
    assert s["spread"] == pytest.approx(spread)
    assert s["noisy"] is noisy


def test_rates():
    assert bench.rates({"flops": mm(4096)}, 0.25)[0] == pytest.approx(549.7558, rel=1e-6)
    assert bench.rates({"flops": None, "bytes": 2 << 30}, 0.5) == (None, pytest.approx(4294.967296))
    assert bench.rates({}, 1.0) == (None, None)


# --- cases, percentages, ceilings, repeats ---------------------------------------------


def test_percent_of_cublas_and_of_the_ceiling():
    cases, ceilings, repeat = bench.build_cases(matmul_results(), report())
    by = {c.key: c for c in cases}
    tile, ref = by["matmul/tile/4096x4096x4096/128x128x64"], by["matmul/cublas/4096x4096x4096"]
    assert len(cases) == 3  # the repeat is no second case
    assert ref.pct_of_reference == pytest.approx(100.0)
    assert tile.pct_of_reference == pytest.approx(80.0)          # 0.20 / 0.25
    assert ceilings["tflops"] == pytest.approx(mm(8192) / 1.6e-3 / 1e12)
    assert tile.pct_of_ceiling == pytest.approx(100 * tile.tflops / ceilings["tflops"])
    assert by["matmul/cublas/8192x8192x8192"].pct_of_ceiling == pytest.approx(100.0)
    assert tile.gbps is None
    assert tile.tiles == [128, 128, 64]
    assert tile.first_launch_ms == 1234.5
    assert repeat == {"matmul/tile/4096x4096x4096/128x128x64": pytest.approx(0.02)}


def test_waves_and_resources_are_carried_and_cleaned():
    results = matmul_results()
    tile, ref = results["cases"][0], results["cases"][1]
    tile.update(tiles_per_sm=7.758, resources={"registers": 168, "local_bytes": 0, "shared_bytes": 229560,
                                               "max_threads_per_block": 384, "blocks_per_sm": 1,
                                               "bogus": "x", "flag": True})
    ref["resources"] = {"error": "the kernel was not compiled in this process", "registers": 3}
    by = {c.key: c for c in bench.build_cases(results, report())[0]}
    t = by["matmul/tile/4096x4096x4096/128x128x64"]
    assert t.tiles_per_sm == pytest.approx(7.758)
    assert t.resources == {"registers": 168, "local_bytes": 0, "shared_bytes": 229560,
                           "max_threads_per_block": 384, "blocks_per_sm": 1}
    assert by["matmul/cublas/4096x4096x4096"].resources == {"error": "the kernel was not compiled in this process"}
    big = by["matmul/cublas/8192x8192x8192"]
    assert big.resources is None
    assert big.tiles_per_sm is None


def test_best_lines_name_the_fastest_tile_kernel_of_each_variant():
    results = matmul_results()
    results["cases"] += [
        case("matmul/tile/4096x4096x4096/64x64x32", "matmul", "tile", [4096] * 3, 0.70, flops=mm(4096),
             tiles=[64, 64, 32]),
        case("matmul/persistent/4096x4096x4096/128x256x32+warps8+occ1", "matmul", "persistent", [4096] * 3, 0.21,
             flops=mm(4096), tiles=[128, 256, 32]),
    ]
    results["cases"][-1].update(tiles_per_sm=3.879, resources={"registers": 168, "local_bytes": 0})
    cases = bench.build_cases(results, None)[0]
    assert bench.best_lines(cases) == [
        "best matmul/tile/4096x4096x4096/128x128x64: 0.2500 ms, 80.0% of reference",
        "best matmul/persistent/4096x4096x4096/128x256x32+warps8+occ1: 0.2100 ms, 95.2% of reference, "
        "3.879 tiles/SM, 168 registers + 0 B spilled per thread",
    ]


def paired_results(kernel_ms, cublas_ms):
    results = matmul_results()
    results["cases"] += [
        case("matmul/persistent/4096x4096x4096/128x256x32+warps8+occ1", "matmul", "persistent", [4096] * 3,
             kernel_ms, flops=mm(4096), phase="paired", tiles=[128, 256, 32]),
        case("matmul/cublas/4096x4096x4096", "matmul", "cublas", [4096] * 3, cublas_ms, flops=mm(4096),
             phase="paired"),
    ]
    return results


def test_head_to_head_pairs_samples_cycle_by_cycle():
    """Clock swings move both cases of a cycle together: the per-cycle ratio stays put
    while the medians of the two cases, taken apart, would say 100% or more."""
    swing = [1.0, 1.0, 1.1, 1.1, 1.2, 1.2, 0.9, 0.9]                   # the GPU's clock, cycle by cycle
    kernel = [0.2 * f for f in swing]
    cublas = [0.19 * f for f in swing]                                 # always 5% faster in its own cycle
    cublas[6], cublas[7] = 0.19 * 1.3, 0.19 * 1.3                     # ...except two cycles where it was slow
    paired = bench.head_to_head(paired_results(kernel, cublas))
    [(key, p)] = paired.items()
    assert key == "matmul/persistent/4096x4096x4096/128x256x32+warps8+occ1"
    assert p.reference == "matmul/cublas/4096x4096x4096"
    assert p.cycles == 8
    assert p.pct_of_reference == pytest.approx(95.0)
    assert p.q1 == pytest.approx(95.0)
    assert p.q3 > 95.0
    assert statistics.median(cublas) / statistics.median(kernel) > 0.99, "medians apart tell another story"
    assert bench.build_cases(paired_results(kernel, cublas), report())[0], "the sweep ignores the paired phase"
    assert bench.head_to_head(matmul_results()) == {}
    results = paired_results(kernel, cublas)
    twin = dict(results["cases"][-1], key="matmul/cublas/4096x4096x4096/again",
                twin_of="matmul/cublas/4096x4096x4096", samples_ms=[x * 1.002 for x in cublas])
    results["cases"].append(twin)
    both = bench.head_to_head(results)
    assert both[key] == p, "a twin is never taken for the reference"
    assert not p.control, "a twin is never taken for the reference"
    control = both["matmul/cublas/4096x4096x4096/again"]
    assert control.control
    assert control.pct_of_reference == pytest.approx(100 / 1.002)
    assert bench.summary([], {}, {}, both)[-1].endswith("[control: itself]")
    lines = bench.summary(bench.build_cases(matmul_results(), report())[0], {}, {}, paired)
    assert lines[-1].startswith("    head to head matmul/persistent/4096x4096x4096/128x256x32+warps8+occ1: "
                                "95.0% of cublas (quartiles 95.0-")


@pytest.mark.parametrize("kernel,cublas", [([0.2] * 8, [0.19] * 7), ([0.2] * 3, [0.19] * 3)],
                         ids=["unequal", "too-few"])
def test_head_to_head_refuses_unpaired_samples(kernel, cublas):
    with pytest.raises(ValueError, match="paired case"):
        bench.head_to_head(paired_results(kernel, cublas))


def test_checks_come_from_the_report_by_index():
    cases, _, _ = bench.build_cases(matmul_results(), report(errs=(0.0, 1e-7, "nan"),
                                                             passed=(True, True, False)))
    by = {c.key: c for c in cases}
    assert by["matmul/tile/4096x4096x4096/128x128x64"].checked
    assert by["matmul/cublas/4096x4096x4096"].max_rel_err == pytest.approx(1e-7)
    last = by["matmul/cublas/8192x8192x8192"]
    assert not last.checked
    assert last.max_rel_err is None     # NaN is no number to record
    no_report, _, _ = bench.build_cases(matmul_results(), None)
    assert not any(c.checked for c in no_report)


def test_bandwidth_cases_against_cupy_and_the_copy():
    results = {
        "reference": {"softmax": "cupy"},
        "ceilings": {"gbps": "copy/memcpy/268435456"},
        "cases": [
            case("softmax/tile/1024x128/8x128", "softmax", "tile", [1024, 128], 0.5, nbytes=1 << 30),
            case("softmax/cupy/1024x128", "softmax", "cupy", [1024, 128], 2.0, nbytes=1 << 30),
            case("copy/memcpy/268435456", "copy", "memcpy", [1 << 28], 0.25, nbytes=2 << 30),
        ],
    }
    cases, ceilings, repeat = bench.build_cases(results, None)
    by = {c.key: c for c in cases}
    assert by["softmax/tile/1024x128/8x128"].pct_of_reference == pytest.approx(400.0)
    assert by["softmax/tile/1024x128/8x128"].pct_of_ceiling == pytest.approx(25.0)
    assert by["copy/memcpy/268435456"].pct_of_reference is None
    assert ceilings == {"gbps": pytest.approx((2 << 30) / 0.25e-3 / 1e9)}
    assert repeat == {}
    assert all(c.tflops is None for c in cases)


@pytest.mark.parametrize("breakage", ["no-cases", "no-samples", "unknown-ceiling", "ceiling-without-rate"])
def test_malformed_results_raise(breakage):
    results = matmul_results()
    if breakage == "no-cases":
        del results["cases"]
    elif breakage == "no-samples":
        results["cases"][0]["samples_ms"] = []
    elif breakage == "unknown-ceiling":
        results["ceilings"] = {"tflops": "matmul/cublas/1x1x1"}
    else:
        results["ceilings"] = {"gbps": "matmul/cublas/8192x8192x8192"}
    with pytest.raises((KeyError, TypeError, ValueError)):
        bench.build_cases(results, None)


def committed_bench_records() -> list[Path]:
    return sorted(p for p in (REPO / "runs").glob("*-bench-*.json"))


@pytest.mark.parametrize("path", committed_bench_records() or ["none"], ids=lambda p: getattr(p, "stem", p))
def test_committed_records_rebuild_from_their_evidence(path):
    """Every committed bench record: its results file, captured on a GPU, still turns into
    the same cases (same medians, same % of the reference), and the head-to-head ratios
    it states come out of the same samples again."""
    if path == "none":
        pytest.skip("no committed bench records under runs/")
    rec = load_record(path)
    assert rec.results_file is not None
    results = json.loads((REPO / rec.results_file.path).read_text())
    report_ = CheckReport.model_validate_json((REPO / rec.report_file.path).read_text()) if rec.report_file else None
    cases, ceilings, repeat = bench.build_cases(results, report_)
    assert [c.key for c in cases] == [c.key for c in rec.cases]
    assert ceilings == rec.ceilings
    assert repeat
    for new, old in zip(cases, rec.cases, strict=True):
        assert (new.median_ms, new.pct_of_reference, new.checked) == (old.median_ms, old.pct_of_reference, old.checked)
        # statistics.stdev is correctly rounded from Python 3.11 on; 3.10's may differ in the last bit
        assert math.isclose(new.spread, old.spread, rel_tol=1e-15), (new.spread, old.spread)
        if rec.bench_version >= 3:   # the clock and power come out of the same readings again
            assert new.load == old.load
            assert new.roofline == old.roofline
        assert new.repeats >= 20
        assert new.min_ms <= new.median_ms <= new.max_ms
        assert (new.tflops is None) != (new.gbps is None)
        assert new.pct_of_ceiling is not None
        if new.name != "copy":
            assert new.checked
    assert bench.head_to_head(results) == rec.head_to_head
    if rec.bench_version >= 3:
        assert bench.load_unavailable(results, cases) == rec.load_unavailable


# --- records -----------------------------------------------------------------------


def environment() -> Environment:
    from fixture_records import (
        toolchain,  # tests/data/records, on sys.path via conftest
    )

    t = Transcript(path="evidence/FIXTURE-bench-env/pip-freeze.txt", sha256="0" * 64, bytes=0)
    return Environment(environment_version=1,
                       session_id="FIXTURE-bench-env", gpu=None, toolchain=toolchain(), toolchain_env="clean",
                       versions={"python": "3.12.3"}, packages={"cuda-tile": "1.7.0"}, env={},
                       pip_freeze=t, nvidia_smi=None, nvidia_smi_query=None)


def test_record_round_trip(tmp_path):
    cases, ceilings, repeat = bench.build_cases(matmul_results(), report())
    now = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
    t = Transcript(path="evidence/FIXTURE-bench/x.txt", sha256="0" * 64, bytes=0)
    step = Step(step_version=1,
                name="matmul_bench", argv=["python3", "kernels/bench/matmul_bench.py"], started=now, ended=now,
                duration_s=1.0, exit_code=0, stdout=t, stderr=t)
    record = BenchRecord(
        schema_version=1, kind="bench", bench_version=2, run_id="FIXTURE-20261129T120000Z-bench-00000001",
        created=now,
        tileproof_version="0.1.0", git=GitState(commit=None, dirty=True),
        host=HostFacts(system="fixture", release="6", machine="x86_64", python="3.12", cpu_count=16),
        environment=environment(), program="kernels/bench/matmul_bench.py", sources=[], step=step,
        report=report(), report_file=t, results_file=t, gpu_before=t, gpu_after=t, cases=cases,
        ceilings=ceilings, repeat_spread=repeat, verdict="passed", reason="FIXTURE: built by a test",
    )
    loaded = load_record(write_record(tmp_path, record))
    assert isinstance(loaded, BenchRecord)
    assert loaded.seal == seal_of(loaded)
    assert loaded.model_copy(update={"seal": ""}) == record
    assert loaded.cases[0].config == {"grid": [8, 8, 1]}


# --- the command, on this machine ------------------------------------------------------


@pytest.fixture
def tree(tmp_path):
    shutil.copytree(REPO / "kernels", tmp_path / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def args(root, *program, quick=False):
    return cli_args("bench", "--root", str(root), *(a for p in program for a in ("--program", p)),
                    *(["--quick"] if quick else []))


@no_gpu
def test_no_gpu_bench_is_recorded_and_fails(tree, capsys, monkeypatch):
    monkeypatch.delenv("CUDA_TILE_CACHE_DIR", raising=False)
    assert bench_cmd.run(args(tree)) == 1
    out = capsys.readouterr().out
    assert "no usable GPU" in out
    assert "0/2 programs passed" in out
    records = load_records(tree)
    assert sorted(r.program for r in records) == ["kernels/bench/matmul_bench.py", "kernels/bench/softmax_bench.py"]
    for rec in records:
        assert isinstance(rec, BenchRecord)
        assert rec.seal == seal_of(rec)
        assert rec.verdict == "no-gpu"
        assert rec.step.exit_code == 1
        assert rec.report
        assert rec.report.gate == "no-gpu"
        assert rec.report_file is not None
        assert rec.step.stdout.path.endswith("-gate-stdout.txt")
        assert rec.results_file is None
        assert rec.cases == []
        assert rec.gpu_before is None
        assert "--results" in rec.step.argv
        assert rec.step.argv[-2] == "--report"
        names = {s.path for s in rec.sources}
        assert {rec.program, "kernels/harness.py", "kernels/tolerances.py", "kernels/bench/jit.py",
                "kernels/bench/timing.py"} <= names
        cache = rec.environment.env["CUDA_TILE_CACHE_DIR"]
        assert not os.path.exists(cache), "the command's own JIT cache is removed afterwards"
    assert "CUDA_HOME" not in records[0].environment.env


def test_unknown_program_is_one_line(tree):
    with pytest.raises(TileproofError, match="no such bench program") as e:
        bench_cmd.run(args(tree, "matmull"))
    assert "\n" not in str(e.value)
    assert "matmul_bench" in str(e.value)


@pytest.mark.parametrize("name", ["matmul", "matmul_bench", "matmul_bench.py", "kernels/bench/matmul_bench.py"])
def test_select_by_any_name(name):
    assert [p.name for p in bench.select(REPO, [name])] == ["matmul_bench.py"]


def test_sources_follow_imports():
    got = [p.relative_to(REPO).as_posix() for p in bench.sources(REPO, BENCH / "softmax_bench.py")]
    assert got[0] == "kernels/bench/softmax_bench.py"
    assert set(got[1:]) == {"kernels/bench/entry.py", "kernels/bench/gpu_load.py", "kernels/bench/jit.py",
                            "kernels/bench/timing.py", "kernels/harness.py",
                            "kernels/tolerances.py", "kernels/tile_matmul_softmax.py", "kernels/online_softmax.py"}


def test_gpu_state_falls_back_to_the_new_field_name(tmp_path):
    """Drivers that renamed clocks_throttle_reasons answer the second query."""
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ncase \"$1\" in *throttle*) echo 'Field is not a valid field' >&2; exit 2;; esac\n"
                    "echo 'index, clocks.current.sm [MHz], pstate'\necho '0, 1980 MHz, P0'\n")
    fake.chmod(0o755)
    t = bench.gpu_state(tmp_path, "r1", "before", {"PATH": str(fake.parent)})
    assert t.path == "evidence/r1/nvidia-smi-before.csv"
    assert "1980 MHz" in (tmp_path / t.path).read_text()
    assert bench._state_line(tmp_path, t) == "0, 1980 MHz, P0"
    assert bench.gpu_state(tmp_path, "r2", "after", {"PATH": str(tmp_path / "none")}) is None


# --- the programs, without a GPU ---------------------------------------------------------


def bench_module(name: str):
    """A module of kernels/bench/ (the programs import them by plain name)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_program_{name}", BENCH / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["matmul_bench.py", "softmax_bench.py"])
def test_programs_import_without_gpu(name):
    had_cupy = "cupy" in sys.modules
    module = load(name)
    assert ("cupy" in sys.modules) == had_cupy, "importing a program must not import cupy"
    assert callable(module.main)
    assert module.configs


def test_matmul_plan_covers_the_issue():
    m = load("matmul_bench.py")
    plan = m.configs(m.TILES)
    for t in [(64, 64, 32), (128, 128, 32), (128, 128, 64), (128, 256, 64), (256, 128, 64)]:
        assert m.Config("tile", t) in plan, "the course kernel sweeps every required tile as written"
    assert {c.variant for c in plan} == {"tile", "grouped", "persistent"}
    assert {(4096,) * 3, (8192,) * 3} <= set(m.SIZES)
    assert len(m.SIZES) >= 3
    assert m.ROUNDS * m.LAUNCHES >= 20
    assert len({c.key for c in plan}) == len(plan)
    assert m.Config("persistent", (128, 256, 64), (("num_worker_warps", 8), ("occupancy", 1))).key == \
        "persistent/128x256x64+warps8+occ1"
    assert m.Config.from_dict(plan[-1].to_dict()) == plan[-1]


def test_matmul_plan_tries_a_cluster_and_sizes_persistent_grids_by_it(monkeypatch):
    m = load("matmul_bench.py")
    cluster = m.Config("grouped", (256, 128, 64), (("num_ctas", 2),))
    assert cluster in m.configs(m.TILES)
    assert cluster.tag == "256x128x64+ctas2"
    assert cluster.ctas == 2

    class Kernel:
        def replace_hints(self, **hints):
            return ("kernel with", hints)

    m._BASE_KERNELS["persistent"] = Kernel()
    launched = []
    monkeypatch.setattr(m.ct, "launch", lambda stream, grid, kernel, args: launched.append((grid, kernel)))

    class C:
        shape = (4096, 4096)

    class Cp:
        class cuda:
            get_current_stream = staticmethod(lambda: "stream")

    for ctas, blocks in [(1, 132), (2, 66)]:
        cfg = m.Config("persistent", (128, 256, 64), (("num_ctas", ctas), ("occupancy", 1)))
        launch, grid = m.launcher(Cp, cfg, None, None, C(), 132)
        launch()
        assert grid == (blocks, 1, 1)
        assert launched[-1][0] == grid
        assert launched[-1][1] == ("kernel with", {"num_ctas": ctas, "occupancy": 1})


class FakeDriver:
    """cupy.cuda.driver for one loaded function with fixed attributes."""

    def __init__(self, attrs, blocks=1, fail=None):
        self.attrs, self.blocks, self.fail, self.calls = attrs, blocks, fail, []

    def moduleLoadData(self, cubin):
        self.calls.append(("load", cubin))
        return "module"

    def moduleGetFunction(self, module, symbol):
        if self.fail:
            raise RuntimeError(self.fail)
        self.calls.append(("function", symbol))
        return "fn"

    def funcGetAttribute(self, attr, fn):
        return self.attrs[attr]

    def occupancyMaxActiveBlocksPerMultiprocessor(self, fn, threads, dynamic_smem):
        self.calls.append(("occupancy", threads, dynamic_smem))
        return self.blocks

    def moduleUnload(self, module):
        self.calls.append(("unload", module))


def fake_cp(driver):
    class Cp:
        class cuda:
            pass
    Cp.cuda.driver = driver
    return Cp


def test_compile_hook_keeps_the_cubin_and_the_driver_reads_it():
    jit = bench_module("jit")

    class Kernel:
        def _compile(self, signature, context, compute_capability=None):
            return b"CUBIN", "symbol_1", None, ()

    k = Kernel()
    got = jit.capture_cubin(k)
    assert got == {}
    assert k._compile("sig", "ctx") == (b"CUBIN", "symbol_1", None, ())
    assert got == {"cubin": b"CUBIN", "symbol": "symbol_1"}
    driver = FakeDriver({0: 384, 1: 229560, 3: 16, 4: 168})
    assert jit.resources(fake_cp(driver), got) == {"max_threads_per_block": 384, "shared_bytes": 229560,
                                                   "local_bytes": 16, "registers": 168, "blocks_per_sm": 1}
    assert driver.calls == [("load", b"CUBIN"), ("function", "symbol_1"), ("occupancy", 384, 0), ("unload", "module")]


def test_resources_say_why_not():
    jit = bench_module("jit")
    assert jit.capture_cubin(object()) == {"error": "this cuTile has no Kernel._compile hook"}
    assert "not compiled in this process" in jit.resources(fake_cp(FakeDriver({})), {})["error"]
    driver = FakeDriver({}, fail="CUDA_ERROR_NOT_FOUND")
    got = {"cubin": b"x", "symbol": "s"}
    assert jit.resources(fake_cp(driver), got) == {"error": "RuntimeError: CUDA_ERROR_NOT_FOUND"}
    assert driver.calls[-1] == ("unload", "module"), "the module is unloaded even when reading fails"


def test_compile_worker_failure_is_an_answer():
    """A worker that cannot compile (here: a config the program does not know) says why."""
    jit = bench_module("jit")
    spec = {"config": {"variant": "nope", "tiles": [1, 1, 1], "hints": {}}, "sizes": [[16, 16, 16]]}
    answer = jit.warm(str(BENCH / "matmul_bench.py"), {"bad": spec}, timeout_s=120)["bad"]
    assert answer["first_launch_ms"] is None
    assert answer["error"].startswith("worker exit 1:")


class FakeTimer:
    """Runs the launch once per call; every launch 'takes' 1 ms."""

    def __init__(self, timing):
        self.timing = timing

    def batch(self, launch, launches, warmup_ms):
        launch()
        return [1.0] * launches, 3


def test_interleave_rotates_the_order():
    timing = bench_module("timing")
    calls = []
    cases = [timing.Case(key=k, launch=lambda k=k: calls.append(k), info={}) for k in "abc"]
    timing.interleave(FakeTimer(timing), cases, rounds=3, launches=4)
    assert "".join(calls) == "abcbcacab"
    assert all(c.samples_ms == [1.0] * 12 and c.round_medians_ms == [1.0] * 3 for c in cases)
    assert cases[0].to_dict()["warmup_launches"] == [3, 3, 3]
    assert timing.spread([1.0, 1.0]) == 0.0
    assert timing.spread([2.0]) == 0.0


def test_interleave_in_a_seeded_random_order():
    import random

    timing = bench_module("timing")
    runs = []
    for _ in range(2):
        calls = []
        cases = [timing.Case(key=k, launch=functools.partial(calls.append, k), info={}) for k in "abcdef"]
        timing.interleave(FakeTimer(timing), cases, rounds=5, launches=2, order=random.Random(7))
        runs.append("".join(calls))
        rounds = [runs[-1][i:i + 6] for i in range(0, 30, 6)]
        assert all(sorted(r) == list("abcdef") for r in rounds), "every case once per round"
        assert len(set(rounds)) > 1, "the order changes between rounds"
    assert runs[0] == runs[1], "the same seed gives the same order"


class CountingTimer:
    """timing.Timer's warm-up logic over a fake clock: each launch 'takes' ms_each."""

    def __init__(self, timing, ms_each):
        self.ms_each, self.launched = ms_each, 0
        self.warm = timing.Timer.warm.__get__(self)

    def timed(self, launch, launches):
        self.launched += launches
        return [self.ms_each] * launches


class LoggingCp:
    """Just enough cupy for timing.Timer: memsets, events and launches go to one log."""

    def __init__(self, flush_ms):
        log = self.log = []

        class Event:
            def record(self, stream):
                log.append("E")

            def synchronize(self):
                pass

        class runtime:
            @staticmethod
            def memsetAsync(ptr, value, nbytes, stream):
                log.append("F")

        class cuda:
            pass

        cuda.Event = Event
        cuda.runtime = runtime
        cuda.get_current_stream = staticmethod(lambda: type("S", (), {"ptr": 0})())
        cuda.get_elapsed_time = staticmethod(lambda start, end: flush_ms)
        self.cuda = cuda
        self.uint8 = "uint8"

    def empty(self, nbytes, dtype):
        return type("Buf", (), {"nbytes": nbytes, "data": type("D", (), {"ptr": 0})()})()


def test_timed_batches_start_behind_lead_in_work():
    """The GPU must already be busy when the first timed launch is queued: LEAD_IN_MS of
    flushes go first, untimed, then flush, event, launch, event for every sample."""
    timing = bench_module("timing")
    cp = LoggingCp(flush_ms=0.125)
    timer = timing.Timer(cp)
    assert timer.flush_ms == 0.125
    assert timer.lead_in_flushes == 16 == timing.LEAD_IN_MS / 0.125
    cp.log.clear()
    timer.timed(lambda: cp.log.append("L"), 2)
    assert "".join(cp.log) == "F" * 16 + "FELE" * 2
    assert timing.Timer(LoggingCp(flush_ms=5.0)).lead_in_flushes == 1, "at least one"


def test_alternate_launches_the_cases_in_turn():
    timing = bench_module("timing")
    cp = LoggingCp(flush_ms=1.0)
    timer = timing.Timer(cp)
    cases = [timing.Case(key=k, launch=lambda k=k: cp.log.append(k), info={}) for k in "ab"]
    cp.log.clear()
    timing.alternate(timer, cases, cycles=timing.PAIRED_CHUNK + 3, warmup_ms=0.5)
    launches = "".join(x for x in cp.log if x in "ab")
    assert launches == "ab" + "ab" * (timing.PAIRED_CHUNK + 3), "one warm-up cycle, then the timed cycles"
    assert [len(c.samples_ms) for c in cases] == [timing.PAIRED_CHUNK + 3] * 2
    assert [len(c.round_medians_ms) for c in cases] == [2, 2]
    assert cases[0].warmup_launches == [1]


@pytest.mark.parametrize("ms_each,expected", [(100.0, 3), (1.7, 148), (0.03, 1000), (1000.0, 1)],
                         ids=["slow-case", "8192-matmul", "tiny-case-capped", "one-is-enough"])
def test_warm_up_runs_the_case_for_its_time(ms_each, expected):
    timing = bench_module("timing")
    t = CountingTimer(timing, ms_each)
    assert t.warm(lambda: None, timing.WARMUP_MS) == expected == t.launched


# --- on a GPU --------------------------------------------------------------------------------


@gpu
def test_quick_softmax_bench_passes_on_this_gpu(tree):
    assert bench_cmd.run(args(tree, "softmax", quick=True)) == 0
    [rec] = load_records(tree)
    assert rec.verdict == "passed"
    assert rec.cases
    assert rec.ceilings["gbps"] > 0
    assert all(c.checked for c in rec.cases if c.name != "copy")
    assert rec.gpu_before is not None
    assert rec.gpu_after is not None


# --- rooflines and second looks (bench_version 2) ---------------------------------------


def committed_results(run_id: str) -> tuple[BenchRecord, dict, CheckReport | None]:
    rec = load_record(REPO / "runs" / f"{run_id}.json")
    results = json.loads((REPO / rec.results_file.path).read_text())
    report_ = CheckReport.model_validate_json((REPO / rec.report_file.path).read_text()) if rec.report_file else None
    return rec, results, report_


def rebuilt(results: dict, report_: CheckReport | None):
    cases, ceilings, _ = bench.build_cases(results, report_)
    paired = bench.head_to_head(results)
    return {c.key: c for c in bench.second_looks(results, cases, paired)}, ceilings


def test_committed_softmax_evidence_is_bytes_bound_against_its_copy():
    """The H200 softmax record (bench_version 1) rebuilt: every case is bound by bytes and measured
    against the device copy of the same run; the issue's 63.0% comes out, and nothing is near 95%."""
    rec, results, report_ = committed_results("20261201T092610Z-bench-55789877")
    by, ceilings = rebuilt(results, report_)
    assert rec.bench_version == 1, "old records stay as written"
    assert all(c.roofline is None for c in rec.cases), "old records stay as written"
    assert all(c.roofline.bound == "bytes" and c.roofline.ceiling == "device copy" for c in by.values())
    assert all(c.roofline.ceiling_key == "copy/memcpy/268435456" for c in by.values())
    best = by["softmax/tile/2097152x128/128x128"]
    assert best.roofline.pct_of_ceiling == pytest.approx(63.0, abs=0.05)
    assert best.roofline.floor_ms == pytest.approx(2 * (1 << 30) / (ceilings["gbps"] * 1e9) * 1e3)
    assert by["online_softmax/tile/4096x100000/1x4096"].roofline.pct_of_ceiling == pytest.approx(29.5, abs=0.05)
    assert by["copy/memcpy/268435456"].roofline.pct_of_ceiling == pytest.approx(100.0)
    assert not any(c.second_look for c in by.values()), "the copy itself is never flagged against itself"


def test_committed_matmul_evidence_flags_the_kernel_that_beat_cublas():
    """The H200 matmul record rebuilt: at 8192^3 the persistent kernel's 102.8% of cuBLAS head to head
    is past the control (100.0% [99.9, 100.1]), so it is flagged for a second look; at 4096^3 its 100.0%
    is inside the control's band (100.1% [99.7, 100.5]) and is not. The record has no copy and no peak,
    so the FLOP ceiling is the largest cuBLAS product."""
    _rec, results, report_ = committed_results("20261201T092413Z-bench-bbc58257")
    by, _ = rebuilt(results, report_)
    big = by["matmul/persistent/8192x8192x8192/128x256x32+warps8+occ1"]
    assert big.second_look is not None
    assert big.second_look.rule == "above-reference"
    assert big.second_look.value == pytest.approx(102.8, abs=0.05)
    assert big.second_look.threshold == pytest.approx(100.1, abs=0.05)
    assert big.second_look.basis.startswith("head to head, 200 cycles; control 100.0% [99.9, 100.1]")
    assert "measure it again" in big.second_look.text()
    assert by["matmul/persistent/4096x4096x4096/128x256x32+warps8+occ1"].second_look is None
    assert [k for k, c in by.items() if c.second_look] == [big.key]
    for c in by.values():
        assert c.roofline.bound == "flops"
        assert c.roofline.ceiling == "largest cuBLAS product"
        assert c.roofline.ceiling_key == "matmul/cublas/8192x8192x8192"


def case_results(*cases_, ceilings, peak=None, reference=None):
    return {"reference": reference or {}, "ceilings": ceilings, "peak": peak, "cases": list(cases_)}


COPY = case("copy/memcpy/1", "copy", "memcpy", [1], 1.0, nbytes=4 * 10 ** 9)   # 4000 GB/s, an H200's pace


@pytest.mark.parametrize("flops,nbytes,peak,want", [
    (mm(4096), 2 * 2 * 4096 ** 2 + 4 * 4096 ** 2, {"tflops": 1000.0}, ("flops", "dense peak")),
    (mm(64), 2 * 2 * 64 ** 2 + 4 * 64 ** 2, {"tflops": 1e9}, ("bytes", "device copy")),
    (mm(4096), 2 * 2 * 4096 ** 2 + 4 * 4096 ** 2, None, ("flops", "largest cuBLAS product")),
    (None, 1 << 30, {"tflops": 1000.0}, ("bytes", "device copy")),
], ids=["big-matmul-peak", "tiny-matmul-bytes", "no-peak-falls-back-to-cublas", "softmax"])
def test_roofline_names_the_larger_floor(flops, nbytes, peak, want):
    kernel = case("x/tile/1/8x8x8", "x", "tile", [1], 0.5, flops=flops, nbytes=nbytes, tiles=[8, 8, 8])
    ref = case("matmul/cublas/1", "matmul", "cublas", [1], 0.25, flops=mm(4096))
    results = case_results(kernel, ref, COPY, ceilings={"tflops": "matmul/cublas/1", "gbps": "copy/memcpy/1"},
                           peak=peak)
    cases, ceilings, _ = bench.build_cases(results, None)
    r = cases[0].roofline
    assert (r.bound, r.ceiling) == want
    t_flops = flops / (ceilings.get("peak_tflops", ceilings["tflops"]) * 1e12) * 1e3 if flops else 0.0
    t_bytes = nbytes / (ceilings["gbps"] * 1e9) * 1e3
    assert r.floor_ms == pytest.approx(max(t_flops, t_bytes))
    rate = cases[0].tflops if r.bound == "flops" else nbytes / 0.5e-3 / 1e9     # the case's median is 0.5 ms
    assert r.pct_of_ceiling == pytest.approx(100 * rate / r.ceiling_rate)
    assert r.text().startswith(f"{r.bound}-bound: ")


def test_no_ceiling_no_roofline():
    results = case_results(case("x/tile/1/8x8", "x", "tile", [1], 0.5, nbytes=1 << 20, tiles=[8, 8]), ceilings={})
    assert bench.build_cases(results, None)[0][0].roofline is None


@pytest.mark.parametrize("copy_pct,flagged", [(94.9, False), (95.1, True), (140.0, True)],
                         ids=["under", "just-over", "impossible"])
def test_second_look_above_95_percent_of_the_copy(copy_pct, flagged):
    ms = 100 / copy_pct                                   # COPY moves its bytes in 1 ms; this case the same bytes
    kernel = case("softmax/tile/1/8x8", "softmax", "tile", [1], ms, nbytes=4 * 10 ** 9, tiles=[8, 8])
    results = case_results(kernel, COPY, ceilings={"gbps": "copy/memcpy/1"})
    cases, _, _ = bench.build_cases(results, None)
    by = {c.key: c for c in bench.second_looks(results, cases, {})}
    look = by["softmax/tile/1/8x8"].second_look
    assert (look is not None) is flagged
    assert by["copy/memcpy/1"].second_look is None
    if look:
        assert look.rule == "above-copy"
        assert look.value == pytest.approx(copy_pct)
        assert look.threshold == 95.0
        assert look.basis == f"{40 * copy_pct:.0f} GB/s against the device copy's 4000 GB/s in the same run"


def test_second_look_above_cublas_uses_the_control_or_else_the_references_spread():
    shape = [4096] * 3
    ref_samples = [0.20 * (1 + 0.01 * ((i % 3) - 1)) for i in range(20)]   # cuBLAS, spread ~0.8%
    fast = case("matmul/persistent/4096x4096x4096/a", "matmul", "persistent", shape, 0.19, flops=mm(4096),
                tiles=[128, 256, 32])                                           # 105.3% of cuBLAS by medians
    close = case("matmul/persistent/4096x4096x4096/b", "matmul", "persistent", shape, 0.1995, flops=mm(4096),
                 tiles=[128, 256, 64])                                          # 100.25%: inside the spread
    ref = case("matmul/cublas/4096x4096x4096", "matmul", "cublas", shape, ref_samples, flops=mm(4096))
    results = case_results(fast, close, ref, ceilings={"tflops": "matmul/cublas/4096x4096x4096"},
                           reference={"matmul": "cublas"})
    cases, _, _ = bench.build_cases(results, None)
    by = {c.key: c for c in bench.second_looks(results, cases, {})}
    look = by[fast["key"]].second_look
    assert look.rule == "above-reference"
    assert look.basis.startswith("sweep medians; no control at this shape")
    assert look.threshold == pytest.approx(100 + 100 * by[ref["key"]].spread)
    assert by[close["key"]].second_look is None
    assert by[ref["key"]].second_look is None
    # Head to head, the paired ratio decides and the control's band is the threshold.
    control = bench.PairedRatio(reference=ref["key"], cycles=200, pct_of_reference=100.1, q1=99.8, q3=100.6,
                                control=True)
    paired = {close["key"]: bench.PairedRatio(reference=ref["key"], cycles=200, pct_of_reference=100.9, q1=100.7,
                                              q3=101.1),
              f"{ref['key']}/again": control}
    by = {c.key: c for c in bench.second_looks(results, cases, paired)}
    look = by[close["key"]].second_look
    assert look.value == pytest.approx(100.9)
    assert look.threshold == pytest.approx(100.6)
    assert look.basis == "head to head, 200 cycles; control 100.1% [99.8, 100.6] over 200 cycles"


def record_fields(run_id: str, ceilings: dict, repeat: dict) -> dict:
    """A FIXTURE matmul bench record's fields around its cases (``bench_version`` and ``cases`` are the test's)."""
    now = datetime(2026, 12, 1, tzinfo=timezone.utc)
    t = Transcript(path="evidence/FIXTURE-bench/x.txt", sha256="0" * 64, bytes=0)
    step = Step(step_version=1,
                name="matmul_bench", argv=["python3"], started=now, ended=now, duration_s=1.0, exit_code=0,
                stdout=t, stderr=t)
    return dict(schema_version=1, kind="bench", run_id=run_id, created=now, tileproof_version="0.1.0",
                git=GitState(commit=None, dirty=True),
                host=HostFacts(system="fixture", release="6", machine="x86_64", python="3.12", cpu_count=16),
                environment=environment(), program="kernels/bench/matmul_bench.py", sources=[], step=step,
                results_file=t, gpu_before=None, gpu_after=None, ceilings=ceilings, repeat_spread=repeat,
                verdict="passed", reason="FIXTURE")


def test_bench_version_decides_which_fields_a_record_may_hold(tmp_path):
    cases, ceilings, repeat = bench.build_cases(matmul_results(), report())
    fields = record_fields("FIXTURE-bench-v", ceilings, repeat)
    BenchRecord(**fields, bench_version=2, cases=cases)
    with pytest.raises(ValueError, match="before bench_version 2 hold no roofline"):
        BenchRecord(**fields, bench_version=1, cases=cases)
    bare = [c.model_copy(update={"roofline": None}) for c in cases]
    with pytest.raises(ValueError, match="give every case with a rate its roofline"):
        BenchRecord(**fields, bench_version=2, cases=bare)
    assert BenchRecord.model_validate({**fields, "cases": bare}, context=AS_READ).bench_version == 1  # read from a
    # file that names no bench_version: version 1 (a writer that names none writes BENCH_VERSION: test_store.py)
    committed = {r.run_id: r for r in map(load_record, committed_bench_records())}
    assert set(committed) >= V1_BENCH_RECORDS, "committed records are never deleted"
    assert all(committed[run_id].bench_version == 1 for run_id in V1_BENCH_RECORDS)


V1_BENCH_RECORDS = {"20261129T121531Z-bench-2397a91b", "20261129T121706Z-bench-888e6b02",
                    "20261129T131041Z-bench-5b8743d8", "20261129T131313Z-bench-a9e91bf3",
                    "20261129T131807Z-bench-852b09e8", "20261129T132035Z-bench-44c2599d",
                    "20261201T092413Z-bench-bbc58257", "20261201T092610Z-bench-55789877"}
"""The bench records committed before bench_version 2 (H200, 2026-11-29 and 2026-12-01): read as written,
version 1, whatever later records the tree gains."""


def test_summary_shows_each_cases_roofline_and_flag():
    _rec, results, report_ = committed_results("20261201T092413Z-bench-bbc58257")
    cases, ceilings, repeat = bench.build_cases(results, report_)
    paired = bench.head_to_head(results)
    lines = bench.summary(bench.second_looks(results, cases, paired), repeat, ceilings, paired)
    big = next(line for line in lines if "persistent/8192x8192x8192/128x256x32+warps8+occ1 " in line)
    assert big.endswith("SECOND-LOOK")
    assert "cuBLAS  " in big
    assert sum(1 for line in lines if ": second look: " in line) == 1


# --- the bench programs compile without a GPU ----------------------------------------------


EXPORTED = {"softmax_bench.py": ["softmax/persistent/64x128+occ2+stg", "online_softmax/l2/1x4096+occ1+rev+stg"],
            "matmul_bench.py": ["persistent/128x256x32+lat4+warps8+occ1@4000x5000x3000"]}
"""One config of each kind: a row softmax, an online softmax, a matmul at the ragged size (the whole
sweep plans, 94 softmax and 58 matmul exports, compile for sm_90 on a CPU machine: ``--export DIR --sweep``)."""


@pytest.mark.slow(reason="real tileiras exports of bench configurations: only the compiler says a config exports")
def test_bench_configs_export_for_sm90_without_a_gpu(tmp_path):
    """Configs of each program go through the same export workers ``PROGRAM --export DIR`` runs for
    every config of a plan (tileiras, no GPU), with the constraints a launch would give cuTile's JIT."""
    from concurrent.futures import ThreadPoolExecutor

    jit = bench_module("jit")

    def export(program: str) -> dict:
        specs = load(program)._export_specs("sweep")
        return jit.export_all(str(BENCH / program), {k: specs[k] for k in EXPORTED[program]}, str(tmp_path / program),
                              "sm_90", timeout_s=300)

    with ThreadPoolExecutor(len(EXPORTED)) as pool:
        done = dict(zip(EXPORTED, pool.map(export, EXPORTED), strict=True))
    for program, answers in done.items():
        for key in EXPORTED[program]:
            answer = answers[key]
            assert answer["error"] is None, (key, answer["error"])
            cubin = Path(answer["cubin"])
            assert cubin.is_file()
            assert cubin.stat().st_size > 1000
            assert cubin.parent == tmp_path / program
            res = answer["resources"][0]
            assert "error" in res or (res["local_bytes"] == 0 and res["registers"] > 0), (key, res)


def test_plans_hold_distinct_configs_and_the_bench_plan_is_swept():
    soft, mat = load("softmax_bench.py"), load("matmul_bench.py")
    for plan in (soft.configs("sweep"), soft.configs("bench"), mat.configs(mat.TILES, "sweep"), mat.configs(mat.TILES)):
        assert len({c.key for c in plan}) == len(plan)
    swept = {c.key for c in soft.configs("sweep")}
    course = {c.key for c in soft.configs("bench") if c.variant == "tile" and not c.hints}
    assert {c.key for c in soft.configs("bench")} - course <= swept, "every step the bench times was swept first"
    assert {c.key for c in mat.tuned()} <= {c.key for c in mat.configs(mat.TILES, "sweep")}
    assert mat.RAGGED in mat.SIZES
    assert all(d % 128 for d in mat.RAGGED)
    with pytest.raises(ValueError, match="unknown hint"):
        soft.config("softmax", "tile", (8, 128), occupancy=2, warp=1)
    with pytest.raises(ValueError, match="only the persistent kernel"):
        mat.hinted("grouped", (128, 128, 64), latency=4)
    assert soft.config("online_softmax", "l2", (1, 8192), rev=1, occupancy=1, stg=0).tag == "1x8192+occ1+rev"


# --- the GPU's clock and power while each case ran (bench_version 3) ---------------------------------


def sampler(**fake):
    import fake_gpu

    return bench_module("gpu_load").Sampler(fake_gpu.PCI_BUS_ID, nvml=fake_gpu.fake_pynvml(**fake))


def test_sampler_keeps_each_windows_readings_and_reads_as_each_batch_ends():
    import fake_gpu

    s = sampler()
    assert s.error is None
    assert (s.limits == {"pci_bus_id": fake_gpu.PCI_BUS_ID, "max_sm_clock_mhz": 1980,
                                            "power_limit_w": 700.0, "power_reading": "instant"})
    for phase in ("sweep", "sweep", "repeat"):
        with s.window((phase, "matmul/cublas/8192x8192x8192")):
            pass
    got = s.samples_of(("sweep", "matmul/cublas/8192x8192x8192"))
    assert got["sm_clock_mhz"] == [1515, 1515]
    assert got["power_w"] == [695.0, 695.0]
    assert got["reasons"] == [4, 4]
    assert len(s.samples_of(("repeat", "matmul/cublas/8192x8192x8192"))["sm_clock_mhz"]) == 1
    assert s.samples_of(("sweep", "never/timed")) is None, "the reading taken at start-up is in no window"
    about = s.describe()
    assert about["error"] is None
    assert about["reason_bits"]["4"] == "sw_power_cap"
    assert about["interval_ms"] == 20


def test_sampler_thread_reads_inside_a_window_and_stops():
    import time

    s = sampler()
    s.interval_s = 0.002
    with s.running():
        with s.window(("sweep", "a")):
            time.sleep(0.05)
        assert s._thread is not None
        assert s._thread.is_alive()
    assert s._thread is None
    assert len(s.samples_of(("sweep", "a"))["sm_clock_mhz"]) >= 3, "the thread read while the batch ran"


@pytest.mark.parametrize("fake, why", [
    (dict(fail_at="nvmlInit"), "NVML: RuntimeError: NVML: nvmlInit failed"),
    (dict(fail_at="nvmlDeviceGetClockInfo"), "nvmlDeviceGetClockInfo failed"),   # the first reading, at start-up
], ids=["init", "first-reading"])
def test_sampler_that_cannot_read_says_why_and_reads_nothing(fake, why):
    s = sampler(**fake)
    assert why in s.error
    assert s.limits == {}
    with s.running(), s.window(("sweep", "a")):
        pass
    assert s.samples_of(("sweep", "a")) is None
    assert s.describe()["error"] == s.error


def test_sampler_without_pynvml_or_a_bus_id(monkeypatch):
    gpu_load = bench_module("gpu_load")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert gpu_load.Sampler("0000:00:06.0").error.startswith("pynvml is not installed")
    import fake_gpu

    no_bus = gpu_load.Sampler(gpu_load.pci_bus_id(object()), nvml=fake_gpu.fake_pynvml())
    assert "no PCI bus id" in no_bus.error


def test_a_reading_that_fails_mid_run_ends_the_readings_and_says_so():
    s = sampler()
    with s.window(("sweep", "a")):
        pass
    s.nvml.nvmlDeviceGetClockInfo = lambda *_a: (_ for _ in ()).throw(RuntimeError("GPU is lost"))
    with s.window(("sweep", "b")):
        pass
    assert "GPU is lost" in s.error
    assert s.samples_of(("sweep", "a"))
    assert s.samples_of(("sweep", "b")) is None


ABOUT = {"max_sm_clock_mhz": 1980, "power_limit_w": 700.0, "power_reading": "instant", "error": None,
         "reason_bits": {"1": "gpu_idle", "4": "sw_power_cap"}}


def test_gpu_load_is_the_readings_quartiles_against_the_cards_limits():
    raw = {"sm_clock_mhz": [1400, 1500, 1500, 1600, 1980], "power_w": [600.0, 690.0, 700.0, 700.0, 710.0],
           "reasons": [4, 4, 4 | 0x200, 0, 1], "window_s": 0.5}
    load = bench.gpu_load(raw, ABOUT, {"tflops": 1070.5, "sm_clock_mhz": 1980.0}, flops_rate=650.0)
    c1, _, c3 = statistics.quantiles(raw["sm_clock_mhz"], n=4)
    p1, _, p3 = statistics.quantiles(raw["power_w"], n=4)
    assert (load.samples, load.sm_clock_mhz, load.power_w, load.window_s) == (5, 1500, 700, 0.5)
    assert (load.sm_clock_q1_mhz, load.sm_clock_q3_mhz, load.power_q1_w, load.power_q3_w) == (c1, c3, p1, p3)
    assert load.reasons == {"gpu_idle": 0.2, "other": 0.2, "sw_power_cap": 0.6}, "a bit without a name is 'other'"
    assert load.pct_of_power_limit == pytest.approx(100 * p1 / 700)
    assert load.pct_below_max_clock == pytest.approx(100 * (1 - c3 / 1980))
    assert load.pct_of_peak_at_clock == pytest.approx(100 * 650 / (1070.5 * 1500 / 1980))
    assert bench.gpu_load(raw, ABOUT, None, flops_rate=650.0).pct_of_peak_at_clock is None, "no peak's clock"
    assert bench.gpu_load(raw, ABOUT, {"tflops": 1070.5, "sm_clock_mhz": 1980.0}, None).pct_of_peak_at_clock is None
    one = bench.gpu_load({**raw, "sm_clock_mhz": [1500], "power_w": [690.0], "reasons": [4]}, ABOUT, None, None)
    assert (one.sm_clock_q1_mhz, one.sm_clock_mhz, one.sm_clock_q3_mhz) == (1500, 1500, 1500)
    for no in (None, {**raw, "sm_clock_mhz": []}):
        assert bench.gpu_load(no, ABOUT, None, None) is None
    assert bench.gpu_load(raw, {"error": "pynvml is not installed"}, None, None) is None
    with pytest.raises(ValueError, match="unequal length"):
        bench.gpu_load({**raw, "reasons": [4]}, ABOUT, None, None)


def test_bench_version_3_gives_every_rated_case_its_load_or_says_why():
    cases, ceilings, repeat = bench.build_cases(matmul_results(), report())
    assert all(c.load is None for c in cases), "a results file without readings gives no load"
    fields = dict(record_fields("FIXTURE-bench-v3", ceilings, repeat), cases=cases)
    with pytest.raises(ValueError, match="give every case with a rate its load, or say in load_unavailable why not"):
        BenchRecord(**fields, bench_version=3)
    why = bench.load_unavailable(matmul_results(), cases)
    assert why.startswith("the bench program wrote no GPU clock and power readings")
    assert BenchRecord(**fields, bench_version=3, load_unavailable=why).load_unavailable == why
    with pytest.raises(ValueError, match="before bench_version 3 hold no load"):
        BenchRecord(**fields, bench_version=2, load_unavailable=why)
    load = bench.gpu_load({"sm_clock_mhz": [1500], "power_w": [690.0], "reasons": [4], "window_s": 0.3}, ABOUT,
                          None, None)
    with_load = [c.model_copy(update={"load": load}) for c in cases]
    assert BenchRecord(**{**fields, "cases": with_load}, bench_version=3).load_unavailable is None
    with pytest.raises(ValueError, match="before bench_version 3 hold no load"):
        BenchRecord(**{**fields, "cases": with_load}, bench_version=2)
    assert bench.load_unavailable({"load": {"error": "NVML: lost"}}, cases).startswith("NVML: lost; no NVML reading")


def test_summary_and_best_lines_show_the_clock_and_power_each_case_ran_at():
    results = matmul_results()
    cases, ceilings, repeat = bench.build_cases(results, report())
    load = bench.gpu_load({"sm_clock_mhz": [1480, 1500], "power_w": [695.0, 699.0], "reasons": [4, 4],
                           "window_s": 0.3}, ABOUT, None, None)
    cases = [c.model_copy(update={"load": load}) for c in cases]
    lines = bench.summary(cases, repeat, ceilings)
    assert all("SM 1490/1980 MHz 697/700 W" in line for line in lines[1:1 + len(cases)])
    best = [line for line in lines if line.strip().startswith("best ")]
    assert best
    assert (all("SM 1490 of 1980 MHz, 697 of 700 W (instant; sw_power_cap 100%), 2 readings" in b
                        for b in best))


def test_sampler_finds_the_gpu_by_nvmls_spelling_of_its_bus_id_too():
    import fake_gpu

    nvml = fake_gpu.fake_pynvml()
    asked = []
    by_bus = nvml.nvmlDeviceGetHandleByPciBusId

    def nvml_spelling(bus):
        asked.append(bus)
        return by_bus(bus.replace("00000000:", "0000:")) if bus.startswith("00000000:") else by_bus("nowhere")

    nvml.nvmlDeviceGetHandleByPciBusId = nvml_spelling
    s = bench_module("gpu_load").Sampler("0000:00:06.0", nvml=nvml)
    assert s.error is None
    assert asked == ["0000:00:06.0", "00000000:00:06.0"]
