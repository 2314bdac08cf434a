"""Accumulate in float32 and cast once, before the store."""
import cuda.tile as ct

ORACLE = [{"kernel": "matmul", "args": ("f16:2", "f16:2", "f16:2", 32, 32, 16), "compiles": True}]


@ct.kernel
def matmul(a, b, c, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]):
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    zero = ct.PaddingMode.ZERO
    for k in range(ct.num_tiles(a, axis=1, shape=(tm, tk))):
        a_tile = ct.load(a, index=(ct.bid(0), k), shape=(tm, tk), padding_mode=zero)
        b_tile = ct.load(b, index=(k, ct.bid(1)), shape=(tk, tn), padding_mode=zero)
        acc = ct.mma(a_tile, b_tile, acc)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=ct.astype(acc, c.dtype))
