"""Matmul bench: the course tile matmul, a grouped and a persistent variant, and cuBLAS.

    C = A @ B      A: M x K float16, B: K x N float16, C: M x N float32 (float32 accumulate)

at 2048^3, 4096^3, 8192^3 and a ragged 4000 x 5000 x 3000 (RAGGED: partial tiles on every
edge, and a last K tile read half past the end, zero-padded). Every variant is timed in the
same run, on the same inputs, against the same cuBLAS:

  tile        the course kernel itself (tile_matmul from kernels/tile_matmul_softmax.py):
              a 2-D grid over C's tiles, one tile per block, in launch order
  grouped     one C tile per block on a 1-D grid, tiles taken in bands of GROUP_M tile
              rows, column by column inside a band, so that blocks running at the same
              time share rows of A and columns of B in L2
  persistent  the grouped order, but only SMs x occupancy blocks, each looping over tiles
              t, t + grid, t + 2 grid, ... (the occupancy is also the compiler's hint);
              its later steps are hints on the same kernel, each alone first:
                +ctas2  a cluster of two CTAs per tile (num_ctas=2): at 256x256 each CTA
                        computes 128x256 as before, and the tensor memory accelerator
                        multicasts the operand tile both CTAs read, so each tile crosses
                        from L2 once for two CTAs (SASS: UTMALDG.2D.MULTICAST); a
                        persistent grid of clusters has SMs / 2 of them
                +latN   the loads' latency hint (1-10): how deep the compiler prefetches
                        A and B tiles; it trades shared-memory stages (206 KB at lat2,
                        231 KB at lat4 for 128x256x32) against the accumulator's room
                +gN     bands of N tile rows instead of GROUP_M: more or less L2 reuse
                        between the tiles that run at the same time
                +stg    the epilogue: C stored straight from the accumulator's registers
                        instead of through shared memory and the TMA store
  cublas      cublasGemmEx through cupy: A and B CUDA_R_16F, C CUDA_R_32F,
              CUBLAS_COMPUTE_32F. (cupy.matmul of two float16 arrays returns float16 and
              cannot write float32, so it would not be the same product.)
  copy        a device copy of 1 GiB, the bytes ceiling of every case's roofline

The course kernel sweeps the tile shapes in TILES (tm x tn x tk) as written. A 128x256 or
256x128 tile holds a 128 KB float32 accumulator: one warpgroup (128 threads) would need
256 registers a thread for it alone, and spills. The grouped variant asks for two worker
warpgroups (num_worker_warps=8) at those tiles, the persistent one at every tile it runs
(see configs()); the course kernel runs as written, so the sweep shows what that costs.

Plans: the bench (``configs(TILES)``) times the course kernel at every tile, the grouped
order at the tiles a sweep ranked first, the persistent kernel's steps at the settings a
sweep ranked first (``tuned``) and at most two configs no sweep has timed yet (``unswept``);
``--sweep`` (``sweep_plan``) tries each lever and the promising pairs with fewer samples each
(kernels/bench/entry.py). Nothing here names a winner: the bench record's summary names the
fastest config of each variant at each size, and that one goes head to head.

What each compiled kernel costs the GPU -- registers and spilled bytes per thread, shared
memory, threads and blocks per SM -- is read by its compile worker from the cubin the JIT
produced (kernels/bench/jit.py) and kept with every case as ``resources``; each case also
says how many C tiles there are and how many that makes per SM (the waves of a grid).
``--export DIR`` compiles every config for sm_90 without a GPU and prints the same costs.

Correctness, once per variant x tile x size, before anything is timed: the check inputs are
small integers (-3..3) stored as float16, so every product and every partial sum is an
integer below 2**24, exact in float32 in any summation order. A correct kernel returns
the float64 reference exactly, so the table's matmul bound (derived for K = 128) holds
at any K, and a wrong index shows up as an error of 1 or more. The output is NaN-filled
before each checked launch, so an element that is never written fails. Each size's check
inputs are handed over once (``s.inputs``) and every config's output beside them, so that
tileproof recomputes each reference itself (kernels/references.py); B is a column input
(each column of C needs only its own column of B), so at 8192^3, where B is above the
handover's cap, a block of C (every 8th row and column) is handed over with the same rows
of A and the same columns of B, and tileproof recomputes that block.

Timing (kernels/bench/timing.py): fresh uniform [-1, 1) float16 inputs (never zeros), an
L2 flush before every launch, CUDA events around it, ROUNDS interleaved rounds (a seeded
random order each round) of LAUNCHES launches per case, each batch after 250 ms of
untimed launches of the same case, so that the clocks follow its own power; the SM clock
and power draw those batches ran at are read through NVML (kernels/bench/gpu_load.py):
a matmul can hold the card at its power limit, below its most SM clock. Kernels are
compiled first, in parallel (kernels/bench/jit.py); each case's first launch (JIT compile
included) is reported apart. The ceilings: cuBLAS at the largest size, the device copy,
and the dense peak this program computes for the GPU (``dense_peak``).

At every size the contenders -- the fastest of each variant and the TOP_OVERALL fastest
overall -- and cuBLAS are then timed twice more: again in interleaved rounds (phase
"repeat": how far the same case moves within one run), and head to head (phase
"paired"): launched in turn, one launch of each per cycle, PAIRED_CYCLES cycles, so that
sample i of the kernel and of cuBLAS ran next to each other at the same clocks. The
bench record turns the pairs into the kernel's share of cuBLAS's rate, cycle by cycle
(tileproof/bench/core.py). cuBLAS runs twice in that phase (the second as ``.../again``):
cuBLAS against itself is the control, how far from 100% the method alone puts a ratio.

Run: python kernels/bench/matmul_bench.py [--quick | --sweep] [--results PATH] [--seed N] [--report PATH]
     python kernels/bench/matmul_bench.py --export DIR [--arch sm_90] [--sweep]   (no GPU needed)
Needs cuda-tile, cupy, numpy and a GPU of compute capability 8.0 or newer.
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
import gpu_load  # noqa: E402
import harness  # noqa: E402  (kernels/, found through this script's own directory)
import jit  # noqa: E402
import timing  # noqa: E402
from tile_matmul_softmax import tile_matmul  # noqa: E402  (the course kernel, unchanged)

TILES = ((64, 64, 32), (128, 128, 32), (128, 128, 64), (128, 256, 32), (128, 256, 64), (256, 128, 64))
RAGGED = (4000, 5000, 3000)  # no dimension a multiple of 128: partial tiles on every edge
SIZES = ((2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), RAGGED)
ROUNDS, LAUNCHES = 5, 20
QUICK_TILES = ((128, 128, 64), (128, 256, 64))
QUICK_SIZES = ((2048, 2048, 2048), (4096, 4096, 4096))
QUICK_ROUNDS, QUICK_LAUNCHES = 2, 10
PAIRED_CYCLES, QUICK_PAIRED_CYCLES = 200, 20   # head to head: launches of each case, in turn
BENCH = entry.Pace("bench", ROUNDS, LAUNCHES, timing.WARMUP_MS, PAIRED_CYCLES)
QUICK = entry.Pace("bench", QUICK_ROUNDS, QUICK_LAUNCHES, timing.WARMUP_MS, QUICK_PAIRED_CYCLES)
SWEEP = entry.Pace("sweep", rounds=3, launches=10, warmup_ms=60.0, cycles=100)
TOP_OVERALL = 3             # contenders timed again at each size: the fastest few, whatever their variant
COPY_BYTES = 1 << 30        # the device copy every roofline is drawn against
CUDA_DEV_ATTR_CLOCK_RATE = 13   # cudaDevAttrClockRate: the SM clock's most, kHz
DENSE_FLOPS_PER_SM_CLOCK = {"9.0": 4096}
"""Dense float16 tensor-core FLOP per SM per clock, by compute capability: Hopper's 2048 fp16
multiply-adds a clock per SM (NVIDIA's H100 SXM figure: 989.4 TFLOP/s = 132 SMs x 1830 MHz x 4096)."""
GROUP_M = 8                 # tile rows per band in the grouped order
WIDE_TILE = 128 * 256       # tm * tn from which two worker warpgroups are asked for
CHECK_MAX = 3               # check inputs are integers in [-CHECK_MAX, CHECK_MAX]
WARM_TIMEOUT_S = 240.0      # one compile worker
DTYPE = "float16->float32"
_T0 = time.perf_counter()


# --------------------------------------------------------------------------- kernels


def _grouped_tile(t, tiles_m, tiles_n, group: int):
    """(i, j) of C tile number t when tiles go in bands of `group` tile rows, column-major
    inside each band: consecutive t share B's column j while i walks down the band."""
    band = group * tiles_n                         # tiles in one full band
    first = (t // band) * group                    # first tile row of t's band
    rows = ct.minimum(tiles_m - first, group)      # the last band may be shorter
    within = t % band
    return first + within % rows, within // rows


def _tile_product(a, b, i, j, tm: int, tn: int, tk: int, latency: int = 0):
    """float32 sum over k of a[tile (i, k)] @ b[tile (k, j)]; ``latency`` 1-10 is the loads'
    prefetch-depth hint (0: the compiler's own choice)."""
    acc = ct.zeros((tm, tn), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(tm, tk))):
        if latency > 0:
            a_tile = ct.load(a, index=(i, k), shape=(tm, tk), padding_mode=ct.PaddingMode.ZERO, latency=latency)
            b_tile = ct.load(b, index=(k, j), shape=(tk, tn), padding_mode=ct.PaddingMode.ZERO, latency=latency)
        else:
            a_tile = ct.load(a, index=(i, k), shape=(tm, tk), padding_mode=ct.PaddingMode.ZERO)
            b_tile = ct.load(b, index=(k, j), shape=(tk, tn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a_tile, b_tile, acc)
    return acc


@ct.kernel
def grouped_matmul(a, b, c, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int],
                   group: ct.Constant[int]):
    """c = a @ b; block t owns C tile number t in the grouped order."""
    tiles_m = ct.num_tiles(c, axis=0, shape=(tm, tn))
    tiles_n = ct.num_tiles(c, axis=1, shape=(tm, tn))
    i, j = _grouped_tile(ct.bid(0), tiles_m, tiles_n, group)
    ct.store(c, index=(i, j), tile=_tile_product(a, b, i, j, tm, tn, tk))


@ct.kernel
def persistent_matmul(a, b, c, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int],
                      group: ct.Constant[int], latency: ct.Constant[int], tma_store: ct.Constant[bool]):
    """c = a @ b; block r owns C tiles r, r + grid, r + 2 grid, ... in the grouped order.
    ``latency``: the loads' prefetch-depth hint (0: the compiler's); ``tma_store`` False stores
    C straight from the accumulator's registers instead of through shared memory."""
    tiles_m = ct.num_tiles(c, axis=0, shape=(tm, tn))
    tiles_n = ct.num_tiles(c, axis=1, shape=(tm, tn))
    for t in range(ct.bid(0), tiles_m * tiles_n, ct.num_blocks(0)):
        i, j = _grouped_tile(t, tiles_m, tiles_n, group)
        ct.store(c, index=(i, j), tile=_tile_product(a, b, i, j, tm, tn, tk, latency), allow_tma=tma_store)


