"""The bench programs end to end on a fake GPU: every plan runs, writes results the bench record
is built from, and a sweep leaves a config whose check fails out of the timing without losing the run.

A GPU call is scarce: a sweep that dies on a typo after three minutes of compiling costs the
call. So each program's body runs here in each pace (``--sweep``, ``--quick``) against
tests/fake_gpu.py: numpy-backed cupy, a simulated clock, ``ct.launch`` computing the kernel's
result with numpy (the kernels themselves are compiled, not run, by the export test in
test_bench.py), compile workers answered without starting a process. The results files go
through the same functions ``tileproof bench`` uses, into a bench record of the current version.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
import types
from datetime import datetime, timezone
from pathlib import Path

import fake_gpu
import pytest

from tileproof.bench import core as bench
from tileproof.records.models import BENCH_VERSION, BenchRecord, CheckReport, GitState, HostFacts, Step, Transcript

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "kernels" / "bench"
SOFTMAX_WRONG = (32, 128, 10, False)          # persistent 32x128+lat10+occ4+stg: answers wrongly here
MATMUL_WRONG = (128, 256, 32, 8, 10, True)     # persistent 128x256x32+lat10+warps8+occ1 (sweep only): likewise


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"dry_{name}", BENCH / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def gpu(monkeypatch):
    """The fake GPU wired into cuda.tile, cupy's cuBLAS binding, the harness gate and the JIT workers."""
    import cuda.tile as ct

    clock = fake_gpu.Clock()
    cp = fake_gpu.fake_cupy(clock)
    monkeypatch.setattr(ct, "launch", fake_gpu.fake_launch(clock, {SOFTMAX_WRONG, MATMUL_WRONG}))
    libs = types.ModuleType("cupy_backends.cuda.libs")
    libs.cublas = fake_gpu.fake_cublas(clock)
    for name, module in (("cupy_backends", types.ModuleType("cupy_backends")),
                         ("cupy_backends.cuda", types.ModuleType("cupy_backends.cuda")),
                         ("cupy_backends.cuda.libs", libs), ("pynvml", fake_gpu.fake_pynvml())):
        monkeypatch.setitem(sys.modules, name, module)
    return cp


def run(monkeypatch, gpu, program: str, tmp_path: Path, *flags: str, **constants):
    """Run one program's main() on the fake GPU; (exit code, results, check report)."""
    m = load(program)
    for name, value in constants.items():
        monkeypatch.setattr(m, name, value)
    monkeypatch.setattr(m.timing.Timer.__init__, "__defaults__", (1 << 16,))  # a 64 KiB "L2 flush"
    gate = m.harness.GateResult(m.harness.GATE_OK, "fake GPU", {"name": "Fake H200", "compute_capability": "9.0"},
                                gpu)
    monkeypatch.setattr(m.harness, "run_program", functools.partial(m.harness.run_program, probe=lambda: gate))

    def warm(program_file, specs, timeout_s, jobs=None, flag=None):
        assert program_file == str(BENCH / program)
        assert flag is None
        sizes = len(next(iter(specs.values())).get("sizes", [0]))
        return {key: {"first_launch_ms": [1000.0] * sizes, "wall_s": 5.0, "error": None,
                      "resources": [{"registers": 168, "local_bytes": 0}] * sizes if sizes > 1 else
                      {"registers": 64, "local_bytes": 0, "blocks_per_sm": 4}} for key in specs}

    monkeypatch.setattr(m.jit, "warm", warm)
    results, report = tmp_path / "results.json", tmp_path / "report.json"
    code = m.main(["--results", str(results), "--report", str(report), "--seed", "30", *flags])
    return code, json.loads(results.read_text()), CheckReport.model_validate_json(report.read_text())


