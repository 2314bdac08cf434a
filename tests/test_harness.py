"""kernels/harness.py: the element check, error summaries, references, report, gate, runner.

All on the CPU with numpy; the gate is driven by fake cupy objects.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
sys.path.insert(0, str(KERNELS))
import harness  # noqa: E402
from tolerances import TOLERANCES, Tolerance  # noqa: E402

# --------------------------------------------------------------------------- element check


@pytest.mark.parametrize(
    ("got", "want", "rtol", "atol", "ok"),
    [
        (1.0, 1.0, 0.0, 0.0, True),
        (1.0 + 1e-3, 1.0, 0.0, 1e-3, True),           # exactly at the absolute bound
        (1.0 + 1.1e-3, 1.0, 0.0, 1e-3, False),
        (101.0, 100.0, 1e-2, 0.0, True),              # exactly at the relative bound
        (101.5, 100.0, 1e-2, 0.0, False),
        (100.0 + 1.5, 100.0, 1e-2, 0.5, True),        # mixed: 0.5 + 0.01*100
        (1e-7, 0.0, 1e-2, 1e-6, True),                # want 0: only atol applies
        (1e-5, 0.0, 1e-2, 1e-6, False),
        (math.nan, 1.0, 1.0, 1.0, False),
        (math.inf, 1.0, 1.0, 1e300, False),
        (-math.inf, -math.inf, 1.0, 1.0, False),      # non-finite never passes
        (1.0, math.nan, 1.0, 1.0, False),             # a broken reference fails too
        (1.0, math.inf, 1.0, 0.0, False),
    ],
    ids=["exact", "at-atol", "past-atol", "at-rtol", "past-rtol", "mixed", "zero-want-ok",
         "zero-want-bad", "nan", "inf", "both-inf", "nan-want", "inf-want"],
)
def test_element_ok_table(got, want, rtol, atol, ok):
    mask, _ = harness.element_ok(np.array([got]), np.array([want]), rtol, atol)
    assert bool(mask[0]) is ok


def test_element_ok_compares_in_float64():
    # The error of a float32 result is taken in float64, so it comes out exact.
    got = np.array([1.0 + 2.0 ** -20], dtype=np.float32)
    _, err = harness.element_ok(got, np.array([1.0]), 0.0, 0.0)
    assert err.dtype == np.float64
    assert err[0] == 2.0 ** -20


# --------------------------------------------------------------------------- first failure


def test_first_false_is_row_major_first():
    ok = np.ones((4, 5), dtype=bool)
    ok[2, 1] = False
    ok[1, 4] = False  # earlier in row-major order than (2, 1)
    ok[3, 0] = False
    assert harness.first_false(ok) == (1, 4)


def test_first_false_none_when_all_pass_and_for_empty():
    assert harness.first_false(np.ones((3, 3), dtype=bool)) is None
    assert harness.first_false(np.ones((0, 3), dtype=bool)) is None


def test_first_false_1d_and_3d():
    ok = np.ones(10, dtype=bool)
    ok[7] = False
    assert harness.first_false(ok) == (7,)
    ok3 = np.ones((2, 3, 4), dtype=bool)
    ok3[1, 0, 2] = False
    assert harness.first_false(ok3) == (1, 0, 2)


# --------------------------------------------------------------------------- max errors


def test_max_errors_known_values():
    want = np.array([2.0, 0.0, -4.0, 10.0])
    got = np.array([2.5, 0.25, -4.0, 11.0])
    _, err = harness.element_ok(got, want, 0.0, 0.0)
    max_abs, max_rel = harness.max_errors(err, want)
    assert max_abs == 1.0
    assert max_rel == 0.25  # 0.5/2; the want == 0 element (err 0.25) is left out


def test_max_errors_all_zero_reference_and_nan_propagation():
    err = np.array([0.5, 0.0])
    assert harness.max_errors(err, np.zeros(2)) == (0.5, 0.0)
    max_abs, max_rel = harness.max_errors(np.array([np.nan, 1.0]), np.array([1.0, 1.0]))
    assert math.isnan(max_abs)
    assert math.isnan(max_rel)


# --------------------------------------------------------------------------- compare


def test_compare_all_pass():
    rng = np.random.default_rng(0)
    want = rng.standard_normal((16, 8))
    got = (want * (1 + 1e-7)).astype(np.float32)
    r = harness.compare("x", got, want, 1e-5, 1e-6)
    assert r.passed
    assert r.mismatches == 0
    assert r.checked == 128
    assert r.first_failure is None
    assert r.shape == [16, 8]
    assert r.dtype == "float32"
    assert 0 < r.max_abs_err < 1e-5


def test_compare_planted_mismatch_reports_index_and_both_values():
    want = np.arange(24, dtype=np.float64).reshape(4, 6) / 7.0
    got = want.astype(np.float32)
    got[2, 3] += 0.5
    r = harness.compare("planted", got, want, 1e-4, 1e-3)
    assert not r.passed
    assert r.mismatches == 1
    assert r.checked == 24
    assert r.first_failure == {"index": [2, 3], "got": float(got[2, 3]), "want": float(want[2, 3])}
    assert r.max_abs_err == pytest.approx(0.5, rel=1e-6)
    assert r.max_rel_err == pytest.approx(0.5 / want[2, 3], rel=1e-6)
    assert "(row 2, column 3)" in r.summary()


def test_compare_planted_nan_fails():
    want = np.ones((3, 3))
    got = np.ones((3, 3), dtype=np.float32)
    got[1, 1] = np.nan
    r = harness.compare("nan", got, want, 1.0, 1.0)  # even a huge bound cannot pass NaN
    assert not r.passed
    assert r.mismatches == 1
    assert r.first_failure["index"] == [1, 1]
    assert math.isnan(r.first_failure["got"])
    assert math.isnan(r.max_abs_err)


def test_compare_unwritten_band_counts_every_element():
    # A tile-index bug leaves a 32-wide band NaN: every element of it must be counted.
    want = np.zeros((64, 128))
    got = np.zeros((64, 128), dtype=np.float32)
    got[:, 96:] = np.nan
    r = harness.compare("band", got, want, 1e-4, 1e-3)
    assert r.mismatches == 64 * 32
    assert r.first_failure["index"] == [0, 96]


def test_compare_scalar_and_empty():
    r = harness.compare("s", np.array(1.0, dtype=np.float32), np.array(2.0), 0.0, 0.5)
    assert not r.passed
    assert r.first_failure["index"] == []
    assert r.shape == []
    empty = harness.compare("e", np.zeros((0, 4)), np.zeros((0, 4)), 0.0, 0.0)
    assert empty.checked == 0
    assert not empty.passed  # nothing checked is not a pass


def test_compare_rejects_shape_mismatch():
    with pytest.raises(ValueError, match="shape"):
        harness.compare("x", np.zeros((2, 3)), np.zeros((3, 2)), 0.0, 0.0)


# --------------------------------------------------------------------------- references


def naive_softmax(x):
    out = np.empty_like(x, dtype=np.float64)
    for i in range(x.shape[0]):
        row = [float(v) for v in x[i]]
        top = max(row)
        exps = [math.exp(v - top) for v in row]
        total = math.fsum(exps)
        for j, e in enumerate(exps):
            out[i, j] = e / total
    return out


def naive_matmul(a, b):
    out = np.zeros((a.shape[0], b.shape[1]))
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            out[i, j] = math.fsum(float(a[i, k]) * float(b[k, j]) for k in range(a.shape[1]))
    return out


def test_softmax_reference_matches_naive_loop():
    x = np.random.default_rng(1).standard_normal((5, 13)).astype(np.float32) * 20
    ref = harness.softmax_rows_f64(x)
    assert ref.dtype == np.float64
    np.testing.assert_allclose(ref, naive_softmax(x), rtol=1e-13, atol=0)
    np.testing.assert_allclose(ref.sum(axis=1), 1.0, rtol=1e-14)


def test_softmax_reference_is_shift_invariant_and_does_not_overflow():
    x = np.array([[1000.0, 1001.0, 999.0]], dtype=np.float32)
    np.testing.assert_allclose(harness.softmax_rows_f64(x),
                               harness.softmax_rows_f64(x - 1000), rtol=1e-15)


def test_matmul_reference_matches_naive_loop_on_fp16_inputs():
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (6, 9)).astype(np.float16)
    b = rng.uniform(-1, 1, (9, 4)).astype(np.float16)
    ref = harness.matmul_f64(a, b)
    assert ref.dtype == np.float64
    np.testing.assert_allclose(ref, naive_matmul(a, b), rtol=1e-14, atol=1e-15)


def test_matmul_bound_covers_fp32_accumulation_of_fp16_products():
    # The derivation behind the matmul tolerance, checked: FP32 accumulation (any order)
    # of exact FP16 products stays inside rtol/atol for the program's K = 128.
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (64, 128)).astype(np.float16)
    b = rng.uniform(-1, 1, (128, 64)).astype(np.float16)
    acc = np.zeros((64, 64), dtype=np.float32)
    for k in range(128):  # one order the GPU might use: sequential over k
        acc += a[:, k:k + 1].astype(np.float32) * b[k:k + 1, :].astype(np.float32)
    tol = TOLERANCES["matmul"]
    assert harness.compare("matmul", acc, harness.matmul_f64(a, b), tol.rtol, tol.atol).passed


# --------------------------------------------------------------------------- report JSON


def sample_report(**overrides):
    report = harness.Report(program="kernels/fused.py", seed=123,
                            device={"name": "NVIDIA H200", "compute_capability": "9.0"},
                            gate="ok", gate_message="device: NVIDIA H200, compute capability 9.0")
    for key, value in overrides.items():
        setattr(report, key, value)
    return report


def test_report_shape_is_exactly_the_contract():
    got = np.array([[0.0, np.nan]], dtype=np.float32)
    report = sample_report()
    report.checks.append(harness.compare("fused", got, np.zeros((1, 2)), 1e-4, 1e-3))
    data = json.loads(harness.encode_report(report.to_dict()))
    assert list(data) == ["report_version", "program", "seed", "device", "gate", "gate_message",
                          "checks", "passed"]
    assert list(data["checks"][0]) == ["name", "shape", "dtype", "rtol", "atol", "checked",
                                       "mismatches", "max_abs_err", "max_rel_err",
                                       "first_failure", "passed"]
    assert data["report_version"] == 1
    assert data["passed"] is False


def test_report_round_trip_with_non_finite_values(tmp_path):
    got = np.array([[1.0, np.nan], [np.inf, -np.inf]], dtype=np.float32)
    report = sample_report()
    report.checks.append(harness.compare("fused", got, np.ones((2, 2)), 1e-4, 1e-3))
    path = tmp_path / "sub" / "report.json"
    report.write(path)
    text = path.read_text()
    # Strict JSON: no NaN/Infinity tokens anywhere.
    json.loads(text, parse_constant=lambda token: pytest.fail(f"non-JSON token {token}"))
    raw = json.loads(text)
    assert raw["checks"][0]["max_abs_err"] == "nan"
    assert raw["checks"][0]["first_failure"] == {"index": [0, 1], "got": "nan", "want": 1.0}
    back = harness.decode_report(text)
    assert math.isnan(back["checks"][0]["max_abs_err"])
    assert math.isnan(back["checks"][0]["first_failure"]["got"])
    assert back["device"] == {"name": "NVIDIA H200", "compute_capability": "9.0"}
    assert back["seed"] == 123
    assert back["passed"] is False


@pytest.mark.parametrize(("value", "text"), [(math.nan, "nan"), (math.inf, "inf"),
                                             (-math.inf, "-inf"), (np.float32(np.nan), "nan"),
                                             (1.5, 1.5)])
def test_non_finite_encoding(value, text):
    assert json.loads(harness.encode_report({"v": value}))["v"] == text


def test_report_write_is_atomic_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("old")
    sample_report().write(path)
    assert json.loads(path.read_text())["program"] == "kernels/fused.py"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_report_passed_needs_gate_ok_a_check_and_all_passing():
    good = harness.compare("a", np.ones(3), np.ones(3), 0.0, 0.0)
    bad = harness.compare("b", np.zeros(3), np.ones(3), 0.0, 0.0)
    assert not sample_report().passed                                  # no checks
    assert sample_report(checks=[good]).passed
    assert not sample_report(checks=[good, bad]).passed
    assert not sample_report(checks=[good], gate="below-sm80").passed
    assert not sample_report(checks=[good], gate="no-gpu").passed


def test_program_name_is_repo_relative():
    assert harness.program_name(KERNELS / "fused.py") == "kernels/fused.py"


# --------------------------------------------------------------------------- gate


def fake_cupy(cc=(9, 0), count=1, driver=13000, fail=None, name=b"NVIDIA H200"):
    class CUDARuntimeError(RuntimeError):
        pass

    def get_count():
        if fail:
            raise CUDARuntimeError(fail)
        return count

    runtime = types.SimpleNamespace(
        CUDARuntimeError=CUDARuntimeError,
        getDeviceCount=get_count,
        getDevice=lambda: 0,
        getDeviceProperties=lambda i: {"name": name, "major": cc[0], "minor": cc[1]},
        driverGetVersion=lambda: driver,
    )
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))


def no_cupy():
    raise ModuleNotFoundError("No module named 'cupy'")


@pytest.mark.parametrize(
    ("loader", "gate", "has_device", "words"),
    [
        (no_cupy, "no-gpu", False, "cupy is not importable"),
        (lambda: fake_cupy(fail="cudaErrorNoDevice"), "no-gpu", False, "cudaErrorNoDevice"),
        (lambda: fake_cupy(count=0), "no-gpu", False, "0 devices"),
        (lambda: fake_cupy(cc=(7, 5), name=b"Tesla T4"), "below-sm80", True, "Tesla T4, compute capability 7.5"),
        (lambda: fake_cupy(cc=(9, 0), driver=12040), "no-gpu", True, "r580"),
        (lambda: fake_cupy(cc=(8, 0), name=b"NVIDIA A100"), "ok", True, "compute capability 8.0"),
        (lambda: fake_cupy(cc=(12, 0)), "ok", True, "compute capability 12.0"),
    ],
    ids=["no-cupy", "runtime-error", "zero-devices", "t4", "old-driver", "a100", "sm120"],
)
def test_probe_device(loader, gate, has_device, words):
    found = harness.probe_device(loader)
    assert found.gate == gate
    assert words in found.message
    assert "\n" not in found.message
    assert (found.device is not None) is has_device
    assert (found.cupy is not None) is (gate == "ok")


# --------------------------------------------------------------------------- run_program

NP_AS_CUPY = types.SimpleNamespace(full=np.full)


def ok_probe():
    return harness.GateResult("ok", "device: FAKE, compute capability 9.0 (sm_90): ok",
                              {"name": "FAKE", "compute_capability": "9.0"}, NP_AS_CUPY)


def run(body, tmp_path, probe=ok_probe, argv=("--seed", "7")):
    path = tmp_path / "report.json"
    rc = harness.run_program(str(KERNELS / "fused.py"), body, description="t",
                             tolerances=TOLERANCES, argv=[*argv, "--report", str(path)],
                             probe=probe)
    return rc, json.loads(path.read_text())


def test_run_program_passes_and_gate_line_comes_first(tmp_path, capsys):
    def body(s):
        assert s.rng.integers(0, 2 ** 31) == np.random.default_rng(7).integers(0, 2 ** 31)
        out = s.nan_filled((2, 2), np.float32)
        out[...] = 0.5
        s.check("fused", out, np.full((2, 2), 0.5))

    rc, report = run(body, tmp_path)
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert report["passed"] is True
    assert report["seed"] == 7
    assert lines[0] == "device: FAKE, compute capability 9.0 (sm_90): ok"
    assert report["checks"][0]["rtol"] == TOLERANCES["fused"].rtol


def test_run_program_stops_at_first_failed_check(tmp_path, capsys):
    ran = []

    def body(s):
        s.check("matmul", np.zeros(4), np.ones(4))
        ran.append("second")
        s.check("softmax", np.ones(4), np.ones(4))

    rc, report = run(body, tmp_path)
    assert rc == 1
    assert ran == []
    assert report["passed"] is False
    assert [c["name"] for c in report["checks"]] == ["matmul"]
    assert "first failure at (0,): got 0.0, want 1.0" in capsys.readouterr().out


def test_run_program_unwritten_output_fails(tmp_path):
    def body(s):
        out = s.nan_filled((3,), np.float32)
        out[:2] = 1.0  # the "kernel" forgets the last element
        s.check("vector_add", out, np.ones(3))

    rc, report = run(body, tmp_path)
    assert rc == 1
    assert report["checks"][0]["first_failure"]["index"] == [2]


def test_run_program_gate_failure_runs_nothing(tmp_path, capsys):
    def body(s):
        pytest.fail("body must not run below sm_80")

    probe = lambda: harness.probe_device(lambda: fake_cupy(cc=(7, 5), name=b"Tesla T4"))  # noqa: E731
    rc, report = run(body, tmp_path, probe=probe)
    out = capsys.readouterr().out.splitlines()
    assert rc == 1
    assert len(out) == 1
    assert "Tesla T4" in out[0]
    assert report["gate"] == "below-sm80"
    assert report["checks"] == []
    assert report["passed"] is False
    assert report["device"] == {"name": "Tesla T4", "compute_capability": "7.5"}
    assert report["gate_message"] == out[0]


def test_run_program_without_checks_fails(tmp_path):
    rc, report = run(lambda s: None, tmp_path)
    assert rc == 1
    assert report["passed"] is False


def test_run_program_writes_report_when_body_raises(tmp_path):
    def body(s):
        raise RuntimeError("launch failed")

    with pytest.raises(RuntimeError, match="launch failed"):
        run(body, tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["gate"] == "ok"
    assert report["passed"] is False


def test_unknown_check_name_is_a_clear_error(tmp_path):
    def body(s):
        s.check("matmull", np.ones(1), np.ones(1))

    with pytest.raises(KeyError, match="no entry in kernels/tolerances.py"):
        run(body, tmp_path)


def test_seed_from_environment_and_flag(monkeypatch):
    monkeypatch.setenv(harness.ENV_SEED, "42")
    monkeypatch.setenv(harness.ENV_REPORT, "/tmp/x.json")
    args = harness.parse_arguments("t", [], None)
    assert args.seed == 42
    assert args.report == "/tmp/x.json"
    assert harness.parse_arguments("t", ["--seed", "5"], None).seed == 5
    monkeypatch.delenv(harness.ENV_SEED)
    assert harness.parse_arguments("t", [], None).seed is None
    assert harness.fresh_seed() != harness.fresh_seed()


# --------------------------------------------------------------------------- tolerance table

import discovered  # noqa: E402

REQUIRED_CHECKS = {"matmul", "softmax", "fused", "online_softmax", "vector_add",
                   "tile_max_native", "tile_sum_via_scan", "tile_sum_native"}
REQUIRED_CHECKS |= {c for checks in discovered.program_checks().values() for c in checks}  # and every new one


def test_tolerance_table_has_every_check_with_sane_bounds():
    assert REQUIRED_CHECKS <= set(TOLERANCES)  # noqa: SIM300 (a subset test, not a comparison with a constant)
    for name, tol in TOLERANCES.items():
        assert isinstance(tol, Tolerance), name
        assert math.isfinite(tol.rtol), name
        assert tol.rtol >= 0, name
        assert math.isfinite(tol.atol), name
        assert tol.atol >= 0, name
    assert TOLERANCES["matmul"] == (1e-4, 1e-3)
    assert TOLERANCES["softmax"] == (1e-5, 1e-6)
    assert TOLERANCES["fused"] == (1e-4, 1e-3)


def test_tolerance_table_is_a_plain_literal_with_a_comment_per_entry():
    source = (KERNELS / "tolerances.py").read_text()
    tree = ast.parse(source)
    [assign] = [n for n in tree.body if isinstance(n, ast.Assign)
                and any(getattr(t, "id", None) == "TOLERANCES" for t in n.targets)]
    assert isinstance(assign.value, ast.Dict)
    lines = source.splitlines()
    for key, value in zip(assign.value.keys, assign.value.values, strict=True):
        assert isinstance(key, ast.Constant)
        assert isinstance(key.value, str)
        assert isinstance(value, ast.Call)
        assert value.func.id == "Tolerance"
        assert {k.arg for k in value.keywords} == {"rtol", "atol"}
        assert all(isinstance(k.value, ast.Constant) for k in value.keywords), key.value
        assert lines[key.lineno - 2].strip().startswith("#"), f"{key.value} has no justification"


def test_tolerance_table_imports_alone_by_path():
    spec = importlib.util.spec_from_file_location("lone_tolerances", KERNELS / "tolerances.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert dict(module.TOLERANCES) == {k: tuple(v) for k, v in TOLERANCES.items()}


def test_vector_add_bound_holds_for_rounded_float32_adds():
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, 100_000).astype(np.float32)
    b = rng.uniform(-1, 1, 100_000).astype(np.float32)
    tol = TOLERANCES["vector_add"]
    want = a.astype(np.float64) + b.astype(np.float64)
    assert harness.compare("vector_add", a + b, want, tol.rtol, tol.atol).passed
    off_by_one_ulp = np.nextafter(a + b, np.float32(np.inf))
    assert not harness.compare("vector_add", off_by_one_ulp, want, tol.rtol, tol.atol).passed
