"""The cuTile Python side of the cuTile.jl mapping: the Python forms its Julia patterns map to.

Each kernel is the Python counterpart of one pattern of lessons/docs/cutile-julia-mapping.md,
compiled by AOT export (no GPU). Python counts axes and block ids from 0 where Julia counts
from 1, and its reductions drop the reduced axis unless asked to keep it.
"""

import cuda.tile as ct
from claimkit import aot_array, aot_signature


@ct.kernel
def block_ids_from_zero(x, out, BLOCK: ct.Constant[int]):
    """ct.bid(0) / ct.num_blocks(0): the first grid axis (Julia: ct.bid(1))."""
    t = ct.load(x, index=(ct.bid(0),), shape=(BLOCK,))
    ct.store(out, index=(ct.bid(0),), tile=t + ct.num_blocks(0))


@ct.kernel
def block_id_axis_three(x, out, BLOCK: ct.Constant[int]):
    """ct.bid(3): there is no fourth grid axis, with 0-based axes."""
    t = ct.load(x, index=(ct.bid(3),), shape=(BLOCK,))
    ct.store(out, index=(ct.bid(3),), tile=t)


@ct.kernel
def elementwise_1d(x, out, BLOCK_SIZE: ct.Constant[int]):
    """The 1-D element-wise pattern: block-indexed load and store of one tile."""
    t = ct.load(x, index=(ct.bid(0),), shape=(BLOCK_SIZE,))
    ct.store(out, index=(ct.bid(0),), tile=ct.maximum(t, 0.0))


@ct.kernel(occupancy=2)
def persistent_rows(data, TILE_HD: ct.Constant[int]):
    """Persistent scheduling: occupancy as a kernel option; rows from bid stepping by num_blocks."""
    row = ct.bid(0)
    while row < data.shape[0]:
        t = ct.load(data, index=(row, 0), shape=(1, TILE_HD))
        ct.store(data, index=(row, 0), tile=t * 2.0)
        row += ct.num_blocks(0)


@ct.kernel
def online_softmax(output, input, TILE_SIZE: ct.Constant[int]):
    """Pattern A: a column loop counted by ct.num_tiles, loads padded with -inf, running max and sum."""
    row = ct.bid(0)
    n = ct.num_tiles(input, axis=1, shape=(1, TILE_SIZE))
    m_prev = ct.full((1, 1), -float("inf"), dtype=ct.float32)
    l_prev = ct.zeros((1, 1), dtype=ct.float32)
    for j in range(n):
        t = ct.load(input, index=(row, j), shape=(1, TILE_SIZE), padding_mode=ct.PaddingMode.NEG_INF)
        t = ct.astype(t, ct.float32)
        m_cur = ct.maximum(ct.max(t, axis=1, keepdims=True), m_prev)
        l_prev = l_prev * ct.exp(m_prev - m_cur) + ct.sum(ct.exp(t - m_cur), axis=1, keepdims=True)
        m_prev = m_cur
    for j in range(n):
        t = ct.astype(ct.load(input, index=(row, j), shape=(1, TILE_SIZE), padding_mode=ct.PaddingMode.NEG_INF),
                      ct.float32)
        ct.store(output, index=(row, j), tile=ct.astype(ct.exp(t - m_prev) / l_prev, output.dtype))


@ct.kernel(occupancy=4)
def chunked_gather_max(output, input, n_cols: ct.Constant[int], TILE_SIZE: ct.Constant[int]):
    """Pattern B: column chunks gathered with check_bounds and padding_value, indices from arange."""
    row = ct.bid(0)
    offsets = ct.arange(TILE_SIZE, dtype=ct.int32)
    row_max = ct.full((TILE_SIZE,), -float("inf"), dtype=ct.float32)
    for chunk in range(ct.cdiv(n_cols, TILE_SIZE)):
        cols = ct.broadcast_to(chunk * TILE_SIZE, (TILE_SIZE,)) + offsets
        rows = ct.broadcast_to(row, (TILE_SIZE,))
        got = ct.gather(input, (rows, cols), check_bounds=True, padding_value=-float("inf"))
        row_max = ct.maximum(row_max, ct.astype(got, ct.float32))
    ct.store(output, index=(row, 0), tile=ct.reshape(ct.max(row_max, axis=0, keepdims=True), (1, 1)))


V = [aot_signature(aot_array(ct.float32, 1), aot_array(ct.float32, 1), 128)]
AOT_SIGNATURES = {
    "block_ids_from_zero": V,
    "block_id_axis_three": V,
    "elementwise_1d": V,
    "persistent_rows": [aot_signature(aot_array(ct.float32, 2), 64)],
    "online_softmax": [aot_signature(aot_array(ct.float32, 2), aot_array(ct.float32, 2), 128)],
    "chunked_gather_max": [aot_signature(aot_array(ct.float32, 2), aot_array(ct.float32, 2), 1000, 128)],
}