_BASE_KERNELS = {"tile": tile_matmul, "grouped": grouped_matmul, "persistent": persistent_matmul}
_HINT_TAGS = {"num_ctas": "ctas", "num_worker_warps": "warps", "occupancy": "occ", "latency": "lat",
              "group_m": "g", "stg": "stg"}
_COMPILER_HINTS = ("num_ctas", "num_worker_warps", "occupancy")
"""Hints that go to the compiler (``kernel.replace_hints``); ``latency``, ``group_m`` and ``stg``
are arguments of the persistent kernel."""


# --------------------------------------------------------------------------- plan


class Config(NamedTuple):
    """One compiled kernel: variant, tile shape and compiler hints."""

    variant: str
    tiles: tuple[int, int, int]
    hints: tuple[tuple[str, int], ...] = ()

    @property
    def tag(self) -> str:
        """``128x256x64+warps8+occ1``: the tile shape, then the hints (``stg`` without a number)."""
        return "x".join(map(str, self.tiles)) + "".join(
            f"+{_HINT_TAGS[k]}" + ("" if k == "stg" else str(v)) for k, v in self.hints)

    @property
    def key(self) -> str:
        return f"{self.variant}/{self.tag}"

    @property
    def occupancy(self) -> int:
        return dict(self.hints).get("occupancy", 1)

    @property
    def ctas(self) -> int:
        """CTAs per block (a cluster when > 1): a persistent grid gets SMs / ctas blocks."""
        return dict(self.hints).get("num_ctas", 1)

    @property
    def group_m(self) -> int:
        return dict(self.hints).get("group_m", GROUP_M)

    def hint(self, name: str) -> int:
        return dict(self.hints).get(name, 0)

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "tiles": list(self.tiles), "hints": dict(self.hints)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Config":
        return cls(d["variant"], tuple(d["tiles"]), tuple(sorted(d["hints"].items())))


