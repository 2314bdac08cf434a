"""Tile walks over ct.num_tiles/ct.cdiv with no padding, into a reduction: compiles, but
when K (or the row length) is not a multiple of the tile, the last tile's outside lanes
are undetermined and land in the sum."""
import cuda.tile as ct

ORACLE = [
    {"kernel": "matmul", "args": ("f16:2", "f16:2", "f32:2", 32, 32, 16), "compiles": True},
    {"kernel": "row_sum", "args": ("f32:2", "f32:1", 1024), "compiles": True},
]


@ct.kernel
def matmul(a, b, c, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((tm, tn), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(tm, tk))):
        a_tile = ct.load(a, index=(i, k), shape=(tm, tk))  # expect: TP009
        b_tile = ct.load(b, index=(k, j), shape=(tk, tn))  # expect: TP009
        acc = ct.mma(a_tile, b_tile, acc)
    ct.store(c, index=(i, j), tile=acc)


@ct.kernel
def row_sum(x, y, tn: ct.Constant[int]):
    row = ct.bid(0)
    total = ct.zeros((1, tn), dtype=ct.float32)
    steps = ct.cdiv(x.shape[1], tn)
    for j in range(steps):
        total += ct.load(x, index=(row, j), shape=(1, tn))  # expect: TP009
    ct.store(y, index=(row,), tile=ct.sum(total, axis=1))
