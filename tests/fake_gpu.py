"""A fake GPU for running the bench programs' bodies on the CPU (tests/test_bench_dry_run.py).

``FakeCupy`` is the part of cupy the bench programs, kernels/bench/timing.py and kernels/harness.py
use, backed by numpy: device arrays are numpy arrays whose ``.data.ptr`` is their real address
(memsets and copies go through ctypes), the stream is synchronous, and CUDA events read a
simulated clock that only work advances. ``fake_launch`` stands in for ``cuda.tile.launch``: it
computes what the launched kernel must (a row softmax, or a matrix product) with numpy and
advances the clock by a time that depends on the kernel and its arguments, so that configs rank
differently; ``wrong`` names kernel arguments for which it writes a wrong answer instead, so that
the sweep's handling of a failed check is exercised. Nothing here compiles or checks a kernel:
the export test does that (tileiras, no GPU).
"""

from __future__ import annotations

import ctypes
import hashlib
import types
from typing import Any

import numpy as np


class Clock:
    """Simulated GPU time, in ms."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, ms: float) -> None:
        self.now += ms


class DeviceArray(np.ndarray):
    """A numpy array that answers ``.data.ptr`` with its address, as a cupy array does."""

    registry: dict[int, DeviceArray] = {}

    @property  # type: ignore[misc]  (shadows ndarray.data on purpose)
    def data(self):
        ptr = self.__array_interface__["data"][0]
        DeviceArray.registry[ptr] = self
        return types.SimpleNamespace(ptr=ptr)


def device(a: Any) -> DeviceArray:
    return np.ascontiguousarray(a).view(DeviceArray)


def fake_cupy(clock: Clock) -> types.ModuleType:
    cp = types.ModuleType("fake_cupy")
    cp.ndarray = DeviceArray
    for name in ("float16", "float32", "float64", "uint32", "uint8", "nan"):
        setattr(cp, name, getattr(np, name))
    cp.asarray = lambda a, dtype=None: device(np.array(a, dtype=dtype))
    cp.empty = lambda shape, dtype=np.float32: device(np.empty(shape, dtype=dtype))
    cp.empty_like = lambda a: device(np.empty_like(a))
    cp.full = lambda shape, value, dtype=np.float32: device(np.full(shape, value, dtype=dtype))
    cp.tile = lambda a, reps: device(np.tile(a, reps))
    cp.array_equal = np.array_equal
    cp.count_nonzero = np.count_nonzero
    def timed(ufunc):
        def run(*args, **kwargs):
            clock.advance(0.5)               # cupy's own elementwise kernels take time too
            return ufunc(*args, **kwargs)
        return run

    for ufunc in ("subtract", "exp", "divide"):
        setattr(cp, ufunc, timed(getattr(np, ufunc)))

    class Stream:
        ptr = 0

        def synchronize(self) -> None:
            pass

    stream = Stream()

    class Event:
        def record(self, _stream=None) -> None:
            self.t = clock.now

        def synchronize(self) -> None:
            pass

    def memset(ptr, value, nbytes, _stream) -> None:
        ctypes.memset(ptr, value, nbytes)
        clock.advance(0.1)                   # what writing 256 MiB takes on an H200, in ms

    def memcpy(dst, src, nbytes, _kind, _stream) -> None:
        ctypes.memmove(dst, src, nbytes)
        clock.advance(2 * nbytes / 4e9)

    runtime = types.SimpleNamespace(
        memsetAsync=memset, memcpyAsync=memcpy, memcpyDeviceToDevice=3, getDevice=lambda: 0,
        deviceGetPCIBusId=lambda _d: PCI_BUS_ID,
        getDeviceProperties=lambda _d: {"multiProcessorCount": 132, "l2CacheSize": 60 << 20, "major": 9,
                                        "minor": 0, "name": b"Fake H200"},
        deviceGetAttribute=lambda attr, _d: 1980000 if attr == 13 else 0, CUDA_R_16F=2, CUDA_R_32F=0)
    cp.cuda = types.SimpleNamespace(
        get_current_stream=lambda: stream, Event=Event, runtime=runtime,
        get_elapsed_time=lambda start, end: end.t - start.t,
        device=types.SimpleNamespace(get_cublas_handle=lambda: 0))
    return cp


PCI_BUS_ID = "0000:00:06.0"
"""The fake GPU's PCI bus id, as CUDA and NVML both name it."""
MAX_SM_MHZ, POWER_LIMIT_MW = 1980, 700_000
"""The fake card's maximum SM clock and enforced power limit, as NVML gives them."""


