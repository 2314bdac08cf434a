"""The quickstart: c = a + b with 1-D tiles, the smallest end-to-end cuTile check.

    a, b, c: 98765 float32 elements, tiles of 1024, grid cdiv(98765, 1024) = 97 blocks

98765 is not a multiple of 1024, so the last block's tile sticks out past the end of
the arrays: the load there pads, and the store drops the lanes past the end. Every
element of c starts as NaN, so an element that no block writes fails the check.

Check: c against a + b in float64; one float32 add is correctly rounded, so the
bound is one float32 ulp relative (kernels/tolerances.py).

Run: python kernels/vector_add.py [--seed N] [--report PATH]
Needs cuda-tile, cupy, numpy and a GPU of compute capability 8.0 or newer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import cuda.tile as ct
import numpy as np

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import harness  # noqa: E402  (found through this script's own directory)
from tolerances import TOLERANCES  # noqa: E402

LENGTH = 98_765
TILE = 1024


@ct.kernel
def vector_add(a, b, c, tile: ct.Constant[int]):
    """c[block i's tile] = a[tile i] + b[tile i]."""
    i = ct.bid(0)
    lhs = ct.load(a, index=(i,), shape=(tile,), padding_mode=ct.PaddingMode.ZERO)
    rhs = ct.load(b, index=(i,), shape=(tile,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(c, index=(i,), tile=lhs + rhs)


VECTOR_ADD_SIGNATURES = [
    harness.aot_signature(harness.aot_array(ct.float32, 1), harness.aot_array(ct.float32, 1),
                          harness.aot_array(ct.float32, 1), TILE),
]

AOT_SIGNATURES = {"vector_add": VECTOR_ADD_SIGNATURES}


def _body(s: harness.Session) -> None:
    cp = s.cp
    a_host = s.rng.uniform(-1.0, 1.0, size=LENGTH).astype(np.float32)
    b_host = s.rng.uniform(-1.0, 1.0, size=LENGTH).astype(np.float32)
    c = s.nan_filled((LENGTH,), np.float32)
    ct.launch(cp.cuda.get_current_stream(), (ct.cdiv(LENGTH, TILE), 1, 1), vector_add,
              (cp.asarray(a_host), cp.asarray(b_host), c, TILE))
    want = a_host.astype(np.float64) + b_host.astype(np.float64)
    s.check("vector_add", cp.asnumpy(c), want, inputs={"a": a_host, "b": b_host})


def main(argv: list[str] | None = None) -> int:
    return harness.run_program(__file__, _body, argv=argv, tolerances=TOLERANCES,
                               description=__doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
