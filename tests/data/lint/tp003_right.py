"""Powers of two from literals and ct.Constant arguments; the array itself may be any size."""
import cuda.tile as ct

ConstInt = ct.Constant[int]

ORACLE = [
    {"kernel": "constant_width", "args": ("f32:2", "f32:2", 64), "compiles": True},
    {"kernel": "derived_sizes", "args": ("f32:2", "f32:1", 16), "compiles": True},
]


@ct.kernel
def constant_width(x, y, width: ConstInt):
    t = ct.load(x, index=(ct.bid(0), 0), shape=(1, width), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(ct.bid(0), 0), tile=t)


@ct.kernel
def derived_sizes(x, y, tile: ct.Constant[int]):
    size = 2 * 32
    t = ct.load(x, index=(0, 0), shape=(tile, 4))
    flat = ct.reshape(t, (-1,))
    ct.store(y, index=(0,), tile=flat + ct.zeros((tile * 4,), dtype=ct.float32))
    ct.store(y, index=(1,), tile=ct.arange(size, dtype=ct.float32))
