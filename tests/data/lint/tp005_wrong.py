"""Arithmetic on two booleans: 'Binary arithmetic op `mul` does not support bool'."""
import cuda.tile as ct

ORACLE = [
    {"kernel": "band_mask", "args": ("f32:1", "i32:1", 64, 5, 40), "compiles": False},
    {"kernel": "block_in_range", "args": ("i32:1", "i32"), "compiles": False},
]


@ct.kernel
def band_mask(x, y, tile: ct.Constant[int], lo: ct.Constant[int], hi: ct.Constant[int]):
    idx = ct.arange(tile, dtype=ct.int32)
    valid = (idx >= lo) * (idx < hi)  # expect: TP005
    ct.store(y, index=(0,), tile=valid)


@ct.kernel
def block_in_range(y, n):
    b = ct.bid(0)
    above = b >= 0
    below = b < n
    count = above + below  # expect: TP005
    ct.store(y, index=(0,), tile=count)
