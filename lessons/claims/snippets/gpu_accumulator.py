"""Pitfall 3 on the GPU: accumulate float16 data in float32, then ct.astype back.

x: 1024 tiles of 64 float16 values in [0, 1); each lane sums its 1024 values. The
reference is the float64 sum of the same float16 inputs.

    --case float16-accumulator  stated: a float16 accumulator is much less accurate
                                (max relative error > 8 x the float32 path's, and > 2^-10)
    --case float32-accumulator  stated: the float32 accumulator cast back to float16 is
                                within float16 rounding of the result (2^-10 relative)
"""

import sys

import cuda.tile as ct
import numpy as np
from claimkit import case_arg, gpu_or_exit, report

T, TILES = 64, 1024


@ct.kernel
def sum_in_float16(x, y, t: ct.Constant[int]):
    acc = ct.full((t,), 0, dtype=ct.float16)
    for k in range(ct.num_tiles(x, axis=0, shape=(t,))):
        acc = acc + ct.load(x, index=(k,), shape=(t,))
    ct.store(y, index=(0,), tile=acc)


@ct.kernel
def sum_in_float32(x, y, t: ct.Constant[int]):
    acc = ct.full((t,), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(x, axis=0, shape=(t,))):
        acc = acc + ct.astype(ct.load(x, index=(k,), shape=(t,)), ct.float32)
    ct.store(y, index=(0,), tile=ct.astype(acc, ct.float16))


def main() -> int:
    case = case_arg(("float16-accumulator", "float32-accumulator"))
    cp = gpu_or_exit()
    host = np.random.default_rng(79).random(T * TILES).astype(np.float16)
    want = host.astype(np.float64).reshape(TILES, T).sum(axis=0)
    errs = {}
    for label, kernel in (("float16", sum_in_float16), ("float32", sum_in_float32)):
        y = cp.zeros(T, dtype=cp.float16)
        ct.launch(cp.cuda.get_current_stream(), (1, 1, 1), kernel, (cp.asarray(host), y, T))
        errs[label] = float(np.max(np.abs(cp.asnumpy(y).astype(np.float64) - want) / want))
    said = f"max relative error: float16 accumulator {errs['float16']:.3g}, float32 accumulator {errs['float32']:.3g}"
    if case == "float32-accumulator":
        return report(errs["float32"] <= 2.0 ** -10, said + " (bound 2^-10)")
    return report(errs["float16"] > max(8 * errs["float32"], 2.0 ** -10), said)


if __name__ == "__main__":
    sys.exit(main())