def record_of(program: str, results: dict, report: CheckReport, passed: bool) -> BenchRecord:
    """The bench record ``tileproof bench`` would write from these files (bench.core's own functions)."""
    cases, ceilings, repeat = bench.build_cases(results, report)
    paired = bench.head_to_head(results)
    cases = bench.second_looks(results, cases, paired)
    no_load = bench.load_unavailable(results, cases)
    now = datetime(2026, 12, 1, tzinfo=timezone.utc)
    t = Transcript(path="evidence/FIXTURE/x.txt", sha256="0" * 64, bytes=0)
    step = Step(step_version=1, name=program, argv=["python3", program], started=now, ended=now, duration_s=1.0,
                exit_code=0 if passed else 1, stdout=t, stderr=t)
    from test_bench import environment  # the FIXTURE environment of the bench tests

    return BenchRecord(schema_version=1, kind="bench", bench_version=BENCH_VERSION, run_id="FIXTURE-bench-dry",
                       created=now, tileproof_version="0.1.0", git=GitState(commit=None, dirty=True),
                       host=HostFacts(system="fixture", release="6", machine="x86_64", python="3.12", cpu_count=16),
                       environment=environment(), program=f"kernels/bench/{program}", sources=[], step=step,
                       report=report, report_file=t, results_file=t, gpu_before=None, gpu_after=None, cases=cases,
                       ceilings=ceilings, repeat_spread=repeat, head_to_head=paired, load_unavailable=no_load,
                       verdict="passed" if passed else "failed", reason="FIXTURE: a dry run")


SOFTMAX_SHAPES = dict(ROW_SHAPE=(512, 128), ONLINE_SHAPE=(8, 20000), QUICK_ROW_SHAPE=(256, 128),
                      QUICK_ONLINE_SHAPE=(4, 20000), COPY_BYTES=1 << 20)
MATMUL_SHAPES = dict(SIZES=((256, 256, 256), (512, 512, 512), (512, 256, 384), (200, 136, 100)),
                     QUICK_SIZES=((256, 256, 256), (200, 136, 100)), COPY_BYTES=1 << 20)


