"""Exercise: softmax(A @ B) row by row in ONE cuTile kernel, with its checking harness.

    A: 256x128 float16, B: 128x128 float16, P = softmax(A @ B): 256x128 float32

The softmax needs whole rows, so each block's output tile is as wide as the matrix:
tn = N = 128 (a power of two, so (32, 128) is a legal tile). The grid is then
(cdiv(M, tm), 1, 1) = 8 blocks. A block runs the matmul K loop into a (32, 128)
float32 accumulator, applies max / exp / sum to it while it is still in the block,
and stores once. The product A @ B never goes to global memory and there is no
second kernel to wait for.

The first cuTile limit this runs into: tile dimensions are compile-time powers of
two, so "one block owns whole rows" only works because N = 128 is one; for N = 100
the tile would be 128 wide and the padded columns would enter the softmax.

Check (the harness): P against softmax(A @ B) computed by numpy in float64 from the
same FP16 inputs, rtol 1e-4, atol 1e-3; on a mismatch it prints the first failing
(row, column) with both values. Mismatches in tile-sized bands point at a tile-index
bug; everything off by a small margin points at a dtype or tolerance bug.

Run: python kernels/fused.py [--seed N] [--report PATH]
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

M, N, K = 256, 128, 128
TILE_M, TILE_K = 32, 16  # the N tile is all of N


@ct.kernel
def fused_matmul_softmax(a, b, p, tm: ct.Constant[int], width: ct.Constant[int],
                         tk: ct.Constant[int]):
    """p[rows of block i] = softmax(a[rows of block i] @ b); width must equal b's columns."""
    i = ct.bid(0)
    scores = ct.zeros((tm, width), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(tm, tk))):
        a_tile = ct.load(a, index=(i, k), shape=(tm, tk), padding_mode=ct.PaddingMode.ZERO)
        # Column tile 0 of width `width` is every column of b.
        b_tile = ct.load(b, index=(k, 0), shape=(tk, width), padding_mode=ct.PaddingMode.ZERO)
        scores = ct.mma(a_tile, b_tile, scores)
    # The block holds tm complete rows of A @ B: the softmax needs nothing from elsewhere.
    top = ct.max(scores, axis=1, keepdims=True)
    num = ct.exp(scores - top)
    den = ct.sum(num, axis=1, keepdims=True)
    ct.store(p, index=(i, 0), tile=num / den)


FUSED_MATMUL_SOFTMAX_SIGNATURES = [
    harness.aot_signature(harness.aot_array(ct.float16, 2), harness.aot_array(ct.float16, 2),
                          harness.aot_array(ct.float32, 2), TILE_M, N, TILE_K),
]

AOT_SIGNATURES = {"fused_matmul_softmax": FUSED_MATMUL_SOFTMAX_SIGNATURES}


def _body(s: harness.Session) -> None:
    cp = s.cp
    a_host = s.rng.uniform(-1.0, 1.0, size=(M, K)).astype(np.float16)
    b_host = s.rng.uniform(-1.0, 1.0, size=(K, N)).astype(np.float16)
    p = s.nan_filled((M, N), np.float32)
    ct.launch(cp.cuda.get_current_stream(), (ct.cdiv(M, TILE_M), 1, 1), fused_matmul_softmax,
              (cp.asarray(a_host), cp.asarray(b_host), p, TILE_M, N, TILE_K))
    want = harness.softmax_rows_f64(harness.matmul_f64(a_host, b_host))
    s.check("fused", cp.asnumpy(p), want, inputs={"a": a_host, "b": b_host})


def main(argv: list[str] | None = None) -> int:
    return harness.run_program(__file__, _body, argv=argv, tolerances=TOLERANCES,
                               description=__doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