def hinted(variant: str, tiles: tuple[int, int, int], **hints: int) -> Config:
    """A Config with its hints in one order (equal configs, equal keys); a hint of 0 is no hint."""
    unknown = set(hints) - set(_HINT_TAGS)
    if unknown:
        raise ValueError(f"unknown hint(s) {sorted(unknown)} (known: {sorted(_HINT_TAGS)})")
    if variant != "persistent" and set(hints) - set(_COMPILER_HINTS):
        raise ValueError(f"{variant}: only the persistent kernel takes latency, group_m and stg")
    return Config(variant, tiles, tuple(sorted((k, v) for k, v in hints.items() if v)))


GROUPED_TILES = ((128, 128, 64), (128, 256, 32), (128, 256, 64))
"""Tiles of the grouped order in the bench plan: the course kernel's fastest tile, and the two wide tiles
(with two worker warpgroups, as every wide tile needs) a sweep ranked first for this order."""


def configs(tiles: tuple[tuple[int, int, int], ...], plan: str = "bench") -> list[Config]:
    """The plan: ``bench`` (default) or ``sweep`` (``--sweep``, every config worth trying).

    bench: the course kernel as written at every tile of ``tiles``; the grouped order at
    those of GROUPED_TILES, with two worker warpgroups for the wide tiles, and a cluster of
    two CTAs per 256x128 tile; then the persistent kernel at the settings a sweep ranked
    first (``tuned``: its tile shapes, clusters and band heights, which the bench ranks
    again at every size: the record's fastest config of each variant is the one the head to
    head takes) and the configs no sweep has timed yet (``unswept``). The persistent kernel
    always has two worker warpgroups: with one, its loop over tiles spills (1 KB of stack a
    thread at 128x128x64, by cuobjdump -res-usage for sm_90)."""
    if plan == "sweep":
        return sweep_plan()
    out = [Config("tile", t) for t in tiles]
    out += [Config("grouped", t, (("num_worker_warps", 8),) if t[0] * t[1] >= WIDE_TILE else ())
            for t in GROUPED_TILES if t in tiles]
    if (256, 128, 64) in tiles:
        out.append(Config("grouped", (256, 128, 64), (("num_ctas", 2),)))
    return out + [c for c in [*tuned(), *unswept()] if c not in out]


