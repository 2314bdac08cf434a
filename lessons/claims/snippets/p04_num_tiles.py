"""Pitfall 4: ct.num_tiles, not math.ceil; its shape has the array's rank."""

import math

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def tile_count_with_math_ceil(a, b, tm: ct.Constant[int], tk: ct.Constant[int]):
    """WRONG: math.ceil in a kernel."""
    acc = ct.zeros((tm, tk), dtype=ct.float32)
    for j in range(math.ceil(a.shape[1] / tk)):
        acc = acc + ct.load(a, index=(ct.bid(0), j), shape=(tm, tk))
    ct.store(b, index=(ct.bid(0), 0), tile=acc)


@ct.kernel
def tile_count_with_1d_shape(a, b, tm: ct.Constant[int], tk: ct.Constant[int]):
    """WRONG: a 1-D tile shape for a 2-D array."""
    acc = ct.zeros((tm, tk), dtype=ct.float32)
    for j in range(ct.num_tiles(a, axis=1, shape=(tk,))):
        acc = acc + ct.load(a, index=(ct.bid(0), j), shape=(tm, tk))
    ct.store(b, index=(ct.bid(0), 0), tile=acc)


@ct.kernel
def tile_count_with_full_shape(a, b, tm: ct.Constant[int], tk: ct.Constant[int]):
    """RIGHT: ct.num_tiles with the full 2-D tile shape."""
    acc = ct.zeros((tm, tk), dtype=ct.float32)
    for j in range(ct.num_tiles(a, axis=1, shape=(tm, tk))):
        acc = acc + ct.load(a, index=(ct.bid(0), j), shape=(tm, tk))
    ct.store(b, index=(ct.bid(0), 0), tile=acc)


SIG = [aot_signature(aot_array(ct.float32, 2), aot_array(ct.float32, 2), 32, 32)]
AOT_SIGNATURES = {"tile_count_with_math_ceil": SIG, "tile_count_with_1d_shape": SIG,
                  "tile_count_with_full_shape": SIG}
