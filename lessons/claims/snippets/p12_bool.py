"""Pitfall 12: boolean tile arithmetic."""

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def bool_times_bool(a, b, t: ct.Constant[int], size: ct.Constant[int]):
    """WRONG: (idx >= 0) * (idx < SIZE)."""
    idx = ct.arange(t, dtype=ct.int32) - 8
    valid = (idx >= 0) * (idx < size)
    x = ct.load(a, index=(ct.bid(0),), shape=(t,))
    ct.store(b, index=(ct.bid(0),), tile=x * ct.astype(valid, ct.float32))


@ct.kernel
def cast_then_multiply(a, b, t: ct.Constant[int], size: ct.Constant[int]):
    """RIGHT: cast each comparison to int32 first."""
    idx = ct.arange(t, dtype=ct.int32) - 8
    valid = ct.astype(idx >= 0, ct.int32) * ct.astype(idx < size, ct.int32)
    x = ct.load(a, index=(ct.bid(0),), shape=(t,))
    ct.store(b, index=(ct.bid(0),), tile=x * ct.astype(valid, ct.float32))


@ct.kernel
def where_with_mask(a, b, t: ct.Constant[int], size: ct.Constant[int]):
    """RIGHT (alternative): & of the comparisons, then ct.where."""
    idx = ct.arange(t, dtype=ct.int32) - 8
    valid_mask = (idx >= 0) & (idx < size)
    x = ct.load(a, index=(ct.bid(0),), shape=(t,))
    ct.store(b, index=(ct.bid(0),), tile=ct.where(valid_mask, x, ct.full((t,), 0, dtype=ct.float32)))


SIG = [aot_signature(aot_array(ct.float32, 1), aot_array(ct.float32, 1), 64, 40)]
AOT_SIGNATURES = {"bool_times_bool": SIG, "cast_then_multiply": SIG, "where_with_mask": SIG}
