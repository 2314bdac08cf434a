"""None/:-subscripts add axes; one element comes from a scalar load or ct.extract."""
import cuda.tile as ct

ORACLE = [
    {"kernel": "outer_product", "args": ("f32:1", "f32:2", 16), "compiles": True},
    {"kernel": "first_element", "args": ("f32:1", "f32:1", 16), "compiles": True},
]


@ct.kernel
def outer_product(x, y, tile: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(tile,))
    ct.store(y, index=(0, 0), tile=t[:, None] * t[None, :])


@ct.kernel
def first_element(x, y, tile: ct.Constant[int]):
    n = x.shape[0]                                  # a tuple: indexing is fine
    first = ct.load(x, index=(0,), shape=())        # one element, 0-d
    head = ct.extract(ct.load(x, index=(0,), shape=(tile,)), index=(0,), shape=(1,))
    ct.store(y, index=(0,), tile=head + first + n)