def tuned() -> list[Config]:
    """The persistent kernel's steps at the settings a sweep ranked first (``sweep_plan`` tries the
    alternatives), each a lever the bench times again at every size:

    * 128x256x32, the fastest tile without a cluster, in the grouped order's bands of GROUP_M
      tile rows and of 4 and 16 (the band that keeps the operands the running tiles share in
      L2 differs by size: 4 was fastest at 4096^3, 16 at 2048^3 and 8192^3);
    * 256x128x64, the same area the other way round;
    * a cluster of two CTAs per 256x256 tile, whose CTAs each compute 128x256 and share the
      operand tile the tensor memory accelerator multicasts to both (each tile of it crosses
      from L2 once for two CTAs), with a K tile of 64 (fastest at 8192^3 and on the ragged
      size head to head) and of 32 with the loads' latency hint 6 (fastest ragged median)."""
    w8 = dict(num_worker_warps=8, occupancy=1)
    return [hinted("persistent", (128, 256, 32), **w8),
            hinted("persistent", (128, 256, 32), group_m=4, **w8),
            hinted("persistent", (128, 256, 32), group_m=16, **w8),
            hinted("persistent", (256, 128, 64), **w8),
            hinted("persistent", (256, 256, 64), num_ctas=2, **w8),
            hinted("persistent", (256, 256, 32), num_ctas=2, latency=6, **w8)]


def unswept() -> list[Config]:
    """Configs the bench times that no sweep has timed yet (the sweep plan holds them for the next
    sweep), at most two: the cluster that was fastest at 8192^3 (256x256x64+ctas2) with the band
    heights that moved the tile without a cluster (4 and 16 tile rows instead of GROUP_M). At one
    clock the tile kernel and cuBLAS both keep the SMs about as busy as they can be (seen with
    Nsight Compute on an H200, 2026-12-01, clocks left alone: at 8192^3 cuBLAS and
    256x256x64+ctas2 each at ~92% of the SMs' throughput, at ~1.5 GHz of the SM clock's 1.98);
    what is left to gain is in the band's effect on L2 traffic and, with it, on the energy each
    FLOP costs a card held at its power limit, which sets the clock both run at."""
    w8 = dict(num_worker_warps=8, occupancy=1)
    return [hinted("persistent", (256, 256, 64), num_ctas=2, group_m=4, **w8),
            hinted("persistent", (256, 256, 64), num_ctas=2, group_m=16, **w8)]


def sweep_plan() -> list[Config]:
    """Every config worth trying: the course kernel and the grouped order at their best known
    tiles (earlier bench records rank the rest), then the persistent kernel with each lever
    alone and the promising pairs: clusters (num_ctas=2) at 256-wide tiles, the latency hint
    of its loads, the band height of the grouped order (group_m) and the epilogue's store
    (``stg``: from registers, not through shared memory and the TMA)."""
    w8 = dict(num_worker_warps=8, occupancy=1)
    plan = [Config("tile", t) for t in ((128, 128, 32), (128, 128, 64))]
    plan += [Config("grouped", t, (("num_worker_warps", 8),)) for t in ((128, 256, 32), (128, 256, 64))]
    best = (128, 256, 32)
    plan += [hinted("persistent", t, **w8) for t in ((128, 128, 64), best, (128, 256, 64), (256, 128, 64))]
    plan += [hinted("persistent", best, latency=lat, **w8) for lat in (2, 3, 4, 6, 10)]
    plan += [hinted("persistent", best, group_m=g, **w8) for g in (4, 16)]
    plan += [hinted("persistent", best, stg=1, **w8)]
    plan += [hinted("persistent", t, latency=4, **w8) for t in ((128, 256, 64), (256, 128, 64))]
    plan += [hinted("persistent", t, num_ctas=2, **w8)
             for t in ((256, 256, 32), (256, 256, 64), (256, 128, 64), (256, 128, 32), (128, 256, 32), (128, 256, 64))]
    plan += [hinted("persistent", (256, 128, 64), num_ctas=2, occupancy=1)]
    plan += [hinted("persistent", (256, 256, 32), num_ctas=2, latency=lat, **w8) for lat in (3, 6)]
    plan += [hinted("persistent", (256, 256, 32), num_ctas=2, group_m=16, **w8)]
    plan += [hinted("grouped", (256, 256, 32), num_ctas=2, num_worker_warps=8)]
    return plan + unswept()


_kernels: dict[tuple, Any] = {}


def kernel_of(cfg: Config):
    """The kernel object for cfg (one per compiler-hint set: each has its own JIT cache)."""
    hints = {k: v for k, v in cfg.hints if k in _COMPILER_HINTS}
    slot = (cfg.variant, tuple(sorted(hints.items())))
    if slot not in _kernels:
        base = _BASE_KERNELS[cfg.variant]
        _kernels[slot] = base.replace_hints(**hints) if hints else base
    return _kernels[slot]


def tile_count(cfg: Config, m: int, n: int) -> int:
    return ct.cdiv(m, cfg.tiles[0]) * ct.cdiv(n, cfg.tiles[1])


def launcher(cp, cfg: Config, a, b, c, sms: int) -> tuple[Callable[[], None], tuple[int, int, int]]:
    """A no-argument launch of cfg's kernel on (a, b, c), and its grid."""
    kernel = kernel_of(cfg)
    stream = cp.cuda.get_current_stream()
    grid, args = grid_and_args(cfg, a, b, c, sms)
    return (lambda: ct.launch(stream, grid, kernel, args)), grid


