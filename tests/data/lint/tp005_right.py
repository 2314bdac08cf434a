"""Combine masks with &, cast before arithmetic, or mask with ct.where."""
import cuda.tile as ct

ORACLE = [
    {"kernel": "band_mask", "args": ("f32:1", "i32:1", 64, 5, 40), "compiles": True},
    {"kernel": "masked_scale", "args": ("f32:1", "f32:1", 64, 40), "compiles": True},
]


@ct.kernel
def band_mask(x, y, tile: ct.Constant[int], lo: ct.Constant[int], hi: ct.Constant[int]):
    idx = ct.arange(tile, dtype=ct.int32)
    valid = ct.astype(idx >= lo, ct.int32) * ct.astype(idx < hi, ct.int32)
    both = (idx >= lo) & (idx < hi)
    even_tile = (tile % 2 == 0) * (lo < hi)   # compile-time constants: plain Python
    ct.store(y, index=(0,), tile=valid + ct.astype(both, ct.int32) + even_tile)


@ct.kernel
def masked_scale(x, y, tile: ct.Constant[int], n: ct.Constant[int]):
    idx = ct.arange(tile, dtype=ct.int32)
    t = ct.load(x, index=(0,), shape=(tile,), padding_mode=ct.PaddingMode.ZERO)
    scaled = t * (idx < n)      # a float tile times a mask is fine
    ct.store(y, index=(0,), tile=ct.where(idx < n, scaled, 0.0))
