"""Pitfall 13: the stored tile's rank must match the index and the array."""

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def store_4d_tile_to_3d_array(x, y):
    """WRONG: a (1, 1, 1, 1) reduction result stored at a 3-D index."""
    t = ct.load(x, index=(ct.bid(0), 0, 0, 0), shape=(1, 1, 4, 8))
    max_val = ct.max(t, axis=(2, 3), keepdims=True)
    ct.store(y, index=(ct.bid(0), 0, 0), tile=max_val)


@ct.kernel
def store_reshaped_tile(x, y):
    """RIGHT: reshape to (1, 1, 1) first."""
    t = ct.load(x, index=(ct.bid(0), 0, 0, 0), shape=(1, 1, 4, 8))
    max_val = ct.max(t, axis=(2, 3), keepdims=True)
    ct.store(y, index=(ct.bid(0), 0, 0), tile=ct.reshape(max_val, (1, 1, 1)))


SIG = [aot_signature(aot_array(ct.float32, 4), aot_array(ct.float32, 3))]
AOT_SIGNATURES = {"store_4d_tile_to_3d_array": SIG, "store_reshaped_tile": SIG}
