"""Check harness shared by the cuTile Python programs in kernels/.

One concern: decide whether a program's GPU output is right and record that decision.

* the device gate (cupy imported lazily, compute capability >= 8.0, driver r580+),
* the element check against a float64 reference (mixed rtol/atol bound),
* the JSON check report, written atomically at exit in every case,
* the handover: each check's output and inputs as .npy files beside the report, with the
  manifest handover.json, so that tileproof can recompute the reference itself, outside
  this process (above HANDOVER_CAP_BYTES: strided rows, or a block of strided rows and
  columns, and a sha256 of the whole),
* run_program(), which strings these together so that a program's main() is only
  "make inputs, launch, call check()".

Needs only numpy and the standard library; works on numpy or cupy arrays. A program
imports it from its own directory, so `python kernels/fused.py` works from any cwd.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import secrets
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

REPORT_VERSION = 1
ENV_REPORT = "TILEPROOF_REPORT"
ENV_SEED = "TILEPROOF_SEED"
MIN_COMPUTE_CAPABILITY = (8, 0)
# cuTile needs NVIDIA driver r580 or later, the first driver of CUDA 13.0.
MIN_DRIVER_CUDA_VERSION = 13000

HANDOVER_VERSION = 3
HANDOVER_MANIFEST = "handover.json"
# Largest array written whole; above it, every stride-th row and the sha256 of the whole
# (keep in step with tileproof/records/handover.py CAP_BYTES and cpp/harness.h).
HANDOVER_CAP_BYTES = 64 << 20
# Most rows and most columns of a block sample (a column input above the cap): the
# check's cost (tileproof/records/handover.py BLOCK_MAX).
HANDOVER_BLOCK_MAX = 1024
HANDOVER_DTYPES = ("<f2", "<f4", "<f8", "<i4", "<i8", "|u1", "|b1")

GATE_OK = "ok"
GATE_BELOW_SM80 = "below-sm80"
GATE_NO_GPU = "no-gpu"


# --------------------------------------------------------------------------- checks


@dataclass
class CheckResult:
    """Outcome of comparing one output array against its float64 reference."""

    name: str
    shape: list[int]
    dtype: str
    rtol: float
    atol: float
    checked: int
    mismatches: int
    max_abs_err: float
    max_rel_err: float
    first_failure: dict[str, Any] | None
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "rtol": self.rtol,
            "atol": self.atol,
            "checked": self.checked,
            "mismatches": self.mismatches,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "first_failure": None if self.first_failure is None else dict(self.first_failure),
            "passed": self.passed,
        }

    def summary(self) -> str:
        """One human line; the report JSON, not this text, is the structured verdict."""
        shape = "x".join(str(d) for d in self.shape) or "scalar"
        verdict = "PASS" if self.passed else "FAIL"
        line = (f"check {self.name} [{shape} {self.dtype}]: {verdict} "
                f"{self.mismatches}/{self.checked} mismatches, "
                f"max abs err {self.max_abs_err:.3g}, max rel err {self.max_rel_err:.3g} "
                f"(rtol {self.rtol:g}, atol {self.atol:g})")
        if self.first_failure is not None:
            f = self.first_failure
            line += (f"; first failure at {describe_index(f['index'])}: "
                     f"got {f['got']!r}, want {f['want']!r}")
        return line


def describe_index(index: Sequence[int]) -> str:
    """(row r, column c) for matrices, the plain index tuple otherwise."""
    if len(index) == 2:
        return f"(row {index[0]}, column {index[1]})"
    return "(" + ", ".join(str(i) for i in index) + ("," if len(index) == 1 else "") + ")"


def array_module(array: Any):
    """numpy for host arrays, cupy for device arrays (only if cupy is already imported)."""
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(array, cupy.ndarray):
        return cupy
    return np


def element_ok(got: Any, want: Any, rtol: float, atol: float, xp=np):
    """Boolean mask: finite and |got - want| <= atol + rtol*|want|. NaN/inf always fail.

    A non-finite reference also fails, so a broken reference cannot pass silently.
    Both arrays are compared in float64.
    """
    g = xp.asarray(got, dtype=xp.float64)
    w = xp.asarray(want, dtype=xp.float64)
    bound = xp.abs(w) * rtol + atol
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, and fails
        err = xp.abs(g - w)
        ok = err <= bound  # NaN compares False
    del bound
    ok &= xp.isfinite(g)
    ok &= xp.isfinite(w)
    return ok, err


def first_false(ok: Any, xp=np) -> tuple[int, ...] | None:
    """Row-major first index where ok is False, or None when every element is True."""
    flat = xp.reshape(ok, (-1,))
    if flat.size == 0 or bool(xp.all(flat)):
        return None
    position = int(xp.argmax(xp.logical_not(flat).astype(xp.int8)))
    return tuple(int(i) for i in np.unravel_index(position, tuple(ok.shape)))


def max_errors(err: Any, want: Any, xp=np) -> tuple[float, float]:
    """(max |got-want|, max |got-want|/|want| over want != 0); NaN propagates.

    The relative maximum is 0.0 when no element of want is nonzero.
    """
    if err.size == 0:
        return 0.0, 0.0
    max_abs = float(xp.max(err))
    w = xp.abs(xp.asarray(want, dtype=xp.float64))
    nonzero = w != 0
    if not bool(xp.any(nonzero)):
        return max_abs, 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        rel = err[nonzero] / w[nonzero]
    return max_abs, float(xp.max(rel))


def compare(name: str, got: Any, want: Any, rtol: float, atol: float) -> CheckResult:
    """Check every element of got against want (same shape; numpy or cupy, not mixed)."""
    xp = array_module(got)
    if array_module(want) is not xp:
        raise TypeError(f"check {name}: got is a {type(got).__module__} array but want is a "
                        f"{type(want).__module__} array; put both on the same side")
    if tuple(got.shape) != tuple(want.shape):
        raise ValueError(f"check {name}: got has shape {tuple(got.shape)}, "
                         f"want has shape {tuple(want.shape)}")
    ok, err = element_ok(got, want, rtol, atol, xp)
    checked = int(ok.size)
    mismatches = checked - int(xp.count_nonzero(ok))
    max_abs, max_rel = max_errors(err, want, xp)
    del err
    first = first_false(ok, xp)
    first_failure = None
    if first is not None:
        first_failure = {
            "index": list(first),
            "got": float(got[first]),
            "want": float(want[first]),
        }
    return CheckResult(
        name=name,
        shape=[int(d) for d in got.shape],
        dtype=str(got.dtype),
        rtol=float(rtol),
        atol=float(atol),
        checked=checked,
        mismatches=mismatches,
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        first_failure=first_failure,
        passed=(mismatches == 0 and checked > 0),
    )


# --------------------------------------------------------------------------- references


def softmax_rows_f64(x: Any) -> Any:
    """Row softmax in float64 (numpy or cupy), the reference for every softmax check."""
    xp = array_module(x)
    x64 = xp.asarray(x, dtype=xp.float64)
    shifted = x64 - x64.max(axis=1, keepdims=True)
    del x64
    xp.exp(shifted, out=shifted)
    shifted /= shifted.sum(axis=1, keepdims=True)
    return shifted


def matmul_f64(a: Any, b: Any) -> Any:
    """a @ b in float64 over the given (already rounded) input values."""
    xp = array_module(a)
    return xp.asarray(a, dtype=xp.float64) @ xp.asarray(b, dtype=xp.float64)


# --------------------------------------------------------------------------- report


def _jsonable(value: Any) -> Any:
    """Plain JSON values; non-finite floats become the strings "nan", "inf", "-inf"."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    return value


