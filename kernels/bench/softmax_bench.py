"""Softmax bench: the course row softmax and online softmax, step by step, against cupy and the copy.

  softmax         X: ROWS x 128 float32, the lesson's row width; each block owns `rows`
                  whole rows, so a row is one tile and never leaves its block
  online_softmax  the course's size, 4096 x 100000 float32: rows longer than any tile,
                  walked in (rows, columns) tiles, twice
  cupy            the reference implementation in cupy: max, subtract, exp, sum, divide
                  along axis 1 (cupy's own kernels, one pass each), at the same shapes
  copy            cudaMemcpyAsync device to device of 1 GiB: the bandwidth ceiling

Both softmaxes are bound by bytes, not arithmetic (a few operations per 8 bytes moved),
so each variant below is one step toward the copy's pace, and says why it should help:

  tile        the course kernel as written (row_softmax, online_softmax), at several
              tiles, alone and with the compiler's occupancy hint (``+occN``: N blocks
              per SM). The compiler's default is one block per SM: every block loads
              its tile, reduces, then stores, and with one block per SM nothing else
              keeps the memory busy meanwhile. The hint caps registers per thread so
              that N blocks fit, and N tiles are in flight instead of one.
  direct      row_softmax with the result stored straight from registers
              (``allow_tma=False``). The default store goes through shared memory and
              the tensor memory accelerator: 64 KB of staging for a 128-row tile, which
              alone caps an SM at three such blocks and adds a wait before each block ends.
  persistent  one block per SM (times the occupancy) loops over row blocks r, r + grid,
              ...: no second wave, and inside the loop the compiler can issue the next
              block's loads while this one computes (``+latN``: the prefetch-depth hint,
              1-10; ``+stg``: stores from registers as in ``direct``).
  fastmath    ``direct`` with exp2 (denormals flushed) and one approximate reciprocal per
              row instead of a division per element: arithmetic the memory system does
              not wait for, so it should change nothing; it is here to show that.
  l2          the online softmax on a persistent grid whose second pass can walk each
              row backwards (``+rev``). Pass 2 re-reads the row pass 1 just read; a 400 KB
              row per block times 132 blocks is ~53 MB, about the H200's L2. Read forwards,
              pass 2 starts where pass 1 started, the part longest out of L2; read
              backwards it starts with what pass 1 read last. ``+gridD`` runs SMs/D
              blocks: fewer rows in flight, more of them still in L2, fewer SMs pulling.

GB/s counts the bytes a softmax cannot avoid, X read once and Y written once
(2 x 4 bytes x rows x columns), whatever a version really moves: the online softmax reads
X twice (once for the running max and sum, once to write), so reading X twice from DRAM
caps it at 2/3 of the copy; only a second read served by L2 lifts it above that. cupy's
version makes five passes. The copy counts its bytes read plus bytes written.

Plans: the bench (``bench_plan``) times the course kernels and the steps above at the
tiles an earlier sweep found fastest; ``--sweep`` (``sweep_plan``) times every
combination worth trying with fewer samples each (kernels/bench/entry.py).

Correctness, once per case before timing: Y against a float64 softmax of the same X,
computed and compared on the GPU, with the table's bounds ("softmax" for the 128-wide
rows, "online_softmax" for the long ones); the cupy reference is checked the same way,
and the copy must reproduce its source bit for bit. X is 2 * N(0, 1) (never zeros);
outputs are NaN-filled before each checked launch. Each shape's X is handed over once
(``s.inputs``) and every version's Y beside it, so that tileproof recomputes each
reference itself (above the handover's cap: the same strided rows of X and Y).

Timing: kernels/bench/timing.py (CUDA events per launch, L2 flushed before each,
interleaved rounds, each batch after untimed launches of the same case, first launches
reported apart; the GPU's SM clock and power draw read through NVML during each case's
batches, kernels/bench/gpu_load.py). The kernels are compiled first, in parallel (kernels/bench/jit.py),
whose workers also read each kernel's registers, shared memory and blocks per SM. The
course row softmax and the copy are timed a second time at the end, to show how far
the same case moves in one run.

Run: python kernels/bench/softmax_bench.py [--quick | --sweep] [--results PATH] [--seed N] [--report PATH]
     python kernels/bench/softmax_bench.py --export DIR [--arch sm_90] [--sweep]   (no GPU needed)
Needs cuda-tile, cupy, numpy and a GPU of compute capability 8.0 or newer; the default
sizes need about 25 GB of GPU memory (most of it for the float64 reference).
"""

