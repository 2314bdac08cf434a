"""A fake cupy for running the course programs on the CPU (tests/data/fake_gpu_site/README.md).

Device arrays are numpy arrays (``ndarray``, with cupy's ``.get()``); every other name is numpy's.
The device answers as an H200 (compute capability 9.0, driver of CUDA 13.0).
"""

import types

import numpy as _np


class ndarray(_np.ndarray):  # noqa: N801 (cupy's name)
    """A numpy array that answers cupy's ``.get()``."""

    def get(self):
        return _np.asarray(self).copy()


def _device(a):
    return _np.ascontiguousarray(a).view(ndarray)


def asarray(a, dtype=None):
    return _device(_np.array(a, dtype=dtype))


def full(shape, value, dtype=_np.float32):
    return _device(_np.full(shape, value, dtype=dtype))


def asnumpy(a):
    return _np.asarray(a).copy()


class _Stream:
    ptr = 0

    def synchronize(self):
        pass


_STREAM = _Stream()
cuda = types.SimpleNamespace(
    get_current_stream=lambda: _STREAM,
    runtime=types.SimpleNamespace(
        CUDARuntimeError=RuntimeError,
        getDeviceCount=lambda: 1, getDevice=lambda: 0, driverGetVersion=lambda: 13000,
        getDeviceProperties=lambda _d: {"name": b"Fake H200", "major": 9, "minor": 0}))


def __getattr__(name):
    return getattr(_np, name)
