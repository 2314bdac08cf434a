"""Softmax bench: the course row softmax and online softmax against cupy, as bandwidth.

  softmax         the course kernel row_softmax (kernels/tile_matmul_softmax.py) on
                  X: ROWS x 128 float32, the lesson's row width; each block owns `rows`
                  whole rows (swept), so a row is one tile and never leaves its block
  online_softmax  the course kernel online_softmax (kernels/online_softmax.py) at the
                  course's size, 4096 x 100000 float32; (rows, columns) per tile swept
  cupy            the reference implementation in cupy: max, subtract, exp, sum, divide
                  along axis 1 (cupy's own kernels, one pass each), at the same shapes
  copy            cudaMemcpyAsync device to device of 1 GiB: the bandwidth ceiling

GB/s counts the bytes a softmax cannot avoid, X read once and Y written once
(2 x 4 bytes x rows x columns), whatever a version really moves: the online softmax reads
X twice (once for the running max and sum, once to write), cupy's version makes five
passes. The copy counts its bytes read plus bytes written.

Correctness, once per case before timing: Y against a float64 softmax of the same X,
computed and compared on the GPU, with the table's bounds ("softmax" for the 128-wide
rows, "online_softmax" for the long ones); the cupy reference is checked the same way,
and the copy must reproduce its source bit for bit. X is 2 * N(0, 1) (never zeros);
outputs are NaN-filled before each checked launch.

Timing: kernels/bench/timing.py (CUDA events per launch, L2 flushed before each, ROUNDS
interleaved rounds of LAUNCHES launches, each batch after 250 ms of the same case
untimed, first launches reported apart). The course
kernels are compiled first, in parallel (kernels/bench/jit.py). The course row softmax
case is timed a second time at the end, to show how far the same case moves in one run.

Run: python kernels/bench/softmax_bench.py [--quick] [--results PATH] [--seed N] [--report PATH]
Needs cuda-tile, cupy, numpy and a GPU of compute capability 8.0 or newer; the default
sizes need about 25 GB of GPU memory (most of it for the float64 reference).
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import cuda.tile as ct
import numpy as np

_HERE = Path(__file__).resolve().parent
for _path in (str(_HERE), str(_HERE.parent)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import entry  # noqa: E402
import harness  # noqa: E402  (kernels/, found through this script's own directory)
import jit  # noqa: E402
import timing  # noqa: E402
from online_softmax import online_softmax  # noqa: E402  (course kernels, unchanged)
from tile_matmul_softmax import row_softmax  # noqa: E402

ROW_WIDTH = 128                              # the lesson's row: one tile wide
ROW_SHAPE = (1 << 21, ROW_WIDTH)             # 1 GiB of float32
ONLINE_SHAPE = (4096, 100_000)               # the course's default size, 1.6 GB
ROW_TILES = (8, 32, 128)                     # rows per block (8 is the course's)
ONLINE_TILES = ((2, 1024), (1, 1024), (1, 4096), (4, 1024))  # (2, 1024) is the course's
COPY_BYTES = 1 << 30
QUICK_ROW_SHAPE, QUICK_ONLINE_SHAPE = (1 << 18, ROW_WIDTH), (512, 100_000)
ROUNDS, LAUNCHES = 5, 20
QUICK_ROUNDS, QUICK_LAUNCHES = 2, 10
INPUT_SCALE = 2.0
WARM_TIMEOUT_S = 240.0
_T0 = time.perf_counter()


class Config(NamedTuple):
    """One compiled course kernel: which softmax, and its tile (rows, columns)."""

    name: str            # "softmax" | "online_softmax"
    tiles: tuple[int, int]

    @property
    def key(self) -> str:
        return f"{self.name}/tile/{self.tiles[0]}x{self.tiles[1]}"


def configs() -> list[Config]:
    return ([Config("softmax", (r, ROW_WIDTH)) for r in ROW_TILES]
            + [Config("online_softmax", t) for t in ONLINE_TILES])


def launcher(cp, cfg: Config, x, y) -> Callable[[], None]:
    """A no-argument launch of cfg's course kernel, y = softmax(x) along axis 1."""
    stream = cp.cuda.get_current_stream()
    rows, cols = cfg.tiles
    kernel = row_softmax if cfg.name == "softmax" else online_softmax
    grid = (ct.cdiv(x.shape[0], rows), 1, 1)
    args = (x, y, rows, cols)
    return lambda: ct.launch(stream, grid, kernel, args)


