"""Two small cuTile kernels for the export tests (tests/test_build.py): ``copy_tile`` exports for
every target; ``bad_tile`` loads a tile of 48 elements, which cuTile refuses (a tile dimension must
be a power of two), until a test writes 64 there."""

import cuda.tile as ct
from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature

BAD_TILE = 48


@ct.kernel
def copy_tile(a, b):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(64,)))


@ct.kernel
def bad_tile(a, b):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(BAD_TILE,)))


def _array():
    return ArrayConstraint(ct.float32, 1, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                           may_alias_internally=False, stride_constant=(1,), base_addr_divisible_by=16)


_SIGNATURES = [KernelSignature([_array(), _array()], CallingConvention.cutile_python_v1())]
AOT_SIGNATURES = {"copy_tile": _SIGNATURES, "bad_tile": _SIGNATURES}
