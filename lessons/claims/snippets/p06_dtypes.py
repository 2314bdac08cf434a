"""Pitfall 6: dtypes in a kernel come from the ct namespace."""

import cuda.tile as ct
import numpy as np
from claimkit import aot_array, aot_signature


@ct.kernel
def numpy_dtype(a, b, t: ct.Constant[int]):
    """WRONG (per the list): a numpy dtype inside the kernel."""
    x = ct.load(a, index=(ct.bid(0),), shape=(t,))
    ct.store(b, index=(ct.bid(0),), tile=x + ct.full((t,), 1, dtype=np.float32))


@ct.kernel
def ct_dtype(a, b, t: ct.Constant[int]):
    """RIGHT: ct.float32."""
    x = ct.load(a, index=(ct.bid(0),), shape=(t,))
    ct.store(b, index=(ct.bid(0),), tile=x + ct.full((t,), 1, dtype=ct.float32))


SIG = [aot_signature(aot_array(ct.float32, 1), aot_array(ct.float32, 1), 64)]
AOT_SIGNATURES = {"numpy_dtype": SIG, "ct_dtype": SIG}
