"""Indexing and slicing tiles and arrays inside kernels: cuTile rejects each."""
import cuda.tile as ct

ORACLE = [
    {"kernel": "first_element", "args": ("f32:1", "f32:1", 16), "compiles": False},
    {"kernel": "column_slice", "args": ("f32:2", "f32:2", 16), "compiles": False},
    {"kernel": "array_element", "args": ("f32:1", "f32:1"), "compiles": False},
    {"kernel": "set_element", "args": ("f32:1", 16), "compiles": False},
]


@ct.kernel
def first_element(x, y, tile: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(tile,))
    ct.store(y, index=(0,), tile=t[0])  # expect: TP006


@ct.kernel
def column_slice(x, y, tile: ct.Constant[int]):
    t = ct.load(x, index=(0, 0), shape=(tile, tile))
    ct.store(y, index=(0, 0), tile=t[:, 0:1])  # expect: TP006


@ct.kernel
def array_element(x, y):
    first = x[0]  # expect: TP006
    ct.store(y, index=(0,), tile=ct.load(x, index=(0,), shape=(16,)) * first)


@ct.kernel
def set_element(y, tile: ct.Constant[int]):
    t = ct.zeros((tile,), dtype=ct.float32)
    t[0] = 1.0  # expect: TP006
    ct.store(y, index=(0,), tile=t)
