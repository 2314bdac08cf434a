"""Day79 pitfall: cuda-tile installs anywhere, but a launch on a GPU below compute
capability 8.0 fails at run time. Stated: the launch raises. Needs such a GPU."""

import sys

import cuda.tile as ct
from claimkit import gpu_or_exit, report


@ct.kernel
def fill(out):
    ct.store(out, index=(0,), tile=ct.full((16,), 1, dtype=ct.float32))


def main() -> int:
    cp = gpu_or_exit(min_cc=(0, 0))
    props = cp.cuda.runtime.getDeviceProperties(0)
    where = f"compute capability {props['major']}.{props['minor']}"
    out = cp.zeros(16, dtype=cp.float32)
    try:
        ct.launch(cp.cuda.get_current_stream(), (1, 1, 1), fill, (out,))
        cp.cuda.get_current_stream().synchronize()
    except Exception as e:  # noqa: BLE001 - the refusal is the observation, reported verbatim
        return report(True, f"{where}: the launch failed: {type(e).__name__}: {str(e).splitlines()[0]}")
    return report(False, f"{where}: the launch ran")


if __name__ == "__main__":
    sys.exit(main())
