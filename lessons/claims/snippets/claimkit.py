"""Shared by the claim snippets: AOT signatures, and the GPU programs' verdict line.

A GPU claim program checks one stated result and says what it saw in its last
stdout line, ``{"observed": true|false, "detail": "..."}``; its exit code is the
verdict: 0 = the stated result was observed, 1 = it was not, 2 = it could not
run (no usable GPU). Needs cuda-tile (+ cupy and numpy for the GPU programs).
"""

from __future__ import annotations

import json
import sys


def aot_array(dtype, ndim: int):
    """ArrayConstraint for a C-contiguous array (unit last stride, 16-byte aligned base)."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    return ArrayConstraint(dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False,
                           stride_constant=(None,) * (ndim - 1) + (1,), base_addr_divisible_by=16)


def aot_scalar(dtype):
    """A kernel argument known only at run time (not a ct.Constant)."""
    from cuda.tile.compilation import ScalarConstraint

    return ScalarConstraint(dtype)


def aot_signature(*parameters):
    from cuda.tile.compilation import CallingConvention, KernelSignature

    return KernelSignature(list(parameters), CallingConvention.cutile_python_v1())


def report(observed: bool, detail: str) -> int:
    """Print the verdict line; return the exit code (0 observed, 1 not)."""
    print(json.dumps({"observed": bool(observed), "detail": detail}), flush=True)
    return 0 if observed else 1


def gpu_or_exit(min_cc: tuple[int, int] = (8, 0)):
    """cupy, once a GPU of compute capability >= min_cc is present; else print why and exit 2."""
    try:
        import cupy as cp

        props = cp.cuda.runtime.getDeviceProperties(0)
    except Exception as e:  # noqa: BLE001 - any failure here means "no usable GPU", reported verbatim
        print(json.dumps({"observed": None, "detail": f"no usable GPU: {type(e).__name__}: {e}"}))
        sys.exit(2)
    cc = (props["major"], props["minor"])
    if cc < min_cc:
        print(json.dumps({"observed": None, "detail": f"compute capability {cc[0]}.{cc[1]} < {min_cc[0]}.{min_cc[1]}"}))
        sys.exit(2)
    return cp


def case_arg(cases: tuple[str, ...]) -> str:
    """The program's one argument: ``--case NAME``."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--case", required=True, choices=cases)
    return parser.parse_args().case
