"""Pitfall 14: padding an out-of-bounds load."""

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def load_with_padding_value(a, b, t: ct.Constant[int]):
    """The list's fix: ct.load(..., padding_value=0.0)."""
    x = ct.load(a, index=(ct.bid(0),), shape=(t,), padding_value=0.0)
    ct.store(b, index=(ct.bid(0),), tile=x)


@ct.kernel
def load_with_padding_mode(a, b, t: ct.Constant[int]):
    """What cuda-tile's ct.load takes instead: padding_mode=ct.PaddingMode.ZERO."""
    x = ct.load(a, index=(ct.bid(0),), shape=(t,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(b, index=(ct.bid(0),), tile=x)


SIG = [aot_signature(aot_array(ct.float32, 1), aot_array(ct.float32, 1), 64)]
AOT_SIGNATURES = {"load_with_padding_value": SIG, "load_with_padding_mode": SIG}
