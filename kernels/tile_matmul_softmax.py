"""Tile matmul and tile row softmax in cuTile Python, each checked against float64.

    C = A @ B      A: 256x128 float16, B: 128x128 float16, C: 256x128 float32
    Y = softmax(C) row by row, float32

A kernel here is a program for one tile block, not for one thread. The matmul grid is
the tile space of C: 32x32 output tiles give 8 x 4 = 32 blocks, and each block walks
K = 128 in 8 steps of (32x16) @ (16x32). The softmax gives each block 8 whole rows
(an 8x128 tile), so the row max and row sum are reductions inside one tile and no
block ever reads what another block wrote.

Checks (bounds in kernels/tolerances.py):
  matmul   C against float64 A @ B over the same FP16-rounded inputs; FP16 products
           are exact in FP32, so only the accumulation order can differ.
  softmax  Y against a float64 softmax of the GPU's own C, so that this check judges
           the softmax kernel alone and not the matmul feeding it.

Run: python kernels/tile_matmul_softmax.py [--seed N] [--report PATH]
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

M, N, K = 256, 128, 128          # array sizes: free, need not be powers of two
TILE_M, TILE_N, TILE_K = 32, 32, 16  # tile sizes: compile-time powers of two
SOFTMAX_ROWS = 8                 # rows per softmax block; the row width N is one tile


@ct.kernel
def tile_matmul(a, b, c, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]):
    """c[tile (i, j)] = sum over k of a[tile (i, k)] @ b[tile (k, j)], block (i, j)."""
    # Tile-space coordinates of the one C tile this block owns. Indices passed to
    # load/store below are tile indices, never element offsets.
    i = ct.bid(0)
    j = ct.bid(1)
    # The accumulator is float32 even though a and b are float16.
    acc = ct.zeros((tm, tn), dtype=ct.float32)
    # ceil(K / tk) steps; a short last K tile would be read as zeros, adding nothing.
    for k in range(ct.num_tiles(a, axis=1, shape=(tm, tk))):
        a_tile = ct.load(a, index=(i, k), shape=(tm, tk), padding_mode=ct.PaddingMode.ZERO)
        b_tile = ct.load(b, index=(k, j), shape=(tk, tn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a_tile, b_tile, acc)
    # c is float32 like acc, so no ct.astype is needed before the store.
    ct.store(c, index=(i, j), tile=acc)


TILE_MATMUL_SIGNATURES = [
    harness.aot_signature(harness.aot_array(ct.float16, 2), harness.aot_array(ct.float16, 2),
                          harness.aot_array(ct.float32, 2), TILE_M, TILE_N, TILE_K),
]


@ct.kernel
def row_softmax(x, y, rows: ct.Constant[int], width: ct.Constant[int]):
    """y = softmax(x) along axis 1; block r owns rows [r*rows, (r+1)*rows), all columns."""
    r = ct.bid(0)
    # A row narrower than the tile would be padded with -inf, whose exp is 0.
    block = ct.load(x, index=(r, 0), shape=(rows, width), padding_mode=ct.PaddingMode.NEG_INF)
    # keepdims=True keeps a (rows, 1) column that broadcasts against (rows, width);
    # without it Python cuTile drops the reduced axis.
    top = ct.max(block, axis=1, keepdims=True)
    num = ct.exp(block - top)
    den = ct.sum(num, axis=1, keepdims=True)
    ct.store(y, index=(r, 0), tile=num / den)


ROW_SOFTMAX_SIGNATURES = [
    harness.aot_signature(harness.aot_array(ct.float32, 2), harness.aot_array(ct.float32, 2),
                          SOFTMAX_ROWS, N),
]

AOT_SIGNATURES = {
    "tile_matmul": TILE_MATMUL_SIGNATURES,
    "row_softmax": ROW_SOFTMAX_SIGNATURES,
}


def _body(s: harness.Session) -> None:
    cp = s.cp
    stream = cp.cuda.get_current_stream()
    # Inputs in [-1, 1), rounded to FP16 on the host; the reference uses these exact values.
    a_host = s.rng.uniform(-1.0, 1.0, size=(M, K)).astype(np.float16)
    b_host = s.rng.uniform(-1.0, 1.0, size=(K, N)).astype(np.float16)
    a = cp.asarray(a_host)
    b = cp.asarray(b_host)

    c = s.nan_filled((M, N), np.float32)
    grid = (ct.cdiv(M, TILE_M), ct.cdiv(N, TILE_N), 1)
    ct.launch(stream, grid, tile_matmul, (a, b, c, TILE_M, TILE_N, TILE_K))
    c_host = cp.asnumpy(c)
    s.check("matmul", c_host, harness.matmul_f64(a_host, b_host), inputs={"a": a_host, "b": b_host})

    y = s.nan_filled((M, N), np.float32)
    ct.launch(stream, (ct.cdiv(M, SOFTMAX_ROWS), 1, 1), row_softmax, (c, y, SOFTMAX_ROWS, N))
    s.check("softmax", cp.asnumpy(y), harness.softmax_rows_f64(c_host), inputs={"x": c_host})


def main(argv: list[str] | None = None) -> int:
    return harness.run_program(__file__, _body, argv=argv, tolerances=TOLERANCES,
                               description=__doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
