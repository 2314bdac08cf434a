"""Pitfall 9: a constant is not created through its type."""

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def constant_from_its_type(a, b, t: ct.Constant[int]):
    """WRONG: x: ct.Constant[int] = ct.Constant[int](1)."""
    x: ct.Constant[int] = ct.Constant[int](1)
    ct.store(b, index=(ct.bid(0),), tile=ct.load(a, index=(ct.bid(0),), shape=(t,)) + x)


@ct.kernel
def plain_constant(a, b, t: ct.Constant[int]):
    """RIGHT: x = 1."""
    x = 1
    ct.store(b, index=(ct.bid(0),), tile=ct.load(a, index=(ct.bid(0),), shape=(t,)) + x)


SIG = [aot_signature(aot_array(ct.float32, 1), aot_array(ct.float32, 1), 64)]
AOT_SIGNATURES = {"constant_from_its_type": SIG, "plain_constant": SIG}