_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _float_field(value: Any) -> Any:
    if isinstance(value, str) and value in _NON_FINITE:
        return _NON_FINITE[value]
    return value


def encode_report(report: Mapping[str, Any]) -> str:
    """The report as strict JSON text (no NaN/Infinity tokens)."""
    return json.dumps(_jsonable(report), indent=2, allow_nan=False) + "\n"


def decode_report(text: str) -> dict[str, Any]:
    """Parse report JSON and turn "nan"/"inf"/"-inf" back into floats in the float fields."""
    data = json.loads(text)
    for check in data.get("checks", []):
        for key in ("rtol", "atol", "max_abs_err", "max_rel_err"):
            if key in check:
                check[key] = _float_field(check[key])
        failure = check.get("first_failure")
        if failure is not None:
            failure["got"] = _float_field(failure["got"])
            failure["want"] = _float_field(failure["want"])
    return data


def write_atomically(path: str | os.PathLike, text: str) -> None:
    """Write text to path through a temporary file in the same folder and os.replace."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp makes the file 0600; give it the mode a plain open() would have.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@dataclass
class Report:
    """The check report of one program run (report_version 1)."""

    program: str
    seed: int
    device: dict[str, str] | None = None
    gate: str = GATE_NO_GPU
    gate_message: str = ""
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return (self.gate == GATE_OK and len(self.checks) > 0
                and all(c.passed for c in self.checks))

    def to_dict(self) -> dict[str, Any]:
        return {
            "report_version": REPORT_VERSION,
            "program": self.program,
            "seed": self.seed,
            "device": None if self.device is None else dict(self.device),
            "gate": self.gate,
            "gate_message": self.gate_message,
            "checks": [c.to_dict() for c in self.checks],
            "passed": self.passed,
        }

    def write(self, path: str | os.PathLike) -> None:
        write_atomically(path, encode_report(self.to_dict()))


def program_name(program_file: str | os.PathLike) -> str:
    """kernels/<file>.py: the program's path relative to the repository root."""
    p = Path(program_file)
    return f"{p.resolve().parent.name}/{p.name}"


