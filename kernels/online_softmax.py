"""Row softmax for rows longer than one tile: running max and sum across column tiles.

    X: rows x cols float32 (default 4096 x 100000; cols need not be a power of two)
    Y = softmax(X) along each row, float32

A tile must be a compile-time power of two, so a 100000-wide row cannot sit in one
tile. Each block owns ROWS_PER_BLOCK rows and walks them in (ROWS_PER_BLOCK, 1024)
column tiles, twice:

  pass 1  keep, per row, the largest value seen so far (m) and the sum of exp(x - m)
          so far (l). When a tile raises the max from m to m', the old sum is rescaled
          by exp(m - m') before the tile's own terms are added: l' = l*exp(m-m') + sum.
  pass 2  write exp(x - m) / l for every tile, with the final m and l.

The last column tile sticks out past the row end; it is padded with -inf, which adds
nothing to the max and exp(-inf) = 0 to the sum. The starting max is -inf as well,
and exp(-inf - m') = 0 wipes the starting sum, so the first tile needs no special case.

Check: Y against a float64 softmax of the same X. The reference is computed ON THE
GPU with cupy in float64 (4096 x 100000 is 410 M elements; numpy would take far
longer), and the comparison runs there too.

Run: python kernels/online_softmax.py [--rows R] [--cols C] [--seed N] [--report PATH]
Needs cuda-tile, cupy, numpy and a GPU of compute capability 8.0 or newer; the default
size needs about 20 GB of GPU memory (use --rows/--cols to shrink it).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import cuda.tile as ct
import numpy as np

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import harness  # noqa: E402  (found through this script's own directory)
from tolerances import TOLERANCES  # noqa: E402

DEFAULT_ROWS, DEFAULT_COLS = 4096, 100_000
ROWS_PER_BLOCK, COLS_PER_TILE = 2, 1024
INPUT_SCALE = 2.0  # X ~ 2 * N(0, 1): exponents spread over about [-18, 0]


@ct.kernel
def online_softmax(x, y, tb: ct.Constant[int], tn: ct.Constant[int]):
    """y = softmax(x) along axis 1 for rows of any length; block r owns tb rows."""
    r = ct.bid(0)
    pad = ct.PaddingMode.NEG_INF
    col_tiles = ct.num_tiles(x, axis=1, shape=(tb, tn))

    run_max = ct.full((tb, 1), -math.inf, dtype=ct.float32)
    run_sum = ct.zeros((tb, 1), dtype=ct.float32)
    for t in range(col_tiles):
        part = ct.load(x, index=(r, t), shape=(tb, tn), padding_mode=pad)
        new_max = ct.maximum(run_max, ct.max(part, axis=1, keepdims=True))
        part_sum = ct.sum(ct.exp(part - new_max), axis=1, keepdims=True)
        run_sum = run_sum * ct.exp(run_max - new_max) + part_sum
        run_max = new_max

    for t in range(col_tiles):
        part = ct.load(x, index=(r, t), shape=(tb, tn), padding_mode=pad)
        ct.store(y, index=(r, t), tile=ct.exp(part - run_max) / run_sum)


ONLINE_SOFTMAX_SIGNATURES = [
    harness.aot_signature(harness.aot_array(ct.float32, 2), harness.aot_array(ct.float32, 2),
                          ROWS_PER_BLOCK, COLS_PER_TILE),
]

AOT_SIGNATURES = {"online_softmax": ONLINE_SOFTMAX_SIGNATURES}


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"{value} is not a positive integer")
    return value


def _add_arguments(parser) -> None:
    parser.add_argument("--rows", type=_positive, default=DEFAULT_ROWS,
                        help=f"number of rows (default {DEFAULT_ROWS})")
    parser.add_argument("--cols", type=_positive, default=DEFAULT_COLS,
                        help=f"row length (default {DEFAULT_COLS})")


def _body(s: harness.Session) -> None:
    cp = s.cp
    rows, cols = s.args.rows, s.args.cols
    print(f"size: {rows} x {cols} float32, tiles of {ROWS_PER_BLOCK} x {COLS_PER_TILE}",
          flush=True)
    x_host = s.rng.standard_normal(size=(rows, cols), dtype=np.float32)
    x_host *= np.float32(INPUT_SCALE)
    x = cp.asarray(x_host)
    del x_host
    y = s.nan_filled((rows, cols), np.float32)
    ct.launch(cp.cuda.get_current_stream(), (ct.cdiv(rows, ROWS_PER_BLOCK), 1, 1),
              online_softmax, (x, y, ROWS_PER_BLOCK, COLS_PER_TILE))
    want = harness.softmax_rows_f64(x)  # cupy float64 on the GPU
    s.check("online_softmax", y, want, inputs={"x": x})


def main(argv: list[str] | None = None) -> int:
    return harness.run_program(__file__, _body, argv=argv, tolerances=TOLERANCES,
                               add_arguments=_add_arguments,
                               description=__doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
