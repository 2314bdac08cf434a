"""Compiling a bench program's kernels in parallel, before anything is timed.

cuTile compiles a kernel at its first launch, one kernel at a time per process (a
global lock is held around tileiras), and one tileiras run takes 5-40 s for these
matmul tiles: a sweep of 17 configurations compiled in turn would take minutes. So
each configuration is launched once by a worker process of its own -- the same
program file, run as ``PROGRAM --jit-warm SPEC`` -- and the workers run side by side.
Their cubins land in cuTile's disk cache (``CUDA_TILE_CACHE_DIR``, by default
``~/.cache/cutile-python``), keyed by the kernel's bytecode, so the program's own first
launch of the same kernel with the same kinds of arguments loads the cubin from there.

A worker reports, per size, the wall time of its first launch at that size: at the
first size this includes the JIT compile (unless the disk cache already had it).
A worker that fails reports why; the program skips that configuration and says so.

A worker can also say what its kernel costs the GPU (``resources``): it keeps the cubin
that cuTile's JIT hands to the driver (``capture_cubin``, through the kernel's private
``_compile`` hook, the one thing here that leans on cuTile internals), loads it once
more through the driver API and reads the function's registers per thread, local
memory per thread (spills), static shared memory, threads per block and the blocks per
SM the occupancy calculator allows (``resources``). When the hook is not there the
answer says so instead of numbers.

The same workers compile without a GPU: ``PROGRAM --jit-export SPEC`` exports one
configuration's kernel for a named target (``--export DIR --arch sm_90`` on a bench
program runs one per configuration of its plan, ``export_all``), with the argument
constraints cuTile's JIT would derive from C-contiguous arrays of the bench's shapes
(``array_constraint``), so that what compiles here is what the GPU run compiles; each
answer carries the cubin's registers, spills and shared memory as ``cuobjdump
-res-usage`` reads them, when that tool is installed (``res_usage``).

Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

WARM_FLAG = "--jit-warm"
"""First argument that makes a bench program a compile worker instead of a bench."""
EXPORT_FLAG = "--jit-export"
"""First argument that makes a bench program an export worker (no GPU needed)."""


def warm(program_file: str, specs: dict[str, dict[str, Any]], timeout_s: float,
         jobs: int | None = None, flag: str = WARM_FLAG) -> dict[str, dict[str, Any]]:
    """Run one worker per spec, ``jobs`` at a time; key -> the worker's answer.

    An answer has ``first_launch_ms`` (list, one per size; None from an export worker),
    ``wall_s`` and ``error`` (None when the worker succeeded), and whatever else the
    worker answered (``resources``).
    """
    jobs = max(1, min(len(specs), jobs or os.cpu_count() or 1))

    def one(item: tuple[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        key, spec = item
        argv = [sys.executable, program_file, flag, json.dumps(spec)]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return key, {"first_launch_ms": None, "wall_s": timeout_s,
                         "error": f"compile worker killed after {timeout_s:.0f} s"}
        wall = time.perf_counter() - t0
        answer = _last_json_line(proc.stdout)
        if proc.returncode != 0 or answer is None:
            tail = (answer or {}).get("error") or _tail(proc.stderr) or _tail(proc.stdout)
            return key, {"first_launch_ms": None, "wall_s": wall,
                         "error": f"worker exit {proc.returncode}: {tail}"}
        return key, {**answer, "first_launch_ms": answer.get("first_launch_ms"), "wall_s": wall, "error": None}

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return dict(pool.map(one, specs.items()))


def worker_main(spec_text: str, body: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """What a program runs for ``--jit-warm SPEC``: body(spec), answered as one JSON line."""
    try:
        answer = body(json.loads(spec_text))
    except Exception as exc:  # noqa: BLE001  (any failure becomes the worker's answer)
        traceback.print_exc()
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:400]}))
        return 1
    print(json.dumps(answer))
    return 0


def capture_cubin(kernel: Any) -> dict[str, Any]:
    """A dict that receives ``cubin`` and ``symbol`` when ``kernel`` is next compiled.

    cuTile compiles a kernel at its first launch by calling the kernel object's
    ``_compile(signature, context, compute_capability)``, which returns the cubin and
    the function's symbol first; the wrapper keeps both and returns what it got.
    """
    got: dict[str, Any] = {}
    original = getattr(kernel, "_compile", None)
    if original is None:
        got["error"] = "this cuTile has no Kernel._compile hook"
        return got

    def keep(*args: Any, **kwargs: Any):
        out = original(*args, **kwargs)
        got["cubin"], got["symbol"] = out[0], out[1]
        return out

    kernel._compile = keep
    return got


CU_FUNC_ATTRIBUTES = {"max_threads_per_block": 0, "shared_bytes": 1, "local_bytes": 3, "registers": 4}
"""CUfunction_attribute values (cuda.h) read by ``resources``."""


def resources(cp: Any, got: dict[str, Any]) -> dict[str, Any]:
    """What the driver says of the captured function: CU_FUNC_ATTRIBUTES, and
    ``blocks_per_sm`` at ``max_threads_per_block`` threads and no dynamic shared memory.
    ``{"error": why}`` when nothing was captured or the driver call failed."""
    if "cubin" not in got:
        return {"error": got.get("error", "the kernel was not compiled in this process (JIT cache hit)")}
    drv = cp.cuda.driver
    try:
        module = drv.moduleLoadData(got["cubin"])
        try:
            fn = drv.moduleGetFunction(module, got["symbol"])
            out: dict[str, Any] = {name: int(drv.funcGetAttribute(attr, fn))
                                   for name, attr in CU_FUNC_ATTRIBUTES.items()}
            out["blocks_per_sm"] = int(drv.occupancyMaxActiveBlocksPerMultiprocessor(
                fn, out["max_threads_per_block"], 0))
        finally:
            drv.moduleUnload(module)
    except Exception as exc:  # noqa: BLE001  (a bench without these numbers still runs)
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:200]}
    return out


def array_constraint(dtype: Any, shape: tuple[int, ...]) -> Any:
    """The ArrayConstraint cuTile's JIT derives from a C-contiguous array of ``shape``: the last
    stride 1, a stride divisible by 16 bytes and a length divisible by 16 where they are, a
    16-byte-aligned base, no aliasing. Exports with it compile the code a launch compiles."""
    import cuda.tile as ct  # noqa: PLC0415
    from cuda.tile.compilation import ArrayConstraint  # noqa: PLC0415

    per_16_bytes = 16 // {ct.float16: 2, ct.float32: 4}[dtype]
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return ArrayConstraint(dtype, len(shape), index_dtype=ct.int32, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False,
                           stride_constant=tuple(1 if st == 1 else None for st in strides),
                           stride_divisible_by=tuple(per_16_bytes if st % per_16_bytes == 0 else 1
                                                     for st in strides),
                           shape_divisible_by=tuple(16 if d % 16 == 0 else 1 for d in shape),
                           base_addr_divisible_by=16)


def export(kernel: Any, parameters: list[Any], out: str, arch: str) -> dict[str, Any]:
    """Compile ``kernel`` for ``arch`` with one signature (array constraints and the constants'
    values, in parameter order) into the cubin ``out``; its ``res_usage``."""
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel  # noqa: PLC0415

    t0 = time.perf_counter()
    export_kernel(kernel, [KernelSignature(list(parameters), CallingConvention.cutile_python_v1())], out,
                  gpu_code=arch, output_format="cubin")
    return {"compile_s": round(time.perf_counter() - t0, 2), "cubin": out, "resources": [res_usage(out)]}


def export_all(program_file: str, keyed: dict[str, dict[str, Any]], out_dir: str, arch: str,
               timeout_s: float) -> dict[str, dict[str, Any]]:
    """One export worker per config (``keyed``: key -> its spec), side by side; key -> answer.
    Each cubin lands in ``out_dir`` named by its key."""
    os.makedirs(out_dir, exist_ok=True)
    specs = {key: {**spec, "arch": arch, "out": os.path.join(out_dir, re.sub(r"[^A-Za-z0-9._+-]", "_", key)
                                                               + f".{arch}.cubin")}
             for key, spec in keyed.items()}
    return warm(program_file, specs, timeout_s, flag=EXPORT_FLAG)


_RES_USAGE = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
_REQNTID = re.compile(r"\.reqntid (\d+)")


def _cuobjdump() -> str | None:
    """cuobjdump on PATH, else the one the nvidia-cuda-cuobjdump wheel installs next to tileiras."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.find_spec("nvidia")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(folder).glob("cu*/bin/cuobjdump")):
            return str(candidate)
    return None


def res_usage(cubin: str) -> dict[str, Any]:
    """Registers, stack, shared and local bytes of the cubin's (first) function, by
    ``cuobjdump -res-usage``; ``{"error": why}`` without the tool or a line to read."""
    tool = _cuobjdump()
    if tool is None:
        return {"error": "no cuobjdump on PATH or in the nvidia wheels"}
    done = subprocess.run([tool, "-res-usage", cubin], capture_output=True, text=True)
    m = _RES_USAGE.search(done.stdout)
    if done.returncode != 0 or m is None:
        return {"error": f"cuobjdump exit {done.returncode}: {_tail(done.stderr or done.stdout)}"}
    out = dict(zip(("registers", "stack_bytes", "shared_bytes", "local_bytes"), map(int, m.groups()), strict=True))
    elf = subprocess.run([tool, "-elf", cubin], capture_output=True, text=True).stdout
    threads = _REQNTID.search(elf)
    if threads:  # the block size the compiler fixed (.reqntid): with registers, what fits an SM
        out["max_threads_per_block"] = int(threads.group(1))
    return out


def _last_json_line(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        return value if isinstance(value, dict) else None
    return None


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])[:600]
