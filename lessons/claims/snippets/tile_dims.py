"""Tile dimensions: compile-time powers of two (day79 pitfalls; cuTile docs)."""

import cuda.tile as ct
from claimkit import aot_array, aot_scalar, aot_signature


@ct.kernel
def copy_tile(a, b, t: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(t,)))


@ct.kernel
def copy_tile_runtime_dim(a, b, t: int):
    """WRONG: t is an ordinary argument, known only at run time."""
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(t,)))


copy_tile_48 = copy_tile_64 = copy_tile  # one kernel, exported with two tile sizes

F32 = ct.float32
AOT_SIGNATURES = {
    "copy_tile_48": [aot_signature(aot_array(F32, 1), aot_array(F32, 1), 48)],  # WRONG: 48
    "copy_tile_64": [aot_signature(aot_array(F32, 1), aot_array(F32, 1), 64)],  # RIGHT: 64
    "copy_tile_runtime_dim": [aot_signature(aot_array(F32, 1), aot_array(F32, 1), aot_scalar(ct.int32))],
}
