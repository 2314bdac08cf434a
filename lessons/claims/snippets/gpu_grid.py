"""Pitfall 10 and day79's launch pitfall on the GPU: the grid counts tile blocks.

Each tile block i stores i + 1 into out[i] (a one-element tile).

    --case over-65535         stated (the list): a grid may not exceed 65535 (a launch of
                              100000 blocks fails or leaves blocks unwritten)
    --case blocks-not-threads stated (day79): ct.launch's grid counts tile blocks: a grid of
                              (37, 1, 1) writes exactly out[0..36]
"""

import sys

import cuda.tile as ct
import numpy as np
from claimkit import case_arg, gpu_or_exit, report


@ct.kernel
def mark_x(out):
    i = ct.bid(0)
    ct.store(out, index=(i,), tile=ct.full((1,), 1, dtype=ct.int32) + i)


@ct.kernel
def mark_y(out):
    i = ct.bid(1)
    ct.store(out, index=(i,), tile=ct.full((1,), 1, dtype=ct.int32) + i)


def launch(cp, kernel, grid, size: int) -> tuple[np.ndarray | None, str]:
    out = cp.zeros(size, dtype=cp.int32)
    try:
        ct.launch(cp.cuda.get_current_stream(), grid, kernel, (out,))
        cp.cuda.get_current_stream().synchronize()
    except Exception as e:  # noqa: BLE001 - a refused launch is the observation, reported verbatim
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return cp.asnumpy(out), ""


def main() -> int:
    case = case_arg(("over-65535", "blocks-not-threads"))
    cp = gpu_or_exit()
    if case == "blocks-not-threads":
        got, err = launch(cp, mark_x, (37, 1, 1), 64)
        if got is None:
            return report(False, f"the launch failed: {err}")
        want = np.zeros(64, dtype=np.int32)
        want[:37] = np.arange(1, 38)
        ok = np.array_equal(got, want)
        return report(ok, f"grid (37, 1, 1): {int(np.count_nonzero(got))} blocks wrote, "
                          f"{'each its own index' if ok else 'not each its own index'}")
    g = 100_000
    got, err = launch(cp, mark_x, (g, 1, 1), g)
    ran = got is not None and np.array_equal(got, np.arange(1, g + 1, dtype=np.int32))
    got_y, err_y = launch(cp, mark_y, (1, 70_000, 1), 70_000)
    y_ok = got_y is not None and np.array_equal(got_y, np.arange(1, 70_001, dtype=np.int32))
    y_said = "grid (1, 70000, 1) ran" if y_ok else f"grid (1, 70000, 1) failed ({err_y or 'wrong output'})"
    if ran:
        return report(False, f"grid (100000, 1, 1) ran and all 100000 blocks wrote their index; {y_said}")
    return report(True, f"grid (100000, 1, 1) failed ({err or 'wrong output'}); {y_said}")


if __name__ == "__main__":
    sys.exit(main())