def grid_and_args(cfg: Config, a, b, c, sms: int) -> tuple[tuple[int, int, int], tuple]:
    """cfg's launch grid and kernel arguments for c = a @ b (only ``c.shape`` is read)."""
    m, n = c.shape
    tm, tn, tk = cfg.tiles
    if cfg.variant == "tile":
        return (ct.cdiv(m, tm), ct.cdiv(n, tn), 1), (a, b, c, tm, tn, tk)
    tiles = tile_count(cfg, m, n)
    if cfg.variant == "grouped":
        return (tiles, 1, 1), (a, b, c, tm, tn, tk, GROUP_M)
    blocks = min(tiles, sms // cfg.ctas * cfg.occupancy)
    return (blocks, 1, 1), (a, b, c, tm, tn, tk, cfg.group_m, cfg.hint("latency"), not cfg.hint("stg"))


def cublas_launcher(cp, a, b, c) -> Callable[[], None]:
    """C = A @ B by cublasGemmEx, float16 in, float32 out and compute.

    cuBLAS is column-major: a row-major (m, n) C is a column-major (n, m) C^T = B^T A^T,
    so B goes first with leading dimension n, then A with leading dimension k.
    """
    from cupy_backends.cuda.libs import cublas  # noqa: PLC0415

    rt = cp.cuda.runtime
    m, k = a.shape
    n = b.shape[1]
    one, zero = np.ones((), np.float32), np.zeros((), np.float32)
    handle = cp.cuda.device.get_cublas_handle()

    def launch() -> None:
        cublas.gemmEx(handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, n, m, k,
                      one.ctypes.data, b.data.ptr, rt.CUDA_R_16F, n,
                      a.data.ptr, rt.CUDA_R_16F, k,
                      zero.ctypes.data, c.data.ptr, rt.CUDA_R_32F, n,
                      cublas.CUBLAS_COMPUTE_32F, cublas.CUBLAS_GEMM_DEFAULT)

    return launch


# --------------------------------------------------------------------------- bench


def say(text: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f}s] {text}", flush=True)


def shape_tag(size) -> str:
    return "x".join(str(d) for d in size)


def device_facts(cp) -> tuple[int, int]:
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    return int(props["multiProcessorCount"]), int(props.get("l2CacheSize", 0))


def _case_info(variant: str, size, cfg: Config | None, grid, sms: int) -> dict[str, Any]:
    m, n, k = size
    info: dict[str, Any] = {
        "name": "matmul", "variant": variant, "shape": [m, n, k], "dtype": DTYPE,
        "tiles": list(cfg.tiles) if cfg else None,
        "config": ({**dict(cfg.hints), "group_m": cfg.group_m if variant != "tile" else None,
                    "grid": list(grid)} if cfg else {"api": "cublasGemmEx", "compute": "CUBLAS_COMPUTE_32F"}),
        "flops": 2 * m * n * k,
        "bytes": 2 * (m * k + k * n) + 4 * m * n,
        "phase": "sweep",
    }
    if cfg:
        tiles = tile_count(cfg, m, n)
        info.update(tiles_total=tiles, tiles_per_sm=round(tiles / sms, 3))
    return info


def bench_size(s: harness.Session, timer: timing.Timer, size, cfgs: list[Config],
               warmed: dict[str, dict], index: int, sms: int, run: entry.Pace,
               order: random.Random, skipped: list[dict[str, str]], sampler: gpu_load.Sampler):
    """Check every config once at this size, then time them all, interleaved. In a sweep a
    config whose check fails is left out here and listed in ``skipped``."""
    cp = s.cp
    m, n, k = size
    say(f"{shape_tag(size)}: checking {len(cfgs) + 1} kernels on exact integer inputs")
    a_chk = cp.asarray(s.rng.integers(-CHECK_MAX, CHECK_MAX + 1, size=(m, k)).astype(np.float16))
    b_chk = cp.asarray(s.rng.integers(-CHECK_MAX, CHECK_MAX + 1, size=(k, n)).astype(np.float16))
    want = harness.matmul_f64(a_chk, b_chk)
    handed = s.inputs(f"matmul_{m}x{n}x{k}", columns=("b",), a=a_chk, b=b_chk)  # written at the first check
    out = cp.empty((m, n), dtype=np.float32)
    cases: list[timing.Case] = []
    cfg_of: dict[str, Config | None] = {}
    for cfg in [*cfgs, None]:
        out.fill(np.nan)
        if cfg is None:
            launch, grid = cublas_launcher(cp, a_chk, b_chk, out), None
        else:
            launch, grid = launcher(cp, cfg, a_chk, b_chk, out, sms)
        first_here = timer.first_launch_ms(launch)
        key = f"matmul/{cfg.variant if cfg else 'cublas'}/{shape_tag(size)}" + (f"/{cfg.tag}" if cfg else "")
        if not entry.check(s, "matmul", out, want, handed):
            skipped.append({"key": key, "reason": f"check failed: {s.report.checks[-1].summary()}"})
            continue
        info = _case_info(cfg.variant if cfg else "cublas", size, cfg, grid, sms)
        worker = warmed.get(cfg.key) if cfg else None
        info.update(
            first_launch_ms=(worker["first_launch_ms"][index] if worker else first_here),
            first_launch_here_ms=first_here,
            check_index=len(s.report.checks) - 1,
            resources=((worker or {}).get("resources") or [None] * (index + 1))[index],
        )
        cases.append(timing.Case(key=key, launch=launch, info=info))
        cfg_of[key] = cfg
    del a_chk, b_chk, want, handed
    out = None

    a = cp.asarray(s.rng.uniform(-1.0, 1.0, size=(m, k)).astype(np.float16))
    b = cp.asarray(s.rng.uniform(-1.0, 1.0, size=(k, n)).astype(np.float16))
    c = cp.empty((m, n), dtype=np.float32)
    for case in cases:
        cfg = cfg_of[case.key]
        case.launch = cublas_launcher(cp, a, b, c) if cfg is None else launcher(cp, cfg, a, b, c, sms)[0]
    say(f"{shape_tag(size)}: timing {len(cases)} cases, {run.rounds} rounds x {run.launches} launches")
    timing.interleave(timer, cases, run.rounds, run.launches, warmup_ms=run.warmup_ms, order=order,
                      watch=sampler.watch("sweep"))
    return cases, (a, b, c), cfg_of


