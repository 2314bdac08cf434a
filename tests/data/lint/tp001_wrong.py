"""Element offsets where tile indices belong: compiles, but reads and writes the wrong tiles.

ct.load/ct.store multiply the index by the tile shape themselves, so bm * tm addresses
tile bm * tm (element bm * tm * tm), far past the intended one.
"""
import cuda.tile as ct

ORACLE = [
    {"kernel": "scale_rows", "args": ("f32:2", "f32:2", 16, 32), "compiles": True},
    {"kernel": "gather_as_load", "args": ("f32:1", "f32:1", 64), "compiles": False},
]


@ct.kernel
def scale_rows(x, y, tm: ct.Constant[int], tn: ct.Constant[int]):
    bm = ct.bid(0)
    bn = ct.bid(1)
    t = ct.load(x, index=(bm * tm, bn), shape=(tm, tn))  # expect: TP001
    out = t * 2.0
    ct.store(y, index=(bm, tn * bn), tile=out)  # expect: TP001


@ct.kernel
def gather_as_load(x, y, tile: ct.Constant[int]):
    t = ct.gather(x, (ct.bid(0),), shape=(tile,))  # expect: TP001
    ct.store(y, index=(ct.bid(0),), tile=t)