from __future__ import annotations

import math
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
import gpu_load  # noqa: E402
import harness  # noqa: E402  (kernels/, found through this script's own directory)
import jit  # noqa: E402
import timing  # noqa: E402
from online_softmax import online_softmax  # noqa: E402  (course kernels, unchanged)
from tile_matmul_softmax import row_softmax  # noqa: E402

ROW_WIDTH = 128                              # the lesson's row: one tile wide
ROW_SHAPE = (1 << 21, ROW_WIDTH)             # 1 GiB of float32
ONLINE_SHAPE = (4096, 100_000)               # the course's default size, 1.6 GB
COPY_BYTES = 1 << 30
QUICK_ROW_SHAPE, QUICK_ONLINE_SHAPE = (1 << 18, ROW_WIDTH), (512, 100_000)
BENCH = entry.Pace("bench", rounds=5, launches=20, warmup_ms=timing.WARMUP_MS, cycles=0)
QUICK = entry.Pace("bench", rounds=2, launches=10, warmup_ms=timing.WARMUP_MS, cycles=0)
SWEEP = entry.Pace("sweep", rounds=3, launches=10, warmup_ms=40.0, cycles=0)
INPUT_SCALE = 2.0
WARM_TIMEOUT_S = 240.0
LOG2E = 1.4426950408889634                   # exp(x) = 2 ** (x * log2(e))
_T0 = time.perf_counter()


# --------------------------------------------------------------------------- kernels


def _load(x, index, shape, latency: int):
    """ct.load of a tile padded with -inf (adds nothing to a max, exp(-inf) = 0 to a sum);
    latency 0 leaves the prefetch depth to the compiler, 1-10 asks for it."""
    if latency > 0:
        return ct.load(x, index=index, shape=shape, padding_mode=ct.PaddingMode.NEG_INF, latency=latency)
    return ct.load(x, index=index, shape=shape, padding_mode=ct.PaddingMode.NEG_INF)


def _softmax_of_rows(block):
    """The course's row softmax of one tile of whole rows: max, exp, sum, divide."""
    top = ct.max(block, axis=1, keepdims=True)
    num = ct.exp(block - top)
    return num / ct.sum(num, axis=1, keepdims=True)


@ct.kernel
def direct_row_softmax(x, y, rows: ct.Constant[int], width: ct.Constant[int], latency: ct.Constant[int]):
    """row_softmax with the result stored straight from registers (no shared-memory staging)."""
    r = ct.bid(0)
    out = _softmax_of_rows(_load(x, (r, 0), (rows, width), latency))
    ct.store(y, index=(r, 0), tile=out, allow_tma=False)


@ct.kernel
def persistent_row_softmax(x, y, rows: ct.Constant[int], width: ct.Constant[int], latency: ct.Constant[int],
                           tma_store: ct.Constant[bool]):
    """row_softmax on a fixed grid: block b owns row blocks b, b + grid, b + 2 grid, ..."""
    blocks = ct.num_tiles(x, axis=0, shape=(rows, width))
    for r in range(ct.bid(0), blocks, ct.num_blocks(0)):
        out = _softmax_of_rows(_load(x, (r, 0), (rows, width), latency))
        ct.store(y, index=(r, 0), tile=out, allow_tma=tma_store)


@ct.kernel
def fastmath_row_softmax(x, y, rows: ct.Constant[int], width: ct.Constant[int], latency: ct.Constant[int]):
    """direct_row_softmax with exp2 (denormals flushed) and a reciprocal per row, not a division
    per element."""
    r = ct.bid(0)
    block = _load(x, (r, 0), (rows, width), latency)
    top = ct.max(block, axis=1, keepdims=True)
    num = ct.exp2((block - top) * LOG2E, flush_to_zero=True)
    inv = ct.truediv(1.0, ct.sum(num, axis=1, keepdims=True), rounding_mode=ct.RoundingMode.APPROX,
                     flush_to_zero=True)
    ct.store(y, index=(r, 0), tile=num * inv, allow_tma=False)


