"""Pitfalls 1 and 2 on the GPU: ct.load / ct.store take a tile index, not an element index.

a = 0, 1, ..., 511 (float32) is 32 tiles of 16; two tile blocks copy tiles 0 and 1 of a
into b (filled with -1). The element-index versions pass index=(bid * 16,).

    --case load-element-index   stated: the copy is wrong (block 1 reads tile 16)
    --case store-element-index  stated: the copy is wrong (block 1 writes tile 16)
    --case tile-index           stated: the copy is right
"""

import sys

import cuda.tile as ct
import numpy as np
from claimkit import case_arg, gpu_or_exit, report

T = 16
LENGTH = 32 * T


@ct.kernel
def copy_load_element_index(a, b, t: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i * t,), shape=(t,)))


@ct.kernel
def copy_store_element_index(a, b, t: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(b, index=(i * t,), tile=ct.load(a, index=(i,), shape=(t,)))


@ct.kernel
def copy_tile_index(a, b, t: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(t,)))


KERNELS = {"load-element-index": copy_load_element_index, "store-element-index": copy_store_element_index,
           "tile-index": copy_tile_index}


def main() -> int:
    case = case_arg(tuple(KERNELS))
    cp = gpu_or_exit()
    a_host = np.arange(LENGTH, dtype=np.float32)
    a, b = cp.asarray(a_host), cp.full(LENGTH, -1.0, dtype=cp.float32)
    ct.launch(cp.cuda.get_current_stream(), (2, 1, 1), KERNELS[case], (a, b, T))
    got = cp.asnumpy(b)
    want = np.full(LENGTH, -1.0, dtype=np.float32)
    want[: 2 * T] = a_host[: 2 * T]
    correct = bool(np.array_equal(got, want))
    written = [int(i) // T for i in np.flatnonzero(got != -1.0)]
    tiles = sorted(set(written))
    first = got[T: 2 * T]
    said = (f"tiles of b written: {tiles}; b[16:32] = {first[0]:g}..{first[-1]:g} "
            f"(a right copy has 16..31)")
    if case == "tile-index":
        return report(correct, ("the copy is right: " if correct else "the copy is WRONG: ") + said)
    return report(not correct, ("the copy is wrong, as stated: " if not correct else "the copy is right anyway: ") + said)


if __name__ == "__main__":
    sys.exit(main())
