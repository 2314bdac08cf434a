"""Tile dimensions that are not compile-time powers of two: cuTile rejects each."""
import cuda.tile as ct

ORACLE = [
    {"kernel": "literal_48", "args": ("f32:1", "f32:1"), "compiles": False},
    {"kernel": "runtime_width", "args": ("f32:2", "f32:2", "i32"), "compiles": False},
    {"kernel": "local_size", "args": ("i32:1",), "compiles": False},
]


@ct.kernel
def literal_48(x, y):
    t = ct.load(x, index=(ct.bid(0),), shape=(48,))  # expect: TP003
    ct.store(y, index=(ct.bid(0),), tile=t)


@ct.kernel
def runtime_width(x, y, width):
    t = ct.load(x, index=(ct.bid(0), 0), shape=(1, width))  # expect: TP003
    ct.store(y, index=(ct.bid(0), 0), tile=t)


@ct.kernel
def local_size(y):
    size = 3 * 32
    ct.store(y, index=(0,), tile=ct.arange(size, dtype=ct.int32))  # expect: TP003