@ct.kernel
def l2_online_softmax(x, y, tb: ct.Constant[int], tn: ct.Constant[int], latency: ct.Constant[int],
                      reverse: ct.Constant[bool], tma_store: ct.Constant[bool]):
    """online_softmax on a fixed grid (block b owns row blocks b, b + grid, ...), its second
    pass walking each row from the last column tile back to the first when ``reverse``."""
    col_tiles = ct.num_tiles(x, axis=1, shape=(tb, tn))
    row_blocks = ct.num_tiles(x, axis=0, shape=(tb, tn))
    for r in range(ct.bid(0), row_blocks, ct.num_blocks(0)):
        run_max = ct.full((tb, 1), -math.inf, dtype=ct.float32)
        run_sum = ct.zeros((tb, 1), dtype=ct.float32)
        for t in range(col_tiles):                     # pass 1, as in the course kernel
            part = _load(x, (r, t), (tb, tn), latency)
            new_max = ct.maximum(run_max, ct.max(part, axis=1, keepdims=True))
            part_sum = ct.sum(ct.exp(part - new_max), axis=1, keepdims=True)
            run_sum = run_sum * ct.exp(run_max - new_max) + part_sum
            run_max = new_max
        for i in range(col_tiles):                     # pass 2: the last tile read comes first
            if reverse:
                t = col_tiles - 1 - i
            else:
                t = i
            part = _load(x, (r, t), (tb, tn), latency)
            ct.store(y, index=(r, t), tile=ct.exp(part - run_max) / run_sum, allow_tma=tma_store)


_KERNELS = {("softmax", "tile"): row_softmax, ("softmax", "direct"): direct_row_softmax,
            ("softmax", "persistent"): persistent_row_softmax, ("softmax", "fastmath"): fastmath_row_softmax,
            ("online_softmax", "tile"): online_softmax, ("online_softmax", "l2"): l2_online_softmax}
_PERSISTENT = {"persistent", "l2"}
"""Variants launched on a fixed grid of SMs x occupancy (/ grid_div) blocks."""
_COMPILER_HINTS = ("occupancy",)
"""Hints that go to the compiler (``kernel.replace_hints``); the rest are kernel arguments or the grid."""
_HINT_TAGS = {"grid_div": "grid", "latency": "lat", "occupancy": "occ", "rev": "rev", "stg": "stg"}


# --------------------------------------------------------------------------- plan


class Config(NamedTuple):
    """One compiled kernel: which softmax, which variant, its tile (rows, columns), its hints."""

    name: str            # "softmax" | "online_softmax"
    variant: str         # "tile" (the course kernel) | "direct" | "persistent" | "fastmath" | "l2"
    tiles: tuple[int, int]
    hints: tuple[tuple[str, int], ...] = ()

    @property
    def tag(self) -> str:
        """``64x128+occ2+stg``: the tile, then the hints (flags without a number)."""
        flags = ("rev", "stg")
        return "x".join(map(str, self.tiles)) + "".join(
            f"+{_HINT_TAGS[k]}" + ("" if k in flags else str(v)) for k, v in self.hints)

    @property
    def key(self) -> str:
        return f"{self.name}/{self.variant}/{self.tag}"

    def hint(self, name: str, default: int = 0) -> int:
        return dict(self.hints).get(name, default)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "variant": self.variant, "tiles": list(self.tiles), "hints": dict(self.hints)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Config":
        return config(d["name"], d["variant"], tuple(d["tiles"]), **d["hints"])


