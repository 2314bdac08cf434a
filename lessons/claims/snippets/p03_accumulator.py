"""Pitfall 3: accumulate in a promoted dtype, cast back with ct.astype."""

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def float32_accumulator_then_astype(x, y, t: ct.Constant[int]):
    """RIGHT: float16 data summed in a float32 tile, cast back to float16 for the store."""
    acc = ct.full((t,), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=0, shape=(t,))):
        acc = acc + ct.astype(ct.load(x, index=(k,), shape=(t,)), ct.float32)
    ct.store(y, index=(0,), tile=ct.astype(acc, ct.float16))


AOT_SIGNATURES = {
    "float32_accumulator_then_astype": [aot_signature(aot_array(ct.float16, 1), aot_array(ct.float16, 1), 64)],
}
