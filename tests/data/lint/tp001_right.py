"""Tile indices for load/store; element offsets only where they belong (gather, Slice)."""
import cuda.tile as ct

ORACLE = [
    {"kernel": "scale_rows", "args": ("f32:2", "f32:2", 16, 32), "compiles": True},
    {"kernel": "gather_window", "args": ("f32:1", "f32:1", 64), "compiles": True},
    {"kernel": "row_at_a_time", "args": ("f32:2", "f32:2", 4, 32), "compiles": True},
]


@ct.kernel
def scale_rows(x, y, tm: ct.Constant[int], tn: ct.Constant[int]):
    bm = ct.bid(0)
    bn = ct.bid(1)
    t = ct.load(x, index=(bm, bn), shape=(tm, tn))
    ct.store(y, index=(bm, bn), tile=t * 2.0)


@ct.kernel
def gather_window(x, y, tile: ct.Constant[int]):
    # gather takes element indices: bid * tile + arange is exactly right here.
    offsets = ct.bid(0) * tile + ct.arange(tile, dtype=ct.int32)
    t = ct.gather(x, offsets)
    ct.store(y, index=(ct.bid(0),), tile=t)


@ct.kernel
def row_at_a_time(x, y, rows: ct.Constant[int], tn: ct.Constant[int]):
    # A block owns `rows` rows and loads them one (1, tn) tile at a time: with a tile
    # height of 1, tile index and row number coincide, so bid * rows + r is right.
    for r in range(rows):
        t = ct.load(x, index=(ct.bid(0) * rows + r, 0), shape=(1, tn))
        ct.store(y, index=(ct.bid(0) * rows + r, 0), tile=t)
