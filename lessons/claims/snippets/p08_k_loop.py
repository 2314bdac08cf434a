"""Pitfall 8: a loop over the reduction dimension accumulating with ct.mma (3-D batch)."""

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def batched_matmul_k_loop(A, B, C, tb: ct.Constant[int], tm: ct.Constant[int], tn: ct.Constant[int],
                          tk: ct.Constant[int]):
    bid_b, bid_m, bid_n = ct.bid(0), ct.bid(1), ct.bid(2)
    acc = ct.full((tb, tm, tn), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=2, shape=(tb, tm, tk))):
        tx = ct.load(A, index=(bid_b, bid_m, k), shape=(tb, tm, tk))
        ty = ct.load(B, index=(bid_b, k, bid_n), shape=(tb, tk, tn))
        acc = ct.mma(tx, ty, acc)
    ct.store(C, index=(bid_b, bid_m, bid_n), tile=ct.astype(acc, C.dtype))


F16 = ct.float16
AOT_SIGNATURES = {
    "batched_matmul_k_loop": [aot_signature(aot_array(F16, 3), aot_array(F16, 3), aot_array(F16, 3), 2, 32, 32, 16)],
}
