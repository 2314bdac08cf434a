"""What handing a bench program's checks over, and tileproof's own check of them, cost: CPU seconds per program.

    python tests/benchmarks/bench_check_cost.py [--program matmul|softmax] [--quick]

The bench programs need a GPU, so this writes what they hand over without one: for each shape of the program's
bench plan (kernels/bench/*_bench.py: its sizes and its configurations, plus the library reference), the check
inputs as one input set (kernels/harness.py ``Session.inputs``) and one output per configuration, through the
harness's own ``Handover`` (same files, same cap, same row samples), from host arrays (the device-to-host copy
is not counted). The outputs are the float32 reference (matmul: exact integer inputs, as the program checks,
so every correct configuration's output is the same, bit for bit, and the checker compares it once; at 8192^3 only
the block the harness hands over is multiplied here, B being a column input above the cap, the rest of C is random
and only hashed); each softmax
configuration's output differs from the others' in one element by one ulp, as real kernels' last bits do, so
every one is compared. Then it runs
tileproof's check of that folder in this process (``runner.outside_check.plan`` and
``runner.outside_worker.check_plan``: the checker's own work, without its process start) and prints the CPU
seconds (user + sys, all threads) of the harness's writes and of the check, per shape and in all, with the bytes
written. The H200 estimate and the share of a bench run's wall time are in the committed output,
tests/benchmarks/bench_check_cost.txt.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
for folder in (ROOT / "kernels", ROOT / "kernels" / "bench", ROOT / "tests" / "data" / "fake_gpu_site"):
    sys.path.insert(0, str(folder))

import numpy as np  # noqa: E402

from tileproof.records.handover import BLOCK_MAX  # noqa: E402
from tileproof.runner import outside_check, outside_worker  # noqa: E402


def cpu() -> float:
    """CPU seconds (user + sys) of this process and every thread of it so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def harness():
    spec = importlib.util.spec_from_file_location("cost_harness", ROOT / "kernels" / "harness.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def matmul_shapes(quick: bool) -> list[tuple]:
    import matmul_bench as m  # noqa: PLC0415

    configs = len(m.configs(m.QUICK_TILES if quick else m.TILES)) + 1  # and cuBLAS
    rng = np.random.default_rng(1)
    out = []
    for mm, nn, kk in m.QUICK_SIZES if quick else m.SIZES:
        def make(mm=mm, nn=nn, kk=kk):
            a = rng.integers(-3, 4, (mm, kk)).astype(np.float16)
            b = rng.integers(-3, 4, (kk, nn)).astype(np.float16)
            if mm * nn * kk < 8192 ** 3:
                return {"a": a, "b": b}, a.astype(np.float32) @ b.astype(np.float32)
            c = rng.integers(-300, 300, (mm, nn)).astype(np.float32)
            step = -(-mm // BLOCK_MAX)  # the block kernels/harness.py hands over (every 8th row and column)
            c[::step, ::step] = a[::step].astype(np.float32) @ b[:, ::step].astype(np.float32)
            return {"a": a, "b": b}, c
        out.append((f"matmul_{mm}x{nn}x{kk}", "matmul", configs, make, ("b",)))
    return out


def softmax_shapes(quick: bool) -> list[tuple]:
    import collections  # noqa: PLC0415

    import softmax_bench as s  # noqa: PLC0415

    count = collections.Counter(c.name for c in s.configs("bench"))
    shapes = {"softmax": s.QUICK_ROW_SHAPE if quick else s.ROW_SHAPE,
              "online_softmax": s.QUICK_ONLINE_SHAPE if quick else s.ONLINE_SHAPE}
    rng = np.random.default_rng(1)
    out = []
    for name, shape in shapes.items():
        def make(shape=shape):
            x = (rng.standard_normal(shape, dtype=np.float32) * np.float32(s.INPUT_SCALE))
            y = np.exp(x - x.max(axis=1, keepdims=True))
            y /= y.sum(axis=1, keepdims=True)
            return {"x": x}, y
        out.append((f"{name}_{shape[0]}x{shape[1]}", name, count[name] + 1, make, ()))  # and cupy
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", choices=("matmul", "softmax"), action="append")
    parser.add_argument("--quick", action="store_true", help="the --quick plan's sizes")
    args = parser.parse_args(argv)
    h = harness()
    print(f"# {os.cpu_count()} CPUs here; numpy {np.__version__}; cap {h.HANDOVER_CAP_BYTES >> 20} MiB"
          f"{'; --quick sizes' if args.quick else ''}")
    for program in args.program or ["matmul", "softmax"]:
        shapes = matmul_shapes(args.quick) if program == "matmul" else softmax_shapes(args.quick)
        with tempfile.TemporaryDirectory(prefix="bench-check-cost-") as tmp:
            folder = Path(tmp)
            handover = h.Handover(folder, f"kernels/bench/{program}_bench.py")
            write_cpu, index = 0.0, 0
            for label, name, configs, make, columns in shapes:
                inputs, output = make()
                start = cpu()
                shared = h.InputSet(label, inputs, columns=columns)
                for config in range(configs):
                    if name != "matmul":  # softmax configs differ in their last bits; a correct matmul's do not
                        kept = output[0, config].copy()
                        output[0, config] = np.nextafter(kept, np.float32(2))
                    handover.add(name, output, shared, index)
                    if name != "matmul":
                        output[0, config] = kept
                    index += 1
                spent = cpu() - start
                write_cpu += spent
                print(f"{program:8} {label:28} {configs:3} checks: harness writes {spent:7.2f} CPU s")
                del inputs, output, shared
            written = sum(f.stat().st_size for f in folder.iterdir())
            raw, refused = outside_check.read_manifest(folder)
            planned = outside_check.plan(ROOT, raw)
            assert refused is None and isinstance(planned, dict), refused or planned
            start, wall = cpu(), time.perf_counter()
            answer = outside_worker.check_plan(folder, planned)
            check_cpu, check_wall = cpu() - start, time.perf_counter() - wall
            statuses: dict[str, int] = {}
            for c in answer["checks"]:
                statuses[f"{c['status']}/{c['problem']}"] = statuses.get(f"{c['status']}/{c['problem']}", 0) + 1
            print(f"{program:8} {index} checks, {written / 2 ** 30:.2f} GiB handed over: harness writes "
                  f"{write_cpu:.1f} CPU s; tileproof's check {check_cpu:.1f} CPU s ({check_wall:.1f} s wall here); "
                  f"{statuses}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
