"""Pitfall 11: ct.load(..., order='F') versus load + ct.transpose (compile half; gpu_order.py runs them)."""

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def load_order_f(a, b, t: ct.Constant[int]):
    """The list's WRONG code: it says this compiles but does not transpose."""
    w = ct.load(a, index=(ct.bid(0), 0), shape=(t, t), order="F")
    ct.store(b, index=(ct.bid(0), 0), tile=w)


@ct.kernel
def load_then_transpose(a, b, t: ct.Constant[int]):
    """The list's RIGHT code."""
    w = ct.load(a, index=(ct.bid(0), 0), shape=(t, t))
    ct.store(b, index=(ct.bid(0), 0), tile=ct.transpose(w))


SIG = [aot_signature(aot_array(ct.float32, 2), aot_array(ct.float32, 2), 32)]
AOT_SIGNATURES = {"load_order_f": SIG, "load_then_transpose": SIG}