def cupy_launcher(cp, x, y) -> Callable[[], None]:
    """The reference: y = exp(x - max) / sum, in cupy, writing only row vectors besides y."""
    def launch() -> None:
        top = x.max(axis=1, keepdims=True)
        cp.subtract(x, top, out=y)
        cp.exp(y, out=y)
        cp.divide(y, y.sum(axis=1, keepdims=True), out=y)
    return launch


def copy_launcher(cp, src, dst) -> Callable[[], None]:
    rt = cp.cuda.runtime
    stream = cp.cuda.get_current_stream()
    return lambda: rt.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes,
                                  rt.memcpyDeviceToDevice, stream.ptr)


def say(text: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f}s] {text}", flush=True)


def shape_tag(shape) -> str:
    return "x".join(str(d) for d in shape)


def _info(name: str, variant: str, shape, tiles, nbytes: int) -> dict[str, Any]:
    return {"name": name, "variant": variant, "shape": list(shape), "dtype": "float32",
            "tiles": list(tiles) if tiles else None, "config": {}, "flops": None,
            "bytes": nbytes, "phase": "sweep"}


def _checked_cases(s: harness.Session, timer: timing.Timer, name: str, shape, cfgs: list[Config],
                   warmed: dict[str, dict]) -> tuple[list[timing.Case], Any]:
    """Inputs for one softmax shape; every course config and cupy, each checked once.

    Returns the cases, already pointed at the timing output (NaN-filled again only by the
    checks, which are over by then), and X."""
    cp = s.cp
    say(f"{name} {shape_tag(shape)}: making inputs, checking {len(cfgs) + 1} versions")
    x_host = s.rng.standard_normal(size=shape, dtype=np.float32)
    x_host *= np.float32(INPUT_SCALE)
    x = cp.asarray(x_host)
    del x_host
    want = harness.softmax_rows_f64(x)
    y = cp.empty(shape, dtype=np.float32)
    nbytes = 2 * x.nbytes
    cases = []
    for cfg in [*cfgs, None]:
        y.fill(np.nan)
        launch = cupy_launcher(cp, x, y) if cfg is None else launcher(cp, cfg, x, y)
        first_here = timer.first_launch_ms(launch)
        s.check(name, y, want)
        worker = warmed.get(cfg.key) if cfg else None
        info = _info(name, "tile" if cfg else "cupy", shape, cfg.tiles if cfg else None, nbytes)
        if cfg:
            info["config"] = {"grid": [ct.cdiv(shape[0], cfg.tiles[0]), 1, 1]}
        info.update(first_launch_ms=worker["first_launch_ms"][0] if worker else first_here,
                    first_launch_here_ms=first_here, check_index=len(s.report.checks) - 1)
        key = cfg.key.replace("/tile/", f"/tile/{shape_tag(shape)}/") if cfg else f"{name}/cupy/{shape_tag(shape)}"
        cases.append(timing.Case(key=key, launch=launch, info=info))
    del want
    y.fill(np.nan)
    return cases, x


def table(cases: list[timing.Case]) -> list[str]:
    """One line per case: median, GB/s, % of cupy at the same shape, % of the copy, spread."""
    ref = {(c.info["name"], tuple(c.info["shape"])): c.median_ms for c in cases if c.info["variant"] == "cupy"}
    copy = [c for c in cases if c.info["name"] == "copy"]
    ceiling = copy[0].info["bytes"] / (copy[0].median_ms * 1e-3) / 1e9 if copy else float("nan")
    lines = [f"{'case':44} {'median ms':>10} {'GB/s':>7} {'%cupy':>7} {'%copy':>6} {'spread':>7}"]
    for c in cases:
        gbps = c.info["bytes"] / (c.median_ms * 1e-3) / 1e9
        r = ref.get((c.info["name"], tuple(c.info["shape"])))
        pct = f"{100.0 * r / c.median_ms:7.1f}" if r else f"{'-':>7}"
        lines.append(f"{c.key:44} {c.median_ms:10.4f} {gbps:7.0f} {pct} {100 * gbps / ceiling:6.1f} "
                     f"{100 * timing.spread(c.samples_ms):6.1f}%")
    return lines


