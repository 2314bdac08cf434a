"""The one tolerance table for every program check of this course.

An element passes when it is finite and |got - want| <= atol + rtol * |want|, where
`want` is a float64 reference. The Python programs in kernels/ read this table through
harness.run_program; the C++ programs get the same numbers from a header generated
from it (cpp/tolerances.h). Keep TOLERANCES a plain literal dict (check name -> Tolerance
with literal numbers, each with its derivation in a comment above it); `new-lesson`
adds an entry per program it writes.
"""

from typing import NamedTuple


class Tolerance(NamedTuple):
    """Mixed bound for one check: relative part rtol, absolute part atol."""

    rtol: float
    atol: float


TOLERANCES = {
}