# --------------------------------------------------------------------------- handover


def host_array(array: Any) -> np.ndarray:
    """A C-contiguous numpy copy of a numpy or cupy array, in a dtype a handover may hold."""
    xp = array_module(array)
    host = array.get() if xp is not np else np.asarray(array)
    host = np.ascontiguousarray(host)
    if host.dtype.str not in HANDOVER_DTYPES:
        host = host.astype(np.float64)
    return host


def whole_sha256(host: np.ndarray) -> str:
    """sha256 of the array's C-order bytes."""
    return hashlib.sha256(memoryview(host).cast("B")).hexdigest() if host.size else hashlib.sha256(b"").hexdigest()


def sample_stride(host: np.ndarray, cap: int) -> int:
    """1 when the array fits the cap, else the row stride that brings it under."""
    if host.nbytes <= cap or host.ndim == 0 or host.shape[0] < 2:
        return 1
    return max(2, -(-host.nbytes // cap))


def block_strides(out: np.ndarray, column_bytes: Sequence[int], cap: int, most: int) -> tuple[int, int]:
    """(row stride, column stride) of a check's output: (sample_stride, 1) unless a column input (of
    ``column_bytes``) is above the cap, then a block of at most ``most`` rows by ``most`` columns whose column
    inputs' columns fit the cap."""
    rows = sample_stride(out, cap)
    above = [n for n in column_bytes if n > cap]
    if not above or out.ndim < 2:
        return rows, 1
    cols = max(2, *(-(-n // cap) for n in above), -(-int(out.shape[-1]) // most))
    return max(rows, -(-int(out.shape[0]) // most)), cols


def _axis(stride: int) -> dict[str, int] | None:
    return {"stride": stride} if stride > 1 else None


class InputSet:
    """The inputs one shape's checks share (a bench times several configurations on them): handed over once.

    Made by ``Session.inputs``; passed as ``inputs=`` to every check of that shape. Its arrays are written at the
    first check that uses it (with that check's sample) and then let go; every later check with the same sample
    references the same files."""

    def __init__(self, label: str, arrays: Mapping[str, Any], whole: Sequence[str] = (),
                 columns: Sequence[str] = ()):
        self.label = label
        self.arrays: dict[str, Any] | None = dict(arrays)
        self.whole = frozenset(whole)
        """Inputs never row-sampled, whatever their first axis (a square product's b has as many rows as the output,
        yet every output row needs all of it): written whole, or withheld above the cap."""
        self.columns = frozenset(columns)
        self.column_bytes = [int(arrays[k].nbytes) for k in self.columns if k in arrays]
        """Column inputs: never row-sampled, and each output column needs only its own column of them (matmul's b,
        ``a @ b[:, j]`` is column j of ``a @ b``). Above the cap, the output is sampled as a block of rows and
        columns, and these inputs as the block's columns."""
        self.written: dict[tuple[int, int], tuple[dict[str, Any], list[str]]] = {}
        """(row stride, column stride) -> (key -> manifest entry, withheld keys)."""


class Handover:
    """The arrays each check hands over: .npy files in the report's folder, listed in handover.json.

    Every check is one entry, ``index`` its position in the check report; an input set (``InputSet``) is
    written once and named by every check that uses it."""

    def __init__(self, folder: str | os.PathLike | None, program: str, cap: int = HANDOVER_CAP_BYTES,
                 block_max: int = HANDOVER_BLOCK_MAX):
        self.folder = None if folder is None else Path(folder)
        self.program = program
        self.cap = cap
        self.block_max = block_max
        self.checks: list[dict[str, Any]] = []

    def _write(self, file: str, host: np.ndarray, rows: int, cols: int = 1) -> dict[str, Any]:
        """Write every ``rows``-th row and every ``cols``-th column (of the last axis) of ``host``."""
        assert self.folder is not None
        entry: dict[str, Any] = {"file": file, "dtype": host.dtype.str, "shape": [int(d) for d in host.shape]}
        kept = host
        if rows > 1 or cols > 1:
            entry["sample"] = {"rows": _axis(rows), "columns": _axis(cols), "whole_sha256": whole_sha256(host)}
            kept = np.ascontiguousarray(host[::rows, ..., ::cols] if host.ndim >= 2 else host[::rows])
        np.save(self.folder / file, kept, allow_pickle=False)
        return entry

    def _inputs(self, prefix: str, inputs: Mapping[str, Any], out: tuple[int, ...], strides: tuple[int, int],
                whole: frozenset[str] = frozenset(), columns: frozenset[str] = frozenset()
                ) -> tuple[dict[str, Any], list[str]]:
        """Write ``inputs`` as ``prefix.input.KEY.npy``: (key -> entry, keys withheld above the cap); those of
        ``whole`` and ``columns`` are never row-sampled, those of ``columns`` keep the output's columns."""
        written: dict[str, Any] = {}
        withheld: list[str] = []
        rows, cols = strides
        for key, value in inputs.items():
            host = host_array(value)
            if key in columns:
                aligned = len(out) >= 2 and host.ndim >= 2 and host.shape[-1] == out[-1]
                own = (1, cols if aligned else 1)
            else:
                aligned = host.ndim >= 1 and len(out) >= 1 and host.shape[0] == out[0] and key not in whole
                own = (rows if aligned else 1, 1)
            if own == (1, 1) and host.nbytes > self.cap:
                withheld.append(key)
                continue
            written[key] = self._write(f"{prefix}.input.{key}.npy", host, *own)
        return written, withheld

    def _shared(self, shared: InputSet, out: tuple[int, ...], strides: tuple[int, int]
                ) -> tuple[dict[str, Any], list[str]]:
        """The input set's entries at ``strides``, written now if no earlier check wrote them."""
        if strides not in shared.written:
            if shared.arrays is None:
                raise ValueError(f"input set {shared.label}: its arrays were let go after its first check, "
                                 f"whose sample was not rows/{strides[0]} columns/{strides[1]}")
            rows, cols = strides
            prefix = shared.label + (f".s{rows}" if rows > 1 else "") + (f".c{cols}" if cols > 1 else "")
            shared.written[strides] = self._inputs(prefix, shared.arrays, out, strides, shared.whole,
                                                   shared.columns)
            shared.arrays = None
        return shared.written[strides]

    def add(self, name: str, got: Any, inputs: Mapping[str, Any] | InputSet, index: int = 0) -> None:
        """Write check ``index`` (``name``)'s output and inputs, then the manifest (rewritten after every check)."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        out = host_array(got)
        strides = block_strides(out, inputs.column_bytes if isinstance(inputs, InputSet) else (), self.cap,
                                self.block_max)
        output = self._write(f"{name}.{index}.output.npy", out, *strides)
        shape = tuple(int(d) for d in out.shape)
        del out
        if isinstance(inputs, InputSet):
            written, withheld = self._shared(inputs, shape, strides)
        else:
            written, withheld = self._inputs(f"{name}.{index}", inputs, shape, strides)
        check = {"name": name, "index": index, "output": output, "inputs": written, "withheld": withheld}
        self.checks = [c for c in self.checks if c["index"] != index] + [check]
        write_atomically(self.folder / HANDOVER_MANIFEST, json.dumps(
            {"handover_version": HANDOVER_VERSION, "program": self.program, "checks": self.checks}, indent=1) + "\n")


# --------------------------------------------------------------------------- gate


@dataclass
class GateResult:
    """What the device gate found: the verdict, its one printed line, and cupy if usable."""

    gate: str
    message: str
    device: dict[str, str] | None = None
    cupy: Any = None


def _import_cupy():
    import cupy  # noqa: PLC0415  (lazy: importing a program must work without cupy)

    return cupy


def probe_device(import_cupy: Callable[[], Any] = _import_cupy) -> GateResult:
    """Find the current CUDA device through cupy and decide whether cuTile can run on it.

    Never returns GATE_OK unless cupy imports, a device answers, its compute capability is
    at least 8.0 and its driver is r580 (CUDA 13.0) or newer.
    """
    try:
        cp = import_cupy()
    except ImportError as exc:
        return GateResult(GATE_NO_GPU, f"no usable GPU: cupy is not importable ({exc})")
    runtime_error = getattr(getattr(cp, "cuda", None), "runtime", None)
    runtime_error = getattr(runtime_error, "CUDARuntimeError", RuntimeError)
    try:
        count = cp.cuda.runtime.getDeviceCount()
        if count < 1:
            return GateResult(GATE_NO_GPU, "no usable GPU: the CUDA runtime reports 0 devices")
        index = cp.cuda.runtime.getDevice()
        props = cp.cuda.runtime.getDeviceProperties(index)
        driver = int(cp.cuda.runtime.driverGetVersion())
    except (runtime_error, RuntimeError, OSError) as exc:
        return GateResult(GATE_NO_GPU, f"no usable GPU: CUDA through cupy failed "
                                       f"({type(exc).__name__}: {exc})")
    name = props["name"]
    name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    major, minor = int(props["major"]), int(props["minor"])
    device = {"name": name, "compute_capability": f"{major}.{minor}"}
    head = f"device: {name}, compute capability {major}.{minor}"
    if (major, minor) < MIN_COMPUTE_CAPABILITY:
        return GateResult(GATE_BELOW_SM80,
                          f"{head}: below 8.0, which cuTile requires; not running any "
                          f"tile kernel", device)
    if driver < MIN_DRIVER_CUDA_VERSION:
        return GateResult(GATE_NO_GPU,
                          f"{head}: driver supports CUDA {driver // 1000}.{driver % 1000 // 10},"
                          f" cuTile needs driver r580 (CUDA 13.0) or newer; not running",
                          device)
    return GateResult(GATE_OK, f"{head} (sm_{major}{minor}): ok", device, cp)


# --------------------------------------------------------------------------- running


class CheckFailed(Exception):
    """A check failed; the program stops here and exits 1 (later checks are not run)."""

    def __init__(self, result: CheckResult):
        super().__init__(result.summary())
        self.result = result


@dataclass
class Session:
    """What a program body gets: cupy, a seeded Generator, its arguments, check()."""

    cp: Any
    rng: np.random.Generator
    args: argparse.Namespace
    report: Report
    tolerances: Mapping[str, Any]
    handover: Handover = field(default_factory=lambda: Handover(None, ""))

    def check(self, name: str, got: Any, want: Any,
              inputs: Mapping[str, Any] | InputSet | None = None) -> CheckResult:
        """Compare with the table's bound for `name`; record it; raise CheckFailed if it fails.

        `inputs`: the arrays the check's reference in kernels/references.py is computed from,
        by its keyword names, or an InputSet (``inputs()``) that several checks share; they and `got` are
        handed over to tileproof (Handover), which recomputes the reference itself. Without them the check
        stays unverified.
        """
        if name not in self.tolerances:
            raise KeyError(f"check {name!r} has no entry in kernels/tolerances.py "
                           f"(known: {', '.join(sorted(self.tolerances))})")
        self.handover.add(name, got, {} if inputs is None else inputs, len(self.report.checks))
        tol = self.tolerances[name]
        result = compare(name, got, want, tol.rtol, tol.atol)
        self.report.checks.append(result)
        print(result.summary(), flush=True)
        if not result.passed:
            raise CheckFailed(result)
        return result

    def inputs(self, label: str, whole: Sequence[str] = (), columns: Sequence[str] = (),
               **arrays: Any) -> InputSet:
        """The inputs of one shape, handed over once for every check that passes the result as ``inputs``
        (``label``: the files' prefix, a plain name unique in this program; ``whole``: the inputs that are
        never row-sampled; ``columns``: the inputs each output column needs only its own column of, as
        matmul's b: above the cap, a block of rows and columns is handed over)."""
        return InputSet(label, arrays, whole, columns)

    def nan_filled(self, shape: Sequence[int], dtype: Any) -> Any:
        """A device array of NaN, so that an element the kernel never writes fails."""
        return self.cp.full(tuple(shape), np.nan, dtype=dtype)


def fresh_seed() -> int:
    """A new seed from OS entropy, below 2**53 so that any JSON reader holds it exactly."""
    return secrets.randbits(53)


def parse_arguments(description: str, argv: Sequence[str] | None,
                    add_arguments: Callable[[argparse.ArgumentParser], None] | None
                    ) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--report", default=os.environ.get(ENV_REPORT) or None,
                        help=f"write the JSON check report here (default: ${ENV_REPORT})")
    env_seed = os.environ.get(ENV_SEED)
    parser.add_argument("--seed", type=int, default=None,
                        help=f"seed for the inputs (default: ${ENV_SEED}, else a fresh one)")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    if args.seed is None and env_seed not in (None, ""):
        try:
            args.seed = int(env_seed)
        except ValueError:
            parser.error(f"{ENV_SEED}={env_seed!r} is not an integer")
    return args


def run_program(program_file: str, body: Callable[[Session], None], *,
                description: str, tolerances: Mapping[str, Any],
                argv: Sequence[str] | None = None,
                add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
                probe: Callable[[], GateResult] = probe_device) -> int:
    """Gate, then run body; the return value is the exit code: 0 iff every check passed.

    The report (if a path was given) is written when this returns or raises.
    """
    args = parse_arguments(description, argv, add_arguments)
    seed = args.seed if args.seed is not None else fresh_seed()
    report = Report(program=program_name(program_file), seed=seed)
    try:
        found = probe()
        report.gate, report.gate_message, report.device = found.gate, found.message, found.device
        print(found.message, flush=True)
        if found.gate != GATE_OK:
            return 1
        print(f"seed: {seed} (rerun with --seed {seed})", flush=True)
        folder = Path(args.report).resolve().parent if args.report else None
        session = Session(cp=found.cupy, rng=np.random.default_rng(seed), args=args,
                          report=report, tolerances=tolerances,
                          handover=Handover(folder, report.program))
        try:
            body(session)
        except CheckFailed as failed:
            print(f"FAILED: check {failed.result.name}; remaining checks not run", flush=True)
            return 1
        if not report.checks:
            print("FAILED: the program ran no check", flush=True)
            return 1
        print(f"PASSED: {len(report.checks)} checks", flush=True)
        return 0 if report.passed else 1
    finally:
        if args.report:
            report.write(args.report)


# --------------------------------------------------------------------------- AOT export


def aot_array(dtype: Any, ndim: int):
    """ArrayConstraint for a C-contiguous cupy array (unit last stride, 16-byte base).

    Imported lazily so that the checking half of this module needs only numpy.
    """
    import cuda.tile as ct  # noqa: PLC0415
    from cuda.tile.compilation import ArrayConstraint  # noqa: PLC0415

    return ArrayConstraint(dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False,
                           stride_constant=(None,) * (ndim - 1) + (1,),
                           base_addr_divisible_by=16)


def aot_signature(*parameters: Any):
    """KernelSignature in calling convention cutile_python_v1 (v2 only adds tuples and
    static shapes, which these kernels do not use)."""
    from cuda.tile.compilation import CallingConvention, KernelSignature  # noqa: PLC0415

    return KernelSignature(list(parameters), CallingConvention.cutile_python_v1())
