"""ct.Constant[int](1): Constant is an annotation; cuTile rejects the call's result."""
import cuda.tile as ct

ORACLE = [{"kernel": "add_one", "args": ("f32:1", "f32:1", 16), "compiles": False}]


@ct.kernel
def add_one(x, y, tile: ct.Constant[int]):
    one: ct.Constant[int] = ct.Constant[int](1)  # expect: TP012
    ct.store(y, index=(0,), tile=ct.load(x, index=(0,), shape=(tile,)) + one)
