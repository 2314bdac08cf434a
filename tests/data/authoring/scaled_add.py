"""Row ops: scaled_add, c = alpha * a + b with a runtime float32 alpha (port of a 1-D AXPY).

    a, b, c: 98765 float32 elements, tiles of 1024, grid cdiv(98765, 1024) blocks

Every element of c starts as NaN, so an element that no block writes fails the check.

Check `scaled_add`: c against alpha * a + b in float64, bound in kernels/tolerances.py.

Run: python kernels/scaled_add.py [--seed N] [--report PATH]
Needs cuda-tile, cupy, numpy and a GPU of compute capability 8.0 or newer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import cuda.tile as ct
import numpy as np
from cuda.tile.compilation import ScalarConstraint

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import harness  # noqa: E402  (found through this script's own directory)
from tolerances import TOLERANCES  # noqa: E402

LENGTH = 98_765
TILE = 1024
ALPHA = 0.75


@ct.kernel
def scaled_add(a, b, c, alpha: float, tile: ct.Constant[int]):
    """c[tile i] = alpha * a[tile i] + b[tile i]."""
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(tile,), padding_mode=ct.PaddingMode.ZERO)
    y = ct.load(b, index=(i,), shape=(tile,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(c, index=(i,), tile=alpha * x + y)


AOT_SIGNATURES = {
    "scaled_add": [harness.aot_signature(harness.aot_array(ct.float32, 1), harness.aot_array(ct.float32, 1),
                                         harness.aot_array(ct.float32, 1), ScalarConstraint(ct.float32), TILE)],
}


def _body(s: harness.Session) -> None:
    cp = s.cp
    a_host = s.rng.uniform(-1.0, 1.0, size=LENGTH).astype(np.float32)
    b_host = s.rng.uniform(-1.0, 1.0, size=LENGTH).astype(np.float32)
    c = s.nan_filled((LENGTH,), np.float32)
    ct.launch(cp.cuda.get_current_stream(), (ct.cdiv(LENGTH, TILE), 1, 1), scaled_add,
              (cp.asarray(a_host), cp.asarray(b_host), c, np.float32(ALPHA), TILE))
    want = np.float64(np.float32(ALPHA)) * a_host.astype(np.float64) + b_host.astype(np.float64)
    s.check("scaled_add", cp.asnumpy(c), want, inputs={"a": a_host, "b": b_host})


def main(argv: list[str] | None = None) -> int:
    return harness.run_program(__file__, _body, argv=argv, tolerances=TOLERANCES,
                               description=__doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