def _body(s: harness.Session) -> None:
    cp = s.cp
    quick = s.args.quick
    row_shape, online_shape = (QUICK_ROW_SHAPE, QUICK_ONLINE_SHAPE) if quick else (ROW_SHAPE, ONLINE_SHAPE)
    rounds, launches = (QUICK_ROUNDS, QUICK_LAUNCHES) if quick else (ROUNDS, LAUNCHES)
    cfgs = configs()
    shape_of = {"softmax": row_shape, "online_softmax": online_shape}

    say(f"compiling {len(cfgs)} kernel configs in parallel workers")
    warmed = jit.warm(__file__, {c.key: {"config": [c.name, list(c.tiles)], "shape": list(shape_of[c.name])}
                                 for c in cfgs}, WARM_TIMEOUT_S)
    skipped = [{"key": c.key, "reason": warmed[c.key]["error"]} for c in cfgs if warmed[c.key]["error"]]
    for item in skipped:
        say(f"SKIPPED {item['key']}: {item['reason']}")
    cfgs = [c for c in cfgs if not warmed[c.key]["error"]]

    timer = timing.Timer(cp)
    row_cases, x_row = _checked_cases(s, timer, "softmax", row_shape,
                                      [c for c in cfgs if c.name == "softmax"], warmed)
    online_cases, x_online = _checked_cases(s, timer, "online_softmax", online_shape,
                                            [c for c in cfgs if c.name == "online_softmax"], warmed)

    # The copy: 1 GiB of the online softmax's input, repeated if it is smaller (random,
    # never zeros), checked bit for bit.
    count = COPY_BYTES // 4
    flat = x_online.reshape(-1)
    src = (flat if flat.size >= count else cp.tile(flat, -(-count // flat.size)))[:count]
    dst = cp.empty_like(src)
    copy = copy_launcher(cp, src, dst)
    first_copy = timer.first_launch_ms(copy)
    if not bool(cp.array_equal(src.view(cp.uint32), dst.view(cp.uint32))):
        raise RuntimeError("device-to-device copy did not reproduce its source")
    copy_case = timing.Case(key=f"copy/memcpy/{count}", launch=copy,
                            info={**_info("copy", "memcpy", [count], None, 2 * src.nbytes),
                                  "config": {"api": "cudaMemcpyAsync device to device"},
                                  "first_launch_ms": first_copy, "first_launch_here_ms": first_copy,
                                  "check_index": None})

    sweep = row_cases + online_cases + [copy_case]
    say(f"timing {len(sweep)} cases, {rounds} rounds x {launches} launches")
    order = random.Random(s.report.seed)
    timing.interleave(timer, sweep, rounds, launches, order=order)

    say("timing the course row softmax and the copy a second time")
    course = row_cases[0]
    repeats = [timing.Case(key=c.key, launch=c.launch, info={**c.info, "phase": "repeat"})
               for c in (course, copy_case)]
    timing.interleave(timer, repeats, rounds, launches, order=order)

    results = {
        "results_version": 1,
        "program": harness.program_name(__file__),
        "seed": s.report.seed,
        "device": s.report.device,
        "method": {
            **timing.method(rounds, launches),
            "inputs": f"{INPUT_SCALE} * N(0, 1) float32, one set per shape",
            "bytes": "softmax: X read once + Y written once; copy: read + written",
            "first_launch": "wall time of the first launch in a fresh compile worker (JIT compile included)",
            "quick": quick,
        },
        "reference": {"softmax": "cupy", "online_softmax": "cupy"},
        "ceilings": {"gbps": copy_case.key},
        "cases": [c.to_dict() for c in sweep + repeats],
        "skipped": skipped,
        "compile": warmed,
    }
    if s.args.results:
        harness.write_atomically(s.args.results, harness.encode_report(results))
    entry.print_repeats(sweep, repeats, 44)
    print("\nsummary:", flush=True)
    for line in table(sweep):
        print(line, flush=True)


def _warm_body(spec: dict[str, Any]) -> dict[str, Any]:
    """Launch one course kernel config once (inputs uninitialised, nothing checked)."""
    import cupy as cp  # noqa: PLC0415

    name, tiles = spec["config"]
    x = cp.empty(tuple(spec["shape"]), dtype=np.float32)
    y = cp.empty_like(x)
    launch = launcher(cp, Config(name, tuple(tiles)), x, y)
    t0 = time.perf_counter()
    launch()
    cp.cuda.get_current_stream().synchronize()
    return {"first_launch_ms": [(time.perf_counter() - t0) * 1e3]}


def main(argv: list[str] | None = None) -> int:
    return entry.main(__file__, _body, _warm_body, __doc__.splitlines()[0],
                      "a smoke run: smaller shapes, 2 rounds x 10 launches", argv)


if __name__ == "__main__":
    sys.exit(main())
