"""Pitfall 14 on the GPU: out-of-bounds gathers, and masking NaN.

a = 1, 2, ..., 40 (float32), read as one 64-wide tile: lanes 40..63 are out of bounds.

    --case gather-default  stated (the list): ct.gather with out-of-bounds indices and no
                           padding_value reads garbage (some lane 40..63 is not 0)
    --case nan-mask        stated: tile * mask keeps NaN in masked lanes (NaN * 0 = NaN);
                           ct.where(mask, tile, 0) gives 0 there
"""

import sys

import cuda.tile as ct
import numpy as np
from claimkit import case_arg, gpu_or_exit, report

T, LENGTH = 64, 40


@ct.kernel
def gather_without_padding_value(a, out, t: ct.Constant[int]):
    ct.store(out, index=(0,), tile=ct.gather(a, ct.arange(t, dtype=ct.int32)))


@ct.kernel
def mask_by_multiply_and_where(a, by_multiply, by_where, t: ct.Constant[int], n: ct.Constant[int]):
    x = ct.load(a, index=(0,), shape=(t,), padding_mode=ct.PaddingMode.NAN)
    mask = ct.arange(t, dtype=ct.int32) < n
    ct.store(by_multiply, index=(0,), tile=x * ct.astype(mask, ct.float32))
    ct.store(by_where, index=(0,), tile=ct.where(mask, x, ct.full((t,), 0, dtype=ct.float32)))


def main() -> int:
    case = case_arg(("gather-default", "nan-mask"))
    cp = gpu_or_exit()
    a = cp.arange(1, LENGTH + 1, dtype=cp.float32)
    stream = cp.cuda.get_current_stream()
    if case == "gather-default":
        out = cp.full(T, -7.0, dtype=cp.float32)
        ct.launch(stream, (1, 1, 1), gather_without_padding_value, (a, out, T))
        got = cp.asnumpy(out)
        oob = got[LENGTH:]
        inside = np.array_equal(got[:LENGTH], np.arange(1, LENGTH + 1, dtype=np.float32))
        garbage = bool(np.any(oob != 0))
        vals = sorted({float(v) for v in oob})[:4]
        return report(garbage, f"lanes 40..63 read {vals}{' ...' if len(set(oob.tolist())) > 4 else ''}; "
                               f"lanes 0..39 {'are' if inside else 'are NOT'} a[0..39]")
    mul, whr = cp.zeros(T, dtype=cp.float32), cp.zeros(T, dtype=cp.float32)
    ct.launch(stream, (1, 1, 1), mask_by_multiply_and_where, (a, mul, whr, T, LENGTH))
    mul_h, whr_h = cp.asnumpy(mul)[LENGTH:], cp.asnumpy(whr)[LENGTH:]
    observed = bool(np.all(np.isnan(mul_h)) and np.all(whr_h == 0))
    return report(observed, f"masked lanes: tile * mask gives {sorted({str(v) for v in mul_h})}, "
                            f"ct.where gives {sorted({str(v) for v in whr_h})}")


if __name__ == "__main__":
    sys.exit(main())
