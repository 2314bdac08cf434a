"""ct.num_tiles with a 1-d tile shape for a 2-d array: 'Expected shape length to be 2, got 1'."""
import cuda.tile as ct

ORACLE = [{"kernel": "row_sum", "args": ("f32:2", "f32:2", 1, 64), "compiles": False}]


@ct.kernel
def row_sum(x, y, tm: ct.Constant[int], tn: ct.Constant[int]):
    acc = ct.zeros((tm, 1), dtype=ct.float32)
    for j in range(ct.num_tiles(x, axis=1, shape=(tn,))):  # expect: TP007
        t = ct.load(x, index=(ct.bid(0), j), shape=(tm, tn), padding_mode=ct.PaddingMode.ZERO)
        acc += ct.sum(t, axis=1, keepdims=True)
    ct.store(y, index=(ct.bid(0), 0), tile=acc)
