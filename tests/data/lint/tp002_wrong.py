"""Host-only calls inside a kernel: cuTile rejects each ('... is not supported in device code')."""
import math

import cuda.tile as ct
import numpy as np

ORACLE = [
    {"kernel": "ceil_tiles", "args": ("f32:1", "f32:1", 64), "compiles": False},
    {"kernel": "numpy_exp", "args": ("f32:1", "f32:1", 64), "compiles": False},
    {"kernel": "builtins", "args": ("f32:1", "f32:1", 64), "compiles": False},
    {"kernel": "len_of_array", "args": ("f32:1", "f32:1", 64), "compiles": False},
]


@ct.kernel
def ceil_tiles(x, y, tile: ct.Constant[int]):
    n = math.ceil(x.shape[0] / tile)  # expect: TP002
    for i in range(n):
        ct.store(y, index=(i,), tile=ct.load(x, index=(i,), shape=(tile,)))


@ct.kernel
def numpy_exp(x, y, tile: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(tile,))
    ct.store(y, index=(ct.bid(0),), tile=np.exp(t))  # expect: TP002


@ct.kernel
def builtins(x, y, tile: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(tile,))
    total = sum((1, 2, 3))  # expect: TP002
    ct.store(y, index=(ct.bid(0),), tile=t * round(2.5) + total)  # expect: TP002


@ct.kernel
def len_of_array(x, y, tile: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(tile,))
    ct.store(y, index=(ct.bid(0),), tile=t + len(x))  # expect: TP002
