"""A plain value inside the kernel; ct.Constant only annotates parameters."""
import cuda.tile as ct

ORACLE = [{"kernel": "add_one", "args": ("f32:1", "f32:1", 16), "compiles": True}]


@ct.kernel
def add_one(x, y, tile: ct.Constant[int]):
    one = 1
    ct.store(y, index=(0,), tile=ct.load(x, index=(0,), shape=(tile,)) + one)


def launch(stream, x, y):
    # On the host, ct.Constant[int](16) is just int(16): odd, but harmless.
    ct.launch(stream, (1, 1, 1), add_one, (x, y, ct.Constant[int](16)))