def contenders(cases: list[timing.Case], top: int = TOP_OVERALL) -> list[timing.Case]:
    """The cases timed again at one size: the fastest of each variant, the ``top`` fastest
    overall (in a sweep the variants' own steps are hints of one variant), and cuBLAS."""
    best: dict[str, timing.Case] = {}
    for case in cases:
        v = case.info["variant"]
        if v not in best or case.median_ms < best[v].median_ms:
            best[v] = case
    ranked = sorted((c for c in cases if c.info["variant"] != "cublas"), key=lambda c: c.median_ms)
    chosen = {c.key: c for c in [*best.values(), *ranked[:top]]}
    return list(chosen.values())


def again(chosen: list[timing.Case], cfg_of: dict[str, Config | None], inputs, sms: int, cp,
          phase: str) -> list[timing.Case]:
    """Fresh cases (same keys, new launches on ``inputs``) for the chosen cases."""
    a, b, c = inputs
    out = []
    for case in chosen:
        cfg = cfg_of[case.key]
        launch = cublas_launcher(cp, a, b, c) if cfg is None else launcher(cp, cfg, a, b, c, sms)[0]
        out.append(timing.Case(key=case.key, launch=launch, info={**case.info, "phase": phase}))
    return out


def table(cases: list[timing.Case]) -> list[str]:
    """One line per case: median, TFLOP/s, % of the same-size cuBLAS, spread."""
    ref = {tuple(c.info["shape"]): c.median_ms for c in cases if c.info["variant"] == "cublas"}
    lines = [f"{'case':64} {'median ms':>10} {'TFLOP/s':>8} {'%cuBLAS':>8} {'spread':>7}"]
    for c in sorted(cases, key=lambda c: (c.info["shape"], c.info["variant"], c.median_ms)):
        tflops = c.info["flops"] / (c.median_ms * 1e-3) / 1e12
        pct = 100.0 * ref[tuple(c.info["shape"])] / c.median_ms if tuple(c.info["shape"]) in ref else float("nan")
        lines.append(f"{c.key:64} {c.median_ms:10.4f} {tflops:8.1f} {pct:8.1f} "
                     f"{100 * timing.spread(c.samples_ms):6.1f}%")
    return lines


def dense_peak(cp) -> dict[str, Any] | None:
    """The tensor cores' dense float16 rate at the SM clock the device reports as its most, when
    this program knows the per-SM rate of its compute capability (``DENSE_FLOPS_PER_SM_CLOCK``)."""
    rt = cp.cuda.runtime
    device = rt.getDevice()
    props = rt.getDeviceProperties(device)
    cc = f"{props['major']}.{props['minor']}"
    per_clock = DENSE_FLOPS_PER_SM_CLOCK.get(cc)
    khz = props.get("clockRate")  # CUDA 13 dropped it from the properties; the attribute stays
    if not khz:
        try:
            khz = rt.deviceGetAttribute(CUDA_DEV_ATTR_CLOCK_RATE, device)
        except Exception:  # noqa: BLE001  (no clock, no peak: the record says so)
            khz = None
    if per_clock is None or not khz:
        return None
    sms, khz = int(props["multiProcessorCount"]), int(khz)
    return {"tflops": sms * khz * 1e3 * per_clock / 1e12, "sm_count": sms, "sm_clock_mhz": khz / 1e3,
            "flops_per_sm_clock": per_clock,
            "basis": f"{sms} SMs x {khz / 1e3:g} MHz (the device's reported most) x {per_clock} dense "
                     f"float16 FLOP per SM per clock (cc {cc})"}


