"""The one tolerance table for every program check in this project.

An element passes when it is finite and |got - want| <= atol + rtol * |want|, where
`want` is a float64 reference. The Python programs in kernels/ read this table through
harness.run_program; the C++ programs get the same numbers from a header generated
from it. Keep TOLERANCES a plain literal dict (check name -> Tolerance with literal
numbers) so that it can be read by importing this file by path, with nothing else
on sys.path.

Notation in the comments: u = 2**-24 (float32 unit roundoff); n = number of terms.
A float32 sum of n terms, in any order, is within (n-1)*u*sum|x_i| of the exact sum
(Higham, Accuracy and Stability of Numerical Algorithms, section 4.2).
"""

from typing import NamedTuple


class Tolerance(NamedTuple):
    """Mixed bound for one check: relative part rtol, absolute part atol."""

    rtol: float
    atol: float


TOLERANCES = {
    # FP16 products are exact in FP32, so only FP32 accumulation order differs from the
    # float64 reference: K=128 terms with |a|,|b| <= 1 give <= 127*u*128 ~ 9.7e-4 < atol.
    "matmul": Tolerance(rtol=1e-4, atol=1e-3),
    # The lesson's bound for one 128-wide float32 row: a few ulp of exp plus 127*u of the
    # sum is ~1e-5 relative at worst; atol absorbs the exp tails of near-zero outputs.
    "softmax": Tolerance(rtol=1e-5, atol=1e-6),
    # The lesson's exercise bound for softmax(A @ B) against numpy float64.
    "fused": Tolerance(rtol=1e-4, atol=1e-3),
    # Positive outputs ~1/cols, so relative: exp (~|x-m|*u + 2 ulp), the running sum over
    # ~100 tiles (~110*u) and the rescales stay < 3e-5; atol = FLT_MIN (flushed tails only).
    "online_softmax": Tolerance(rtol=1e-4, atol=1.1754943508222875e-38),
    # One correctly rounded float32 add: |fl(a+b) - (a+b)| <= u*|a+b| < 2**-23*|a+b|.
    "vector_add": Tolerance(rtol=1.1920928955078125e-07, atol=0.0),
    # A max selects one of the float32 inputs, which float64 holds exactly: no error.
    "tile_max_native": Tolerance(rtol=0.0, atol=0.0),
    # Prefix sums of a 32x32 tile (<= 1024 terms) of non-negative inputs: 1024*u = 2**-14.
    "tile_sum_via_scan": Tolerance(rtol=6.103515625e-05, atol=0.0),
    # A reduce_sum over <= 1024 non-negative float32 terms: same bound, 1024*u = 2**-14.
    "tile_sum_native": Tolerance(rtol=6.103515625e-05, atol=0.0),
}
