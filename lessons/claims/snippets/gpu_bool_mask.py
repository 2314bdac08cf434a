"""Pitfall 12 on the GPU: both right ways to combine comparisons give the right mask.

idx = arange(64) - 8, valid = (idx >= 0) and (idx < 40), so lanes 8..47 keep x (= 1..64).
Stated: cast-then-multiply and ct.where(&) both give x where valid and 0 elsewhere.
"""

import sys

import cuda.tile as ct
import numpy as np
from claimkit import gpu_or_exit, report

T, SIZE = 64, 40


@ct.kernel
def cast_then_multiply(a, b, t: ct.Constant[int], size: ct.Constant[int]):
    idx = ct.arange(t, dtype=ct.int32) - 8
    valid = ct.astype(idx >= 0, ct.int32) * ct.astype(idx < size, ct.int32)
    x = ct.load(a, index=(ct.bid(0),), shape=(t,))
    ct.store(b, index=(ct.bid(0),), tile=x * ct.astype(valid, ct.float32))


@ct.kernel
def where_with_mask(a, b, t: ct.Constant[int], size: ct.Constant[int]):
    idx = ct.arange(t, dtype=ct.int32) - 8
    valid_mask = (idx >= 0) & (idx < size)
    x = ct.load(a, index=(ct.bid(0),), shape=(t,))
    ct.store(b, index=(ct.bid(0),), tile=ct.where(valid_mask, x, ct.full((t,), 0, dtype=ct.float32)))


def main() -> int:
    cp = gpu_or_exit()
    host = np.arange(1, T + 1, dtype=np.float32)
    idx = np.arange(T) - 8
    want = np.where((idx >= 0) & (idx < SIZE), host, 0).astype(np.float32)
    said, ok = [], True
    for label, kernel in (("cast-then-multiply", cast_then_multiply), ("where(&)", where_with_mask)):
        out = cp.full(T, -1.0, dtype=cp.float32)
        ct.launch(cp.cuda.get_current_stream(), (1, 1, 1), kernel, (cp.asarray(host), out, T, SIZE))
        good = np.array_equal(cp.asnumpy(out), want)
        ok &= good
        said.append(f"{label} {'right' if good else 'WRONG'}")
    return report(ok, "; ".join(said) + " (lanes 8..47 kept, the rest 0)")


if __name__ == "__main__":
    sys.exit(main())
