"""The device-side equivalents, plus host calls where they are allowed."""
import math

import cuda.tile as ct
import numpy as np

ORACLE = [
    {"kernel": "tiles_and_math", "args": ("f32:1", "f32:1", 64), "compiles": True},
    {"kernel": "static_host_math", "args": ("f32:1", "f32:1", 64), "compiles": True},
]


@ct.kernel
def tiles_and_math(x, y, tile: ct.Constant[int]):
    n = ct.cdiv(x.shape[0], tile)
    rank = len(x.shape)          # len() of a tuple is fine
    for i in range(n):
        t = ct.load(x, index=(i,), shape=(tile,), padding_mode=ct.PaddingMode.ZERO)
        t = ct.exp(t) + abs(-1.0) + min(rank, 2) + np.float32(0.5) + math.pi
        print(t)                 # print() works in kernels since cuda-tile 1.2
        ct.store(y, index=(i,), tile=t)


@ct.kernel
def static_host_math(x, y, tile: ct.Constant[int]):
    # ct.static_eval runs host Python at compile time.
    half = ct.static_eval(math.ceil(tile / 2))
    t = ct.load(x, index=(ct.bid(0),), shape=(tile,))
    ct.store(y, index=(ct.bid(0),), tile=t + half)


def launch(stream, x, y):
    tile = 64
    grid = (math.ceil(x.shape[0] / tile), 1, 1)   # host code: math is fine here
    ct.launch(stream, grid, tiles_and_math, (x, y, tile))