def copy_case(s: harness.Session, timer: timing.Timer) -> timing.Case:
    """The device copy of 1 GiB of random data, checked bit for bit: the bytes ceiling the
    roofline of every matmul case is drawn against."""
    cp = s.cp
    src = cp.asarray(s.rng.integers(0, 1 << 31, size=COPY_BYTES // 4, dtype=np.uint32))
    dst = cp.empty_like(src)
    rt = cp.cuda.runtime
    stream = cp.cuda.get_current_stream()

    def launch() -> None:
        rt.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, rt.memcpyDeviceToDevice, stream.ptr)

    first = timer.first_launch_ms(launch)
    if not bool(cp.array_equal(src, dst)):
        raise RuntimeError("device-to-device copy did not reproduce its source")
    count = src.size
    return timing.Case(key=f"copy/memcpy/{count}", launch=launch, info={
        "name": "copy", "variant": "memcpy", "shape": [count], "dtype": "uint32", "tiles": None,
        "config": {"api": "cudaMemcpyAsync device to device"}, "flops": None, "bytes": 2 * src.nbytes,
        "phase": "sweep", "first_launch_ms": first, "first_launch_here_ms": first, "check_index": None})


def _body(s: harness.Session) -> None:
    cp = s.cp
    run = entry.pace(s.args, BENCH, QUICK, SWEEP)
    quick = s.args.quick
    sizes = QUICK_SIZES if quick else SIZES
    cfgs = configs(QUICK_TILES if quick else TILES, run.plan)
    sms, l2 = device_facts(cp)
    say(f"{run.plan} plan: {len(cfgs)} kernel configs x {len(sizes)} sizes + cuBLAS; {sms} SMs, L2 {l2 >> 20} MiB")

    say(f"compiling {len(cfgs)} kernel configs in parallel workers")
    warmed = jit.warm(__file__, {c.key: {"config": c.to_dict(), "sizes": [list(z) for z in sizes]}
                                 for c in cfgs}, WARM_TIMEOUT_S)
    skipped = [{"key": c.key, "reason": warmed[c.key]["error"]} for c in cfgs if warmed[c.key]["error"]]
    for item in skipped:
        say(f"SKIPPED {item['key']}: {item['reason']}")
    cfgs = [c for c in cfgs if not warmed[c.key]["error"]]
    say("compiled: " + ", ".join(f"{k} {v['wall_s']:.0f}s" for k, v in warmed.items() if not v["error"]))

    timer = timing.Timer(cp)
    order = random.Random(s.report.seed)
    sampler = gpu_load.Sampler(gpu_load.pci_bus_id(cp))
    say(f"GPU clock and power: {sampler.error or 'NVML readings every %g ms' % (sampler.interval_s * 1e3)}")
    with sampler.running():
        sweep, repeats, paired = _time_everything(s, timer, sizes, cfgs, warmed, sms, run, order, skipped, sampler)

    largest = max(sizes, key=lambda z: z[0] * z[1] * z[2])
    copy = next(c for c in sweep if c.info["name"] == "copy")

    results = {
        "results_version": 1,
        "program": harness.program_name(__file__),
        "seed": s.report.seed,
        "device": {**(s.report.device or {}), "sm_count": sms, "l2_bytes": l2},
        "method": {
            **timing.method(run.rounds, run.launches, run.warmup_ms),
            "plan": run.plan,
            "paired": f"phase paired: the cases launched in turn, {run.cycles} cycles, after "
                      f"{run.warmup_ms:g} ms of untimed cycles",
            "timing_inputs": "uniform [-1, 1) float16, one fresh set per size",
            "check_inputs": f"integers in [-{CHECK_MAX}, {CHECK_MAX}] as float16: exact in float32",
            "first_launch": "wall time of the first launch at that size in a fresh compile worker; "
                            "JIT compile included at the first size",
            "quick": quick,
        },
        "reference": {"matmul": "cublas"},
        "ceilings": {"tflops": f"matmul/cublas/{shape_tag(largest)}", "gbps": copy.key},
        "peak": dense_peak(cp),
        "load": sampler.describe(),
        "cases": sampler.case_dicts(sweep + repeats + paired),
        "skipped": skipped,
        "compile": warmed,
    }
    if s.args.results:
        harness.write_atomically(s.args.results, harness.encode_report(results))
    entry.print_repeats(sweep, repeats, 64)
    print("\nhead to head (% of cuBLAS, median over cycles):", flush=True)
    for line in paired_lines(paired):
        print(line, flush=True)
    print("\nsummary:", flush=True)
    for line in table([c for c in sweep if c.info["name"] == "matmul"]):
        print(line, flush=True)
    entry.finish(s)


def _time_everything(s: harness.Session, timer: timing.Timer, sizes, cfgs: list[Config], warmed: dict[str, dict],
                     sms: int, run: entry.Pace, order: random.Random, skipped: list[dict[str, str]],
                     sampler: gpu_load.Sampler) -> tuple[list[timing.Case], list[timing.Case], list[timing.Case]]:
    """Every phase that times: each size's configs and cuBLAS, the copy, then at each size the contenders a
    second time and head to head. (sweep, repeats, paired) cases; ``sampler`` watches each case's batches of
    the first two phases (the head-to-head phase alternates cases launch by launch: no case has a batch)."""
    cp = s.cp
    sweep: list[timing.Case] = []
    inputs, cfg_of = {}, {}
    for index, size in enumerate(sizes):
        cases, inputs[size], size_cfgs = bench_size(s, timer, size, cfgs, warmed, index, sms, run, order, skipped,
                                                    sampler)
        sweep += cases
        cfg_of.update(size_cfgs)
        for line in table(cases):
            print(line, flush=True)
    copy = copy_case(s, timer)
    timing.interleave(timer, [copy], run.rounds, run.launches, warmup_ms=run.warmup_ms, order=order,
                      watch=sampler.watch("sweep"))
    sweep.append(copy)

    repeats: list[timing.Case] = []
    paired: list[timing.Case] = []
    for size in sizes:
        at_size = [c for c in sweep if c.info["name"] == "matmul" and tuple(c.info["shape"]) == size]
        chosen = contenders(at_size)
        say(f"{shape_tag(size)}: timing {len(chosen)} contenders a second time")
        repeat = again(chosen, cfg_of, inputs[size], sms, cp, "repeat")
        timing.interleave(timer, repeat, run.rounds, run.launches, warmup_ms=run.warmup_ms, order=order,
                          watch=sampler.watch("repeat"))
        repeats += repeat
        say(f"{shape_tag(size)}: the same cases head to head, launched in turn, {run.cycles} cycles")
        pairs = again(chosen, cfg_of, inputs[size], sms, cp, "paired")
        ref = next(c for c in pairs if c.info["variant"] == "cublas")
        pairs.append(timing.Case(key=f"{ref.key}/again", launch=cublas_launcher(cp, *inputs[size]),
                                 info={**ref.info, "twin_of": ref.key}))
        timing.alternate(timer, pairs, run.cycles, warmup_ms=run.warmup_ms)
        paired += pairs
    inputs.clear()
    return sweep, repeats, paired


def paired_lines(paired: list[timing.Case]) -> list[str]:
    """Each paired case's median over cycles of (cuBLAS ms / its ms), the way the record states it."""
    import statistics  # noqa: PLC0415

    refs = {tuple(c.info["shape"]): c for c in paired if c.info["variant"] == "cublas" and "twin_of" not in c.info}
    lines = []
    for c in paired:
        ref = refs[tuple(c.info["shape"])]
        if c is ref:
            continue
        pct = [100.0 * r / m for r, m in zip(ref.samples_ms, c.samples_ms)]
        q1, med, q3 = statistics.quantiles(pct, n=4)
        lines.append(f"  {c.key:64} {med:6.1f}% [{q1:.1f}, {q3:.1f}]")
    return lines


# --------------------------------------------------------------------------- compile worker


def _warm_body(spec: dict[str, Any]) -> dict[str, Any]:
    """Launch one config once at each size (inputs uninitialised, nothing checked), and
    read the resources of the kernel compiled for it (the previous size's when the JIT
    reused that kernel)."""
    import cupy as cp  # noqa: PLC0415

    cfg = Config.from_dict(spec["config"])
    sms, _ = device_facts(cp)
    stream = cp.cuda.get_current_stream()
    got = jit.capture_cubin(kernel_of(cfg))
    first, used = [], []
    for m, n, k in spec["sizes"]:
        a = cp.empty((m, k), dtype=np.float16)
        b = cp.empty((k, n), dtype=np.float16)
        c = cp.empty((m, n), dtype=np.float32)
        launch, _grid = launcher(cp, cfg, a, b, c, sms)
        got.pop("cubin", None)
        t0 = time.perf_counter()
        launch()
        stream.synchronize()
        first.append((time.perf_counter() - t0) * 1e3)
        used.append(used[-1] if used and "cubin" not in got else jit.resources(cp, got))
        del a, b, c
    return {"first_launch_ms": first, "resources": used}


class _Shaped(NamedTuple):
    """Stands in for an array where only its shape is read (``grid_and_args`` in an export)."""

    shape: tuple[int, ...]


def _export_specs(plan: str) -> dict[str, dict[str, Any]]:
    """Each config at each bench size whose arrays the JIT would see differently (a size
    whose dimensions are not all multiples of 16 compiles anew)."""
    sizes = {tuple(d % 16 == 0 for d in z): z for z in reversed(SIZES)}
    return {f"{c.key}@{shape_tag(z)}": {"config": c.to_dict(), "size": list(z)}
            for c in configs(TILES, plan) for z in sizes.values()}


def _export_body(spec: dict[str, Any]) -> dict[str, Any]:
    """Compile one config at one size for spec's target without a GPU."""
    cfg = Config.from_dict(spec["config"])
    m, n, k = spec["size"]
    _grid, args = grid_and_args(cfg, None, None, _Shaped((m, n)), sms=132)
    arrays = [jit.array_constraint(ct.float16, (m, k)), jit.array_constraint(ct.float16, (k, n)),
              jit.array_constraint(ct.float32, (m, n))]
    return jit.export(kernel_of(cfg), [*arrays, *args[3:]], spec["out"], spec["arch"])


def main(argv: list[str] | None = None) -> int:
    return entry.main(__file__, _body, _warm_body, __doc__.splitlines()[0],
                      "a smoke run: two sizes, two tiles, 2 rounds x 10 launches", argv,
                      export_specs=_export_specs, export_body=_export_body)


if __name__ == "__main__":
    sys.exit(main())