def config(name: str, variant: str, tiles: tuple[int, int], **hints: int) -> Config:
    """A Config with its hints in one order (so that equal configs have equal keys)."""
    if (name, variant) not in _KERNELS:
        raise ValueError(f"no {name} kernel for variant {variant!r}")
    unknown = set(hints) - set(_HINT_TAGS)
    if unknown:
        raise ValueError(f"unknown hint(s) {sorted(unknown)} (known: {sorted(_HINT_TAGS)})")
    return Config(name, variant, tuple(tiles), tuple(sorted((k, int(v)) for k, v in hints.items() if v)))


COURSE_ROW_TILES = (8, 32, 128)              # rows per block (8 is the course's)
COURSE_ONLINE_TILES = ((2, 1024), (1, 1024), (1, 4096), (4, 1024))  # (2, 1024) is the course's


ROW_OCCUPANCY_STEPS = ((8, 8), (16, 4), (16, 8), (32, 4), (64, 2), (128, 2))
"""(rows per block, occupancy hint) of the course row softmax that the bench times: the sweep's fastest
pairs at each row count, a small sweep the bench record ranks again (fewer rows a block and more blocks
an SM put more tiles in flight; 128 rows at occupancy 2 shows the hint alone at the course's tile)."""
ONLINE_OCCUPANCY_STEPS = (((1, 4096), 2), ((1, 4096), 4), ((1, 2048), 4), ((1, 8192), 2))
"""(tile, occupancy hint) of the course online softmax that the bench times, ranked likewise."""


def bench_plan() -> list[Config]:
    """The course kernels as written, the course kernels with the occupancy hint at the pairs a sweep
    ranked first (``ROW_OCCUPANCY_STEPS``, ``ONLINE_OCCUPANCY_STEPS``), then one config per later step
    at the sweep's pick: the direct store at 16 and 32 rows, the persistent grid, the fast math (at the
    direct store's 32 rows, to show it changes nothing), the online softmax's L2-minded persistent grid."""
    w = ROW_WIDTH
    return ([config("softmax", "tile", (r, w)) for r in COURSE_ROW_TILES]
            + [config("softmax", "tile", (r, w), occupancy=o) for r, o in ROW_OCCUPANCY_STEPS]
            + [config("softmax", "direct", (16, w)),
               config("softmax", "direct", (32, w)),
               config("softmax", "persistent", (32, w), occupancy=4, stg=1),
               config("softmax", "fastmath", (32, w))]
            + [config("online_softmax", "tile", t) for t in COURSE_ONLINE_TILES]
            + [config("online_softmax", "tile", t, occupancy=o) for t, o in ONLINE_OCCUPANCY_STEPS]
            + [config("online_softmax", "l2", (1, 8192), occupancy=2, rev=1)])


def sweep_plan() -> list[Config]:
    """Every combination worth trying (``--sweep``): tiles x occupancy for the course kernels,
    and for each later step the tiles and hints its docstring says should matter."""
    w = ROW_WIDTH
    plan = [config("softmax", "tile", (r, w), occupancy=o)
            for r, occs in ((8, (0, 4, 8, 16)), (16, (0, 2, 4, 8)), (32, (0, 2, 4)), (64, (0, 2)), (128, (0, 2)))
            for o in occs]
    plan += [config("softmax", "direct", (r, w), occupancy=o) for r in (16, 32, 64, 128) for o in (0, 2, 4)]
    plan += [config("softmax", "persistent", (r, w), occupancy=o, stg=s)
             for r in (32, 64, 128) for o in (1, 2, 4) for s in (0, 1)]
    plan += [config("softmax", "persistent", (r, w), occupancy=o, stg=1, latency=lat)
             for r, o in ((32, 4), (64, 2)) for lat in (4, 10)]
    plan += [config("softmax", "fastmath", (r, w), occupancy=o) for r in (32, 64) for o in (0, 2, 4)]
    plan += [config("online_softmax", "tile", t) for t in COURSE_ONLINE_TILES]
    plan += [config("online_softmax", "tile", t, occupancy=o)
             for t, occs in (((1, 4096), (2, 4)), ((1, 2048), (4,)), ((1, 8192), (0, 2)), ((2, 4096), (0, 2)))
             for o in occs]
    plan += [config("online_softmax", "l2", t, occupancy=o, rev=rev, stg=s)
             for t in ((1, 4096), (1, 8192), (1, 16384)) for o in (1, 2) for rev in (0, 1) for s in (0, 1)]
    plan += [config("online_softmax", "l2", (1, 8192), occupancy=1, rev=1, grid_div=2, stg=s) for s in (0, 1)]
    plan += [config("online_softmax", "l2", (1, 8192), occupancy=1, rev=1, latency=lat) for lat in (4, 10)]
    return plan


