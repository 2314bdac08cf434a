"""Reshape to the index's rank before storing; a 0-d result may go anywhere."""
import cuda.tile as ct

ORACLE = [
    {"kernel": "max_pool", "args": ("f32:4", "f32:3", 2, 16), "compiles": True},
    {"kernel": "row_means", "args": ("f32:2", "f32:1", 4, 64), "compiles": True},
]


@ct.kernel
def max_pool(x, y, tb: ct.Constant[int], tw: ct.Constant[int]):
    a, b = ct.bid(0), ct.bid(1)
    t = ct.load(x, index=(a, b, 0, 0), shape=(tb, tb, tw, tw))
    peak = ct.max(t, axis=(2, 3), keepdims=True)
    ct.store(y, index=(a, b, 0), tile=ct.reshape(peak, (tb, tb, 1)))


@ct.kernel
def row_means(x, y, tm: ct.Constant[int], tn: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0), 0), shape=(tm, tn))
    ct.store(y, index=(ct.bid(0),), tile=ct.sum(t, axis=1) / tn)
    ct.store(y, index=(0,), tile=ct.sum(t))      # 0-d: broadcast to any rank
