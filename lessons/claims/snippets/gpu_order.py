"""Pitfall 11 on the GPU: does ct.load(..., order='F') transpose the tile?

A is 64 x 64 with A[r, c] = 64 r + c (float32), cut into 32 x 32 tiles; P = tile (0, 1)
of A = A[0:32, 32:64], Q = tile (1, 0) = A[32:64, 0:32].

    --case order-f              stated (the list): order='F' does NOT transpose the tile
    --case load-then-transpose  stated: ct.transpose(ct.load(...)) is the transposed tile
"""

import sys

import cuda.tile as ct
import numpy as np
from claimkit import case_arg, gpu_or_exit, report

N, T = 64, 32


@ct.kernel
def load_order_f(a, out, i: int, j: int, t: ct.Constant[int]):
    ct.store(out, index=(0, 0), tile=ct.load(a, index=(i, j), shape=(t, t), order="F"))


@ct.kernel
def load_then_transpose(a, out, i: int, j: int, t: ct.Constant[int]):
    ct.store(out, index=(0, 0), tile=ct.transpose(ct.load(a, index=(i, j), shape=(t, t))))


def run(cp, kernel, a, i: int, j: int) -> np.ndarray:
    out = cp.full((T, T), -1.0, dtype=cp.float32)
    ct.launch(cp.cuda.get_current_stream(), (1, 1, 1), kernel, (a, out, i, j, T))
    return cp.asnumpy(out)


def name(got: np.ndarray, tiles: dict[str, np.ndarray]) -> str:
    for label, tile in tiles.items():
        if np.array_equal(got, tile):
            return label
    return "none of them"


def main() -> int:
    case = case_arg(("order-f", "load-then-transpose"))
    cp = gpu_or_exit()
    host = (np.arange(N)[:, None] * N + np.arange(N)[None, :]).astype(np.float32)
    a = cp.asarray(host)
    tiles = {f"A[{r}:{r + T}, {c}:{c + T}]{suffix}": (m.T if suffix else m)
             for r in (0, T) for c in (0, T) for suffix in ("", ".T") for m in [host[r:r + T, c:c + T]]}
    if case == "load-then-transpose":
        got = run(cp, load_then_transpose, a, 0, 1)
        ok = np.array_equal(got, host[0:T, T:N].T)
        return report(ok, f"transpose(load(A, (0, 1))) equals {name(got, tiles)}")
    got01, got00 = run(cp, load_order_f, a, 0, 1), run(cp, load_order_f, a, 0, 0)
    transposed = name(got00, tiles).endswith(".T") and name(got01, tiles).endswith(".T")
    detail = (f"order='F' at index (0, 0) returned {name(got00, tiles)}, at index (0, 1) returned "
              f"{name(got01, tiles)}: ")
    detail += ("a transposed tile, indexed in the transposed array's tile space" if transposed
               else "not a transposed tile")
    return report(not transposed, detail)


if __name__ == "__main__":
    sys.exit(main())
