"""FIXTURE stand-in for kernels/tolerances.py (tests only)."""

from typing import NamedTuple


class Tolerance(NamedTuple):
    rtol: float
    atol: float


TOLERANCES = {
    "matmul": Tolerance(rtol=1e-4, atol=1e-3),
    "softmax": Tolerance(rtol=1e-5, atol=1e-6),
    "fused": Tolerance(rtol=1e-4, atol=1e-3),
}