def configs(plan: str = "bench") -> list[Config]:
    return sweep_plan() if plan == "sweep" else bench_plan()


_kernels: dict[Config, Any] = {}


def kernel_of(cfg: Config):
    """The kernel object for cfg (one per compiler-hint set: each has its own JIT cache)."""
    hints = {k: v for k, v in cfg.hints if k in _COMPILER_HINTS}
    slot = (cfg.name, cfg.variant, tuple(sorted(hints.items())))
    if slot not in _kernels:
        base = _KERNELS[(cfg.name, cfg.variant)]
        _kernels[slot] = base.replace_hints(**hints) if hints else base
    return _kernels[slot]


def grid_and_args(cfg: Config, x, y, sms: int) -> tuple[tuple[int, int, int], tuple]:
    """The launch grid and kernel arguments of cfg on y = softmax(x)."""
    rows, cols = cfg.tiles
    blocks = ct.cdiv(x.shape[0], rows)
    if cfg.variant in _PERSISTENT:
        blocks = min(blocks, max(1, sms * cfg.hint("occupancy", 1) // cfg.hint("grid_div", 1)))
    if cfg.variant == "tile":
        args: tuple = (x, y, rows, cols)
    elif cfg.variant == "persistent":
        args = (x, y, rows, cols, cfg.hint("latency"), not cfg.hint("stg"))
    elif cfg.variant == "l2":
        args = (x, y, rows, cols, cfg.hint("latency"), bool(cfg.hint("rev")), not cfg.hint("stg"))
    else:
        args = (x, y, rows, cols, cfg.hint("latency"))
    return (blocks, 1, 1), args


def launcher(cp, cfg: Config, x, y, sms: int) -> Callable[[], None]:
    """A no-argument launch of cfg's kernel, y = softmax(x) along axis 1."""
    stream = cp.cuda.get_current_stream()
    grid, args = grid_and_args(cfg, x, y, sms)
    kernel = kernel_of(cfg)
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


# --------------------------------------------------------------------------- bench


def say(text: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f}s] {text}", flush=True)


def shape_tag(shape) -> str:
    return "x".join(str(d) for d in shape)


def sm_count(cp) -> int:
    return int(cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())["multiProcessorCount"])


def case_key(cfg: Config | None, name: str, shape) -> str:
    """``name/variant/shape[/tag]``, the form every bench record's case key takes."""
    if cfg is None:
        return f"{name}/cupy/{shape_tag(shape)}"
    return f"{cfg.name}/{cfg.variant}/{shape_tag(shape)}/{cfg.tag}"


def _info(name: str, variant: str, shape, tiles, nbytes: int) -> dict[str, Any]:
    return {"name": name, "variant": variant, "shape": list(shape), "dtype": "float32",
            "tiles": list(tiles) if tiles else None, "config": {}, "flops": None,
            "bytes": nbytes, "phase": "sweep"}


