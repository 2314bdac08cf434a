"""Pitfall 15: Python indexing and slicing of tiles."""

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def index_a_tile(a, b, t: ct.Constant[int]):
    """WRONG: tile[0]."""
    x = ct.load(a, index=(ct.bid(0), 0), shape=(1, t))
    ct.store(b, index=(ct.bid(0), 0), tile=x + x[0])


@ct.kernel
def slice_a_tile(a, b, t: ct.Constant[int]):
    """WRONG: tile[:, 3:4]."""
    x = ct.load(a, index=(ct.bid(0), 0), shape=(1, t))
    ct.store(b, index=(ct.bid(0), 0), tile=x[:, 3:4])


@ct.kernel
def scalar_load(a, b, t: ct.Constant[int]):
    """RIGHT: ct.load with shape=() for one element."""
    v = ct.load(a, index=(ct.bid(0), 0), shape=())
    x = ct.load(a, index=(ct.bid(0), 0), shape=(1, t))
    ct.store(b, index=(ct.bid(0), 0), tile=x + v)


SIG = [aot_signature(aot_array(ct.float32, 2), aot_array(ct.float32, 2), 16)]
AOT_SIGNATURES = {"index_a_tile": SIG, "slice_a_tile": SIG, "scalar_load": SIG}
