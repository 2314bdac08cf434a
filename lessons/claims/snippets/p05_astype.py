"""Pitfall 5: "ct.astype does not work on constants"."""

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def astype_on_literal(a, b, t: ct.Constant[int]):
    """WRONG (per the list): ct.astype(1.0, ct.float32)."""
    x = ct.load(a, index=(ct.bid(0),), shape=(t,))
    ct.store(b, index=(ct.bid(0),), tile=x + ct.astype(1.0, ct.float32))


@ct.kernel
def astype_on_tile(a, b, t: ct.Constant[int]):
    """RIGHT: ct.astype on a tile."""
    x = ct.load(a, index=(ct.bid(0),), shape=(t,))
    ct.store(b, index=(ct.bid(0),), tile=ct.astype(x, ct.float32) + 1.0)


SIG = [aot_signature(aot_array(ct.float32, 1), aot_array(ct.float32, 1), 64)]
AOT_SIGNATURES = {"astype_on_literal": SIG, "astype_on_tile": SIG}
