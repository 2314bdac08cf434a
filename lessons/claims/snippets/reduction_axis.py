"""Python reductions drop the reduced axis unless keepdims=True (day79, the C++ mirror)."""

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def softmax_without_keepdims(x, y, rows: ct.Constant[int], width: ct.Constant[int]):
    """WRONG: ct.max(..., axis=1) is (rows,), which does not broadcast against (rows, width)."""
    block = ct.load(x, index=(ct.bid(0), 0), shape=(rows, width))
    num = ct.exp(block - ct.max(block, axis=1))
    ct.store(y, index=(ct.bid(0), 0), tile=num / ct.sum(num, axis=1))


@ct.kernel
def softmax_with_keepdims(x, y, rows: ct.Constant[int], width: ct.Constant[int]):
    """RIGHT: keepdims=True gives a (rows, 1) column; the static asserts pin both shapes."""
    block = ct.load(x, index=(ct.bid(0), 0), shape=(rows, width))
    dropped = ct.max(block, axis=1)
    ct.static_assert(dropped.shape == (rows,), "without keepdims the axis is dropped")
    top = ct.max(block, axis=1, keepdims=True)
    ct.static_assert(top.shape == (rows, 1), "with keepdims the axis is kept, length 1")
    num = ct.exp(block - top)
    ct.store(y, index=(ct.bid(0), 0), tile=num / ct.sum(num, axis=1, keepdims=True))


SIG = [aot_signature(aot_array(ct.float32, 2), aot_array(ct.float32, 2), 8, 128)]
AOT_SIGNATURES = {"softmax_without_keepdims": SIG, "softmax_with_keepdims": SIG}
