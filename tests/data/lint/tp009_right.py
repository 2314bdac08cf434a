"""Padded walks, and unpadded loads whose stray lanes never reach a valid output."""
import cuda.tile as ct

ORACLE = [
    {"kernel": "matmul", "args": ("f16:2", "f16:2", "f32:2", 32, 32, 16), "compiles": True},
    {"kernel": "scale_columns", "args": ("f32:2", "f32:2", 4, 64), "compiles": True},
    {"kernel": "column_sums", "args": ("f32:2", "f32:2", 64), "compiles": True},
]


@ct.kernel
def matmul(a, b, c, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    acc = ct.zeros((tm, tn), dtype=ct.float32)
    zero = ct.PaddingMode.ZERO
    for k in range(ct.num_tiles(a, axis=1, shape=(tm, tk))):
        a_tile = ct.load(a, index=(i, k), shape=(tm, tk), padding_mode=zero)
        b_tile = ct.load(b, index=(k, j), shape=(tk, tn), padding_mode=zero)
        acc = ct.mma(a_tile, b_tile, acc)
    ct.store(c, index=(i, j), tile=acc)


@ct.kernel
def scale_columns(x, y, tm: ct.Constant[int], tn: ct.Constant[int]):
    # Elementwise per tile, and a reduction across the other axis: the stray lanes of
    # the last column tile only reach lanes that the bounds-checked store drops.
    for j in range(ct.num_tiles(x, axis=1, shape=(tm, tn))):
        t = ct.load(x, index=(ct.bid(0), j), shape=(tm, tn))
        col_max = ct.max(t, axis=0, keepdims=True)
        ct.store(y, index=(ct.bid(0), j), tile=t / col_max)


@ct.kernel
def column_sums(x, y, tn: ct.Constant[int]):
    # The walk goes down the rows one (1, tn) tile at a time: a tile one row high
    # never sticks out along the walked axis, so folding rows together is safe here.
    total = ct.zeros((1, tn), dtype=ct.float32)
    for r in range(ct.num_tiles(x, axis=0, shape=(1, tn))):
        total += ct.load(x, index=(r, ct.bid(0)), shape=(1, tn))
    ct.store(y, index=(0, ct.bid(0)), tile=total)