def test_softmax_sweep_times_every_config_and_leaves_out_the_wrong_one(monkeypatch, gpu, tmp_path):
    m = load("softmax_bench.py")
    code, results, report = run(monkeypatch, gpu, "softmax_bench.py", tmp_path, "--sweep", **SOFTMAX_SHAPES)
    assert code == 1, "a failed check is never hidden: the sweep exits 1"
    wrong = "softmax/persistent/512x128/32x128+lat10+occ4+stg"
    assert [s["key"] for s in results["skipped"]] == [wrong]
    assert "check failed" in results["skipped"][0]["reason"]
    timed = {c["key"] for c in results["cases"] if c["phase"] == "sweep"}
    want = {m.case_key(c, c.name, (512, 128) if c.name == "softmax" else (8, 20000)) for c in m.configs("sweep")}
    assert timed == (want - {wrong}) | {"softmax/cupy/512x128", "online_softmax/cupy/8x20000", "copy/memcpy/262144"}
    assert results["method"]["plan"] == "sweep"
    assert results["method"]["rounds"] == m.SWEEP.rounds
    assert all(len(c["samples_ms"]) == m.SWEEP.rounds * m.SWEEP.launches for c in results["cases"])
    persistent = next(c for c in results["cases"] if c["key"] == "softmax/persistent/512x128/64x128+occ2+stg")
    assert persistent["config"]["grid"] == [min(512 // 64, 132 * 2), 1, 1]
    rec = record_of("softmax_bench.py", results, report, passed=False)
    assert all(c.roofline is not None and c.roofline.bound == "bytes" for c in rec.cases)
    assert all(c.roofline.ceiling_key == "copy/memcpy/262144" for c in rec.cases)


def test_softmax_bench_plan_passes(monkeypatch, gpu, tmp_path):
    m = load("softmax_bench.py")
    code, results, report = run(monkeypatch, gpu, "softmax_bench.py", tmp_path, "--quick", **SOFTMAX_SHAPES)
    assert code == 0
    assert report.passed
    assert results["skipped"] == []
    assert len(report.checks) == len(m.configs("bench")) + 2          # every config and both cupy references
    rec = record_of("softmax_bench.py", results, report, passed=True)
    assert {c.key for c in rec.cases} >= {"softmax/tile/256x128/8x128", "online_softmax/tile/4x20000/2x1024"}


def test_matmul_sweep_pairs_the_contenders_at_every_size(monkeypatch, gpu, tmp_path):
    m = load("matmul_bench.py")
    code, results, report = run(monkeypatch, gpu, "matmul_bench.py", tmp_path, "--sweep", **MATMUL_SHAPES)
    assert code == 1
    assert [s["key"] for s in results["skipped"]] == [f"matmul/persistent/{z}/128x256x32+lat10+warps8+occ1"
                                                      for z in ("256x256x256", "512x512x512", "512x256x384",
                                                                "200x136x100")]
    paired = [c for c in results["cases"] if c["phase"] == "paired"]
    for size in MATMUL_SHAPES["SIZES"]:
        at = [c for c in paired if tuple(c["shape"]) == size]
        assert sum(1 for c in at if c.get("twin_of")) == 1, "every size has its cuBLAS control"
        assert len(at) >= 1 + m.TOP_OVERALL + 1
        assert all(len(c["samples_ms"]) == m.SWEEP.cycles for c in at)
    assert results["peak"]["tflops"] == pytest.approx(132 * 1980e6 * 4096 / 1e12)
    assert results["ceilings"] == {"tflops": "matmul/cublas/512x512x512", "gbps": "copy/memcpy/262144"}
    rec = record_of("matmul_bench.py", results, report, passed=False)
    assert rec.ceilings["peak_tflops"] == pytest.approx(results["peak"]["tflops"])
    kernels = [c for c in rec.cases if c.name == "matmul"]
    for c in kernels:  # these sizes are tiny: FLOPs bound them only where flops/peak >= bytes/copy
        flops, nbytes = 2 * c.shape[0] * c.shape[1] * c.shape[2], 2 * (c.shape[0] + c.shape[1]) * c.shape[2]
        nbytes += 4 * c.shape[0] * c.shape[1]
        by_flops = flops / rec.ceilings["peak_tflops"] / 1e12 >= nbytes / rec.ceilings["gbps"] / 1e9
        assert c.roofline.bound == ("flops" if by_flops else "bytes")
        assert c.roofline.ceiling == ("dense peak" if by_flops else "device copy")
    assert next(c for c in rec.cases if c.name == "copy").roofline.ceiling == "device copy"
    assert set(rec.head_to_head)
    assert sum(p.control for p in rec.head_to_head.values()) == 4
    for c in rec.cases:  # a flag is always a tile kernel above its control's band
        if c.second_look:
            assert c.tiles is not None
            assert c.second_look.rule == "above-reference"
            assert c.second_look.value > c.second_look.threshold


def test_matmul_bench_plan_passes(monkeypatch, gpu, tmp_path):
    m = load("matmul_bench.py")
    code, results, report = run(monkeypatch, gpu, "matmul_bench.py", tmp_path, "--quick", **MATMUL_SHAPES)
    assert code == 0
    assert report.passed
    plan = m.configs(m.QUICK_TILES)
    assert len(report.checks) == (len(plan) + 1) * len(MATMUL_SHAPES["QUICK_SIZES"])
    record_of("matmul_bench.py", results, report, passed=True)


# --- the bench plans at the bench's own pace, and what the GPU did meanwhile ---------------------------


def assert_loaded(rec: BenchRecord) -> None:
    """Every case with a rate carries the fake card's NVML readings: at its power limit, below its clock."""
    assert rec.load_unavailable is None
    for c in rec.cases:
        load = c.load
        assert load is not None, c.key
        assert load.samples >= m_rounds(rec), c.key   # at least one reading per batch
        assert (load.max_sm_clock_mhz, load.power_limit_w, load.power_reading) == (1980, 700, "instant")
        assert load.sm_clock_mhz == 1515
        assert load.power_w == 695
        assert load.reasons == {"sw_power_cap": 1.0}
        assert c.pct_of_power_limit == pytest.approx(99.29, abs=0.01)
        assert c.pct_below_max_clock == pytest.approx(100 * (1 - 1515 / 1980))


def m_rounds(rec: BenchRecord) -> int:
    return 5 if rec.cases and rec.cases[0].repeats >= 100 else 2


def test_matmul_bench_plan_at_the_bench_pace_pairs_every_size_and_reads_the_gpu(monkeypatch, gpu, tmp_path):
    m = load("matmul_bench.py")
    code, results, report = run(monkeypatch, gpu, "matmul_bench.py", tmp_path, **MATMUL_SHAPES)
    assert code == 0
    assert report.passed
    assert results["skipped"] == []
    plan = m.configs(m.TILES)
    assert len(report.checks) == (len(plan) + 1) * len(MATMUL_SHAPES["SIZES"])
    assert set(m.tuned()) | set(m.unswept()) <= set(plan)
    assert len(m.unswept()) <= 2
    assert results["method"]["plan"] == "bench"
    assert (all(
        len(c["samples_ms"]) == m.ROUNDS * m.LAUNCHES for c in results["cases"] if c["phase"] != "paired"))
    paired = [c for c in results["cases"] if c["phase"] == "paired"]
    for size in MATMUL_SHAPES["SIZES"]:
        at = [c for c in paired if tuple(c["shape"]) == size]
        assert sum(1 for c in at if c.get("twin_of")) == 1
        assert all(len(c["samples_ms"]) == m.PAIRED_CYCLES for c in at)
        assert {c["variant"] for c in at} == {"tile", "grouped", "persistent", "cublas"}
    assert all(c["load"] is None for c in paired), "no case has a batch of its own head to head"
    assert results["load"]["power_limit_w"] == 700
    assert results["load"]["error"] is None
    assert results["peak"]["sm_clock_mhz"] == 1980
    rec = record_of("matmul_bench.py", results, report, passed=True)
    assert_loaded(rec)
    for c in rec.cases:   # the fake card's clock is 1515 of the peak's 1980 MHz: the peak at that clock is smaller
        if c.roofline.bound == "flops":
            assert c.pct_of_peak_at_clock == pytest.approx(100 * c.tflops / (rec.ceilings["peak_tflops"] * 1515 / 1980))
        else:
            assert c.pct_of_peak_at_clock is None


def test_softmax_bench_plan_at_the_bench_pace_reads_the_gpu(monkeypatch, gpu, tmp_path):
    m = load("softmax_bench.py")
    code, results, report = run(monkeypatch, gpu, "softmax_bench.py", tmp_path, **SOFTMAX_SHAPES)
    assert code == 0
    assert report.passed
    assert results["skipped"] == []
    assert len(report.checks) == len(m.configs("bench")) + 2
    repeat = [c for c in results["cases"] if c["phase"] == "repeat"]
    assert [c["key"] for c in repeat] == ["softmax/tile/512x128/8x128", "copy/memcpy/262144"]
    assert all(c["load"] for c in results["cases"]), "every batch of every case was watched"
    rec = record_of("softmax_bench.py", results, report, passed=True)
    assert_loaded(rec)
    assert all(c.pct_of_peak_at_clock is None and c.times_floor >= 1.0 - 1e-9 or c.key.startswith("copy/")
               for c in rec.cases)


@pytest.mark.parametrize("pynvml,why", [(None, "pynvml is not installed"),
                                        (fake_gpu.fake_pynvml(fail_at="nvmlDeviceGetHandleByPciBusId"),
                                         "nvmlDeviceGetHandleByPciBusId failed")], ids=["no-pynvml", "nvml-refuses"])
def test_without_nvml_the_bench_runs_and_the_record_says_why(monkeypatch, gpu, tmp_path, pynvml, why):
    monkeypatch.setitem(sys.modules, "pynvml", pynvml)   # None: ``import pynvml`` raises ImportError
    code, results, report = run(monkeypatch, gpu, "softmax_bench.py", tmp_path, "--quick", **SOFTMAX_SHAPES)
    assert code == 0
    assert why in results["load"]["error"]
    assert "max_sm_clock_mhz" not in results["load"]
    assert all(c["load"] is None for c in results["cases"])
    rec = record_of("softmax_bench.py", results, report, passed=True)
    assert all(c.load is None and c.pct_of_power_limit is None for c in rec.cases)
    assert why in rec.load_unavailable


def test_a_driver_without_the_instant_field_gives_the_averaged_power(monkeypatch, gpu, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", fake_gpu.fake_pynvml(instant=False))
    code, results, report = run(monkeypatch, gpu, "softmax_bench.py", tmp_path, "--quick", **SOFTMAX_SHAPES)
    assert code == 0
    assert results["load"]["power_reading"] == "average"
    rec = record_of("softmax_bench.py", results, report, passed=True)
    assert {(c.load.power_reading, c.load.power_w) for c in rec.cases} == {("average", 690)}