def _checked_cases(s: harness.Session, timer: timing.Timer, name: str, shape, cfgs: list[Config],
                   warmed: dict[str, dict], sms: int, skipped: list[dict[str, str]]) -> tuple[list[timing.Case], Any]:
    """Inputs for one softmax shape; every config and cupy, each checked once.

    Returns the cases, already pointed at the timing output (NaN-filled again only by the
    checks, which are over by then), and X. A config left out by a failed check in a sweep
    goes to ``skipped``."""
    cp = s.cp
    say(f"{name} {shape_tag(shape)}: making inputs, checking {len(cfgs) + 1} versions")
    x_host = s.rng.standard_normal(size=shape, dtype=np.float32)
    x_host *= np.float32(INPUT_SCALE)
    x = cp.asarray(x_host)
    del x_host
    want = harness.softmax_rows_f64(x)
    handed = s.inputs(f"{name}_{shape[0]}x{shape[1]}", x=x)  # written once, at the first check
    y = cp.empty(shape, dtype=np.float32)
    nbytes = 2 * x.nbytes
    cases = []
    for cfg in [*cfgs, None]:
        y.fill(np.nan)
        launch = cupy_launcher(cp, x, y) if cfg is None else launcher(cp, cfg, x, y, sms)
        first_here = timer.first_launch_ms(launch)
        key = case_key(cfg, name, shape)
        if not entry.check(s, name, y, want, handed):
            skipped.append({"key": key, "reason": f"check failed: {s.report.checks[-1].summary()}"})
            continue
        worker = warmed.get(cfg.key) if cfg else None
        info = _info(name, cfg.variant if cfg else "cupy", shape, cfg.tiles if cfg else None, nbytes)
        if cfg:
            grid, _args = grid_and_args(cfg, x, y, sms)
            info["config"] = {**dict(cfg.hints), "grid": list(grid)}
            info["resources"] = (worker or {}).get("resources")
        info.update(first_launch_ms=worker["first_launch_ms"][0] if worker else first_here,
                    first_launch_here_ms=first_here, check_index=len(s.report.checks) - 1)
        cases.append(timing.Case(key=key, launch=launch, info=info))
    del want, handed
    y.fill(np.nan)
    return cases, x


def table(cases: list[timing.Case]) -> list[str]:
    """One line per case: median, GB/s, % of cupy at the same shape, % of the copy, spread."""
    ref = {(c.info["name"], tuple(c.info["shape"])): c.median_ms for c in cases if c.info["variant"] == "cupy"}
    copy = [c for c in cases if c.info["name"] == "copy"]
    ceiling = copy[0].info["bytes"] / (copy[0].median_ms * 1e-3) / 1e9 if copy else float("nan")
    lines = [f"{'case':56} {'median ms':>10} {'GB/s':>7} {'%cupy':>7} {'%copy':>6} {'spread':>7}"]
    for c in cases:
        gbps = c.info["bytes"] / (c.median_ms * 1e-3) / 1e9
        r = ref.get((c.info["name"], tuple(c.info["shape"])))
        pct = f"{100.0 * r / c.median_ms:7.1f}" if r else f"{'-':>7}"
        lines.append(f"{c.key:56} {c.median_ms:10.4f} {gbps:7.0f} {pct} {100 * gbps / ceiling:6.1f} "
                     f"{100 * timing.spread(c.samples_ms):6.1f}%")
    return lines


