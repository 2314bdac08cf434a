"""A float16 accumulator: compiles (ct.mma allows f16 acc for f16 inputs), but every
partial sum is rounded to float16, so long K sums lose most of their digits."""
import cuda.tile as ct

ORACLE = [{"kernel": "matmul", "args": ("f16:2", "f16:2", "f16:2", 32, 32, 16), "compiles": True}]


@ct.kernel
def matmul(a, b, c, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]):
    acc = ct.full((tm, tn), 0, dtype=ct.float16)
    zero = ct.PaddingMode.ZERO
    for k in range(ct.num_tiles(a, axis=1, shape=(tm, tk))):
        a_tile = ct.load(a, index=(ct.bid(0), k), shape=(tm, tk), padding_mode=zero)
        b_tile = ct.load(b, index=(k, ct.bid(1)), shape=(tk, tn), padding_mode=zero)
        acc = ct.mma(a_tile, b_tile, acc)  # expect: TP010
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=acc)
