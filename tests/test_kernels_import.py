"""The programs in kernels/ import without a GPU and gate correctly when run without one.

Each program is imported by path (as the build does) and run as a subprocess (as a
student does: no cupy, a report and seed from the environment in any folder, a gate that
passes on a machine that cannot launch). cupy is replaced by a small package on PYTHONPATH:
one that refuses to import (the "no cupy" machine) or a fake that reports a chosen device,
so these tests mean the same on every machine. What the gate decides on each fake device,
and the seed a run draws, are asked of the program's ``main`` in this process, the same
fake as ``cupy`` in ``sys.modules`` (``sys.exit(main())`` is all the script adds). The
verdict comes from the report JSON and the exit code, never from the wording of stdout.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"
import discovered  # noqa: E402

PROGRAMS = discovered.python_programs()  # every kernels/*.py declaring AOT_SIGNATURES
HELPERS = {"harness.py", "tolerances.py", "references.py"}


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"program_{Path(name).stem}", KERNELS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_program_list_is_complete():
    found = {p.name for p in KERNELS.glob("*.py")} - HELPERS
    assert found == set(PROGRAMS)


@pytest.mark.parametrize("name", PROGRAMS)
def test_import_needs_no_gpu_and_declares_aot_signatures(name):
    import cuda.tile as ct
    from cuda.tile.compilation import KernelSignature

    had_cupy = "cupy" in sys.modules
    module = load(name)
    assert ("cupy" in sys.modules) == had_cupy, "importing a program must not import cupy"
    assert callable(module.main)
    sigs = module.AOT_SIGNATURES
    assert isinstance(sigs, dict)
    assert sigs
    kernels = {n for n, v in vars(module).items() if isinstance(v, ct.kernel)}
    assert set(sigs) == kernels, "every kernel needs AOT signatures, and only kernels"
    for kernel_name, signatures in sigs.items():
        kernel = getattr(module, kernel_name)
        assert signatures
        assert all(isinstance(s, KernelSignature) for s in signatures)
        n_params = len(inspect.signature(kernel._annotated_function.pyfunc).parameters)
        for s in signatures:
            assert len(s.parameters) == n_params, kernel_name


def _tileiras_available() -> bool:
    if shutil.which("tileiras"):
        return True
    try:
        import nvidia
    except ImportError:
        return False
    return any((Path(p) / "cu13" / "bin" / "tileiras").exists() for p in nvidia.__path__)


@pytest.mark.skipif(not _tileiras_available(), reason="tileiras (cuda-tile[tileiras]) not installed")
@pytest.mark.parametrize("name", PROGRAMS)
def test_every_kernel_exports_for_sm80(name, tmp_path):
    from cuda.tile.compilation import export_kernel

    module = load(name)
    for kernel_name, signatures in module.AOT_SIGNATURES.items():
        out = tmp_path / f"{kernel_name}.cubin"
        export_kernel(getattr(module, kernel_name), signatures, str(out), gpu_code="sm_80",
                      output_format="cubin")
        assert out.read_bytes()[:4] == b"\x7fELF"


# --------------------------------------------------------------------------- subprocess runs

BLOCKED_CUPY = 'raise ImportError("cupy is blocked by this test")\n'

FAKE_CUPY = textwrap.dedent('''
    """A stand-in for cupy that reports one device, from FAKE_CUPY_* variables."""
    import os
    import types

    import numpy as _np

    class CUDARuntimeError(RuntimeError):
        pass

    def _count():
        if os.environ.get("FAKE_CUPY_FAIL"):
            raise CUDARuntimeError(os.environ["FAKE_CUPY_FAIL"])
        return int(os.environ.get("FAKE_CUPY_COUNT", "1"))

    _major, _minor = os.environ.get("FAKE_CUPY_CC", "9.0").split(".")
    runtime = types.SimpleNamespace(
        CUDARuntimeError=CUDARuntimeError,
        getDeviceCount=_count,
        getDevice=lambda: 0,
        getDeviceProperties=lambda i: {"name": os.environ.get("FAKE_CUPY_NAME", "Fake GPU").encode(),
                                       "major": int(_major), "minor": int(_minor)},
        driverGetVersion=lambda: int(os.environ.get("FAKE_CUPY_DRIVER", "13000")),
    )
    cuda = types.SimpleNamespace(runtime=runtime, get_current_stream=lambda: None)
    ndarray = _np.ndarray
    float32 = _np.float32
    asarray = _np.asarray
    asnumpy = _np.asarray
    full = _np.full
''')


def run_program(tmp_path: Path, name: str, cupy_source: str, *args: str, cwd: Path | None = None,
                env_extra: dict[str, str] | None = None):
    shim = tmp_path / "shim" / "cupy"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "__init__.py").write_text(cupy_source)
    report = tmp_path / "out" / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TILEPROOF_", "FAKE_CUPY_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(shim.parent)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(env_extra or {})
    if not any(a == "--report" for a in args) and "TILEPROOF_REPORT" not in env:
        args = (*args, "--report", str(report))
    proc = subprocess.run([sys.executable, str(KERNELS / name), *args], cwd=cwd or tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    path = Path(env.get("TILEPROOF_REPORT", report))
    return proc, read_report(path)


def read_report(path: Path) -> dict:
    return json.loads(path.read_text(), parse_constant=lambda t: pytest.fail(f"bad JSON token {t}"))


def run_main(monkeypatch, capsys, tmp_path: Path, name: str, cupy_source: str | None, *args: str,
             env_extra: dict[str, str] | None = None) -> tuple[int, str, dict]:
    """The program's ``main`` in this process, with ``cupy`` in ``sys.modules`` the module ``cupy_source`` makes
    (None: ``import cupy`` raises ImportError) and only ``env_extra`` of the TILEPROOF_ and FAKE_CUPY_ variables:
    (exit code, stdout, report)."""
    for key in [k for k in os.environ if k.startswith(("TILEPROOF_", "FAKE_CUPY_"))]:
        monkeypatch.delenv(key)
    for key, value in (env_extra or {}).items():
        monkeypatch.setenv(key, value)
    if cupy_source is None:
        fake = None
    else:  # made after the variables are set: the fake reads some at import, as it does in a process
        fake = types.ModuleType("cupy")
        exec(compile(cupy_source, "<fake cupy>", "exec"), fake.__dict__)  # noqa: S102  # the test's own fake
    monkeypatch.setitem(sys.modules, "cupy", fake)
    report = tmp_path / "out" / "report.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    capsys.readouterr()
    code = load(name).main([*args, "--report", str(report)])
    return code, capsys.readouterr().out, read_report(report)


@pytest.mark.parametrize("name", PROGRAMS)
def test_no_cupy_prints_one_gate_line_and_exits_1(name, tmp_path):
    proc, report = run_program(tmp_path, name, BLOCKED_CUPY, "--seed", "11")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1, proc.stderr
    assert len(lines) == 1, proc.stdout
    assert report == {
        "report_version": 1,
        "program": f"kernels/{name}",
        "seed": 11,
        "device": None,
        "gate": "no-gpu",
        "gate_message": lines[0],
        "checks": [],
        "passed": False,
    }


def test_report_and_seed_from_environment_and_any_cwd(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = tmp_path / "env-report.json"
    proc, report = run_program(tmp_path, "fused.py", BLOCKED_CUPY, cwd=elsewhere,
                               env_extra={"TILEPROOF_REPORT": str(target),
                                          "TILEPROOF_SEED": "987654321"})
    assert proc.returncode == 1
    assert target.exists()
    assert report["seed"] == 987654321
    assert report["program"] == "kernels/fused.py"


def test_fresh_seed_each_run(tmp_path, monkeypatch, capsys):
    seeds = {run_main(monkeypatch, capsys, tmp_path, "vector_add.py", None)[2]["seed"] for _ in range(2)}
    assert len(seeds) == 2
    assert all(isinstance(s, int) for s in seeds)


@pytest.mark.parametrize(
    ("env", "gate", "device"),
    [
        ({"FAKE_CUPY_CC": "7.5", "FAKE_CUPY_NAME": "Tesla T4"}, "below-sm80",
         {"name": "Tesla T4", "compute_capability": "7.5"}),
        ({"FAKE_CUPY_COUNT": "0"}, "no-gpu", None),
        ({"FAKE_CUPY_FAIL": "cudaErrorInsufficientDriver"}, "no-gpu", None),
        ({"FAKE_CUPY_CC": "9.0", "FAKE_CUPY_DRIVER": "12040"}, "no-gpu",
         {"name": "Fake GPU", "compute_capability": "9.0"}),
    ],
    ids=["t4", "zero-devices", "runtime-error", "old-driver"],
)
@pytest.mark.parametrize("name", PROGRAMS)
def test_gate_refusals(name, env, gate, device, tmp_path, monkeypatch, capsys):
    code, stdout, report = run_main(monkeypatch, capsys, tmp_path, name, FAKE_CUPY, "--seed", "3", env_extra=env)
    lines = stdout.splitlines()
    assert code == 1, stdout
    assert len(lines) == 1
    assert report["gate_message"] == lines[0]
    assert report["gate"] == gate
    assert report["device"] == device
    assert report["checks"] == []
    assert report["passed"] is False


def test_gate_ok_but_launch_impossible_still_writes_a_failing_report(tmp_path):
    # The fake device passes the gate; the launch then fails on this machine. The
    # program must exit nonzero and still leave its report, with no pass in it.
    proc, report = run_program(tmp_path, "vector_add.py", FAKE_CUPY, "--seed", "3",
                               env_extra={"FAKE_CUPY_CC": "9.0"})
    assert proc.returncode != 0
    assert report["gate"] == "ok"
    assert report["device"]["compute_capability"] == "9.0"
    assert report["checks"] == []
    assert report["passed"] is False