def fake_pynvml(instant: bool = True, fail_at: str | None = None) -> types.ModuleType:
    """The part of pynvml kernels/bench/gpu_load.py reads, for the fake GPU: a card held at its power limit
    (SM 1515 MHz of 1980, 695 W of 700 instantly, 690 W averaged, the power cap the active clock event
    reason). ``instant=False``: a driver without the instantaneous power field; ``fail_at``: the name of
    a call that raises, as NVML does where it cannot answer."""
    nvml = types.ModuleType("fake_pynvml")
    handle = object()

    def by_bus(bus: str):
        if bus != PCI_BUS_ID:
            raise RuntimeError(f"NVML: no GPU at {bus}")
        return handle

    def field_values(_h, fields):
        if not instant:
            raise RuntimeError("Not Supported")
        assert fields == [186], fields
        return [types.SimpleNamespace(nvmlReturn=0, value=types.SimpleNamespace(uiVal=POWER_LIMIT_MW - 5_000))]

    calls = {
        "nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
        "nvmlDeviceGetHandleByPciBusId": by_bus,
        "nvmlDeviceGetMaxClockInfo": lambda _h, kind: MAX_SM_MHZ if kind == 1 else 3201,
        "nvmlDeviceGetEnforcedPowerLimit": lambda _h: POWER_LIMIT_MW,
        "nvmlDeviceGetFieldValues": field_values,
        "nvmlDeviceGetPowerUsage": lambda _h: POWER_LIMIT_MW - 10_000,
        "nvmlDeviceGetClockInfo": lambda _h, kind: 1515 if kind == 1 else 3201,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda _h: 0x4,
    }

    def refuse(*_args):
        raise RuntimeError(f"NVML: {fail_at} failed")

    for name, call in calls.items():
        setattr(nvml, name, refuse if name == fail_at else call)
    return nvml


def fake_cublas(clock: Clock) -> types.ModuleType:
    """``cupy_backends.cuda.libs.cublas`` with gemmEx: C^T = B^T A^T in column-major terms."""
    cublas = types.ModuleType("fake_cublas")
    cublas.CUBLAS_OP_N, cublas.CUBLAS_COMPUTE_32F, cublas.CUBLAS_GEMM_DEFAULT = 0, 68, -1

    done: set[tuple] = set()

    def gemm_ex(_handle, _ta, _tb, n, m, k, _alpha, b_ptr, _bt, _ldb, a_ptr, _at, _lda, _beta, c_ptr, *_rest):
        clock.advance(1.3 * MATMUL_MS)
        a, b, c = (DeviceArray.registry[p] for p in (a_ptr, b_ptr, c_ptr))
        if (a_ptr, b_ptr, c_ptr) in done and not np.isnan(c.reshape(-1)[-1]):
            return                           # a timed launch (as in fake_launch)
        done.add((a_ptr, b_ptr, c_ptr))
        c[...] = a.astype(np.float32) @ b.astype(np.float32)

    cublas.gemmEx = gemm_ex
    return cublas


def _pace(kernel: Any, args: tuple) -> float:
    """A made-up, fixed per-config slowdown in [1, 2): configs differ, runs agree."""
    text = f"{id(kernel)}{list(args)}"
    return 1.0 + int(hashlib.sha256(text.encode()).hexdigest()[:4], 16) / 65536


SOFTMAX_MS, MATMUL_MS = 5.0, 20.0
"""Simulated time of one launch, times ``_pace``: long enough that warm-ups take a few launches."""


def fake_launch(clock: Clock, wrong: set[tuple] = frozenset()):  # type: ignore[assignment]
    """``ct.launch(stream, grid, kernel, args)``: the right result (a wrong one when the launch's
    non-array arguments are in ``wrong``), and time on the clock. The result is computed at a
    config's first launch on given arrays and whenever the output was NaN-filled since (a check
    follows), not for the timed launches in between."""
    done: set[tuple] = set()

    def launch(_stream, grid, kernel, args) -> None:
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        tail = tuple(a for a in args if not isinstance(a, np.ndarray))
        ms = MATMUL_MS if len(arrays) == 3 else SOFTMAX_MS
        clock.advance(ms * _pace(kernel, tail))
        slot = (id(kernel), tuple(grid), tail, tuple(a.__array_interface__["data"][0] for a in arrays))
        if slot in done and not np.isnan(arrays[-1].reshape(-1)[-1]):
            return                                           # a timed launch: the output is already there
        done.add(slot)
        if len(arrays) == 3:                                 # a matmul: c = a @ b
            a, b, c = arrays
            c[...] = a.astype(np.float32) @ b.astype(np.float32)
        else:                                                # a softmax along axis 1
            x, y = arrays
            e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
            y[...] = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        if tail in wrong:
            arrays[-1].reshape(-1)[0] += 1.0

    return launch