def _body(s: harness.Session) -> None:
    cp = s.cp
    run = entry.pace(s.args, BENCH, QUICK, SWEEP)
    quick = s.args.quick
    row_shape, online_shape = (QUICK_ROW_SHAPE, QUICK_ONLINE_SHAPE) if quick else (ROW_SHAPE, ONLINE_SHAPE)
    cfgs = configs(run.plan)
    shape_of = {"softmax": row_shape, "online_softmax": online_shape}
    sms = sm_count(cp)

    say(f"{run.plan} plan: compiling {len(cfgs)} kernel configs in parallel workers")
    warmed = jit.warm(__file__, {c.key: {"config": c.to_dict(), "shape": list(shape_of[c.name])}
                                 for c in cfgs}, WARM_TIMEOUT_S)
    skipped = [{"key": c.key, "reason": warmed[c.key]["error"]} for c in cfgs if warmed[c.key]["error"]]
    for item in skipped:
        say(f"SKIPPED {item['key']}: {item['reason']}")
    cfgs = [c for c in cfgs if not warmed[c.key]["error"]]

    timer = timing.Timer(cp)
    row_cases, x_row = _checked_cases(s, timer, "softmax", row_shape,
                                      [c for c in cfgs if c.name == "softmax"], warmed, sms, skipped)
    online_cases, x_online = _checked_cases(s, timer, "online_softmax", online_shape,
                                            [c for c in cfgs if c.name == "online_softmax"], warmed, sms, skipped)

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
    order = random.Random(s.report.seed)
    course = row_cases[0]
    repeats = [timing.Case(key=c.key, launch=c.launch, info={**c.info, "phase": "repeat"})
               for c in (course, copy_case)]
    sampler = gpu_load.Sampler(gpu_load.pci_bus_id(cp))
    say(f"GPU clock and power: {sampler.error or 'NVML readings every %g ms' % (sampler.interval_s * 1e3)}")
    with sampler.running():
        say(f"timing {len(sweep)} cases, {run.rounds} rounds x {run.launches} launches")
        timing.interleave(timer, sweep, run.rounds, run.launches, warmup_ms=run.warmup_ms, order=order,
                          watch=sampler.watch("sweep"))
        say("timing the course row softmax and the copy a second time")
        timing.interleave(timer, repeats, run.rounds, run.launches, warmup_ms=run.warmup_ms, order=order,
                          watch=sampler.watch("repeat"))

    results = {
        "results_version": 1,
        "program": harness.program_name(__file__),
        "seed": s.report.seed,
        "device": {**(s.report.device or {}), "sm_count": sms},
        "method": {
            **timing.method(run.rounds, run.launches, run.warmup_ms),
            "plan": run.plan,
            "inputs": f"{INPUT_SCALE} * N(0, 1) float32, one set per shape",
            "bytes": "softmax: X read once + Y written once; copy: read + written",
            "first_launch": "wall time of the first launch in a fresh compile worker (JIT compile included)",
            "quick": quick,
        },
        "reference": {"softmax": "cupy", "online_softmax": "cupy"},
        "ceilings": {"gbps": copy_case.key},
        "load": sampler.describe(),
        "cases": sampler.case_dicts(sweep + repeats),
        "skipped": skipped,
        "compile": warmed,
    }
    if s.args.results:
        harness.write_atomically(s.args.results, harness.encode_report(results))
    entry.print_repeats(sweep, repeats, 56)
    print("\nsummary:", flush=True)
    for line in table(sweep):
        print(line, flush=True)
    entry.finish(s)


def _warm_body(spec: dict[str, Any]) -> dict[str, Any]:
    """Launch one config once (inputs uninitialised, nothing checked); read what its kernel costs."""
    import cupy as cp  # noqa: PLC0415

    cfg = Config.from_dict(spec["config"])
    x = cp.empty(tuple(spec["shape"]), dtype=np.float32)
    y = cp.empty_like(x)
    got = jit.capture_cubin(kernel_of(cfg))
    launch = launcher(cp, cfg, x, y, sm_count(cp))
    t0 = time.perf_counter()
    launch()
    cp.cuda.get_current_stream().synchronize()
    return {"first_launch_ms": [(time.perf_counter() - t0) * 1e3], "resources": jit.resources(cp, got)}


class _Shaped(NamedTuple):
    """Stands in for an array where only its shape is read (``grid_and_args`` in an export)."""

    shape: tuple[int, ...]


def _export_specs(plan: str) -> dict[str, dict[str, Any]]:
    shape_of = {"softmax": ROW_SHAPE, "online_softmax": ONLINE_SHAPE}
    return {c.key: {"config": c.to_dict(), "shape": list(shape_of[c.name])} for c in configs(plan)}


def _export_body(spec: dict[str, Any]) -> dict[str, Any]:
    """Compile one config for spec's target without a GPU: the arrays as the JIT would see them."""
    cfg = Config.from_dict(spec["config"])
    shape = tuple(spec["shape"])
    _grid, args = grid_and_args(cfg, _Shaped(shape), _Shaped(shape), sms=1)
    array = jit.array_constraint(ct.float32, shape)
    return jit.export(kernel_of(cfg), [array, array, *args[2:]], spec["out"], spec["arch"])


def main(argv: list[str] | None = None) -> int:
    return entry.main(__file__, _body, _warm_body, __doc__.splitlines()[0],
                      "a smoke run: smaller shapes, 2 rounds x 10 launches", argv,
                      export_specs=_export_specs, export_body=_export_body)


if __name__ == "__main__":
    sys.exit(main())
