"""Pitfall 7: tile matmul takes 2-D or 3-D tiles; reshape a 4-D tile first."""

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def matmul_4d(a, b, c):
    """WRONG: ct.matmul on (2, 2, 16, 16) tiles."""
    x = ct.load(a, index=(0, 0, 0, 0), shape=(2, 2, 16, 16))
    y = ct.load(b, index=(0, 0, 0, 0), shape=(2, 2, 16, 16))
    ct.store(c, index=(0, 0, 0, 0), tile=ct.matmul(x, y))


@ct.kernel
def matmul_reshaped_to_3d(a, b, c):
    """RIGHT: reshape to (4, 16, 16), multiply, reshape back."""
    x = ct.reshape(ct.load(a, index=(0, 0, 0, 0), shape=(2, 2, 16, 16)), (4, 16, 16))
    y = ct.reshape(ct.load(b, index=(0, 0, 0, 0), shape=(2, 2, 16, 16)), (4, 16, 16))
    ct.store(c, index=(0, 0, 0, 0), tile=ct.reshape(ct.matmul(x, y), (2, 2, 16, 16)))


SIG = [aot_signature(aot_array(ct.float16, 4), aot_array(ct.float16, 4), aot_array(ct.float32, 4))]
AOT_SIGNATURES = {"matmul_4d": SIG, "matmul_reshaped_to_3d": SIG}
