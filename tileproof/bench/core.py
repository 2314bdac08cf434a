"""Benchmarking: time the course kernels (``kernels/bench/*_bench.py``) against cuBLAS/cupy here; bench records.

The command is ``commands/bench.py`` (thin); this module holds the work: the environment captured once (as ``run``
does), the GPU's clocks and throttle reasons read before and after each program, the raw samples turned into
``BenchCase`` statistics and head-to-head ``PairedRatios``, every case's roofline (``roofline``) and second-look flag
(``second_looks``), what the GPU did while each case ran (``gpu_load``: the program's NVML readings as quartiles
of the SM clock and power draw against the card's limits; ``load_unavailable`` where there are none), one bench
record per program. What is measured and how:
docs/benchmarks.md, "Timing the course kernels".
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tileproof.records.errors import TileproofError
from tileproof.records.models import (
    BENCH_VERSION,
    SECOND_LOOK_COPY_PCT,
    BenchCase,
    BenchRecord,
    BenchVerdict,
    CheckReport,
    ClockEventReason,
    Environment,
    GitState,
    GpuFacts,
    GpuLoad,
    HostFacts,
    PairedRatio,
    Roofline,
    SecondLook,
    Transcript,
)
from tileproof.records.redact import merge
from tileproof.records.safe_read import read_evidence
from tileproof.records.store import (
    digest,
    header,
    new_run_id,
    write_evidence,
    write_record,
)
from tileproof.records.trust.signing import Signer
from tileproof.runner.capture import probe
from tileproof.runner.execute import Outcome, RunOptions, read_left, run_program
from tileproof.runner.process import SCRATCH_PREFIX, scratch_dir

BENCH_DIR = Path("kernels") / "bench"
ROOF_TAGS = {"device copy": "copy", "dense peak": "peak", "largest cuBLAS product": "cuBLAS"}
"""How the summary's roofline column names each ceiling."""
NOISY_SPREAD = 0.10
"""A case whose spread (stdev/mean) exceeds this is flagged noisy (pyperf's rule)."""
GPU_STATE_FIELDS = ("index", "clocks.sm", "clocks.mem", "temperature.gpu", "power.draw", "pstate",
                    "clocks_throttle_reasons.active")
"""Read before and after each program; the last field is ``clocks_event_reasons.active``
on drivers that dropped the old name (tried second)."""


# --- choosing and describing programs -----------------------------------------


def bench_programs(root: Path) -> list[Path]:
    folder = root / BENCH_DIR
    if not folder.is_dir():
        raise TileproofError(f"{folder}: folder is missing (fix: run from the repository root)")
    return sorted(folder.glob("*_bench.py"))


def select(root: Path, names: list[str]) -> list[Path]:
    every = bench_programs(root)

    def matches(p: Path, n: str) -> bool:
        return n in (p.relative_to(root).as_posix(), p.name, p.stem, p.stem.removesuffix("_bench"))

    unknown = [n for n in names if not any(matches(p, n) for p in every)]
    if unknown:
        raise TileproofError(f"--program {unknown[0]}: no such bench program under {BENCH_DIR.as_posix()}/ "
                             f"(known: {', '.join(p.stem for p in every)})")
    return [p for p in every if not names or any(matches(p, n) for n in names)]


_IMPORT = re.compile(r"^\s*(?:from\s+(\w+)\s+import|import\s+(\w+))", re.MULTILINE)


def sources(root: Path, program: Path) -> list[Path]:
    """The program and every file of kernels/ or kernels/bench/ it imports, transitively."""
    folders = [program.parent, root / "kernels"]
    seen: list[Path] = []
    todo = [program]
    while todo:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.append(path)
        for match in _IMPORT.finditer(path.read_text(errors="replace")):
            name = match.group(1) or match.group(2)
            found = next((f / f"{name}.py" for f in folders if (f / f"{name}.py").is_file()), None)
            if found is not None:
                todo.append(found)
    return [seen[0], *sorted(seen[1:])]


# --- statistics ----------------------------------------------------------------


def stats(samples: list[float]) -> dict[str, Any]:
    """Median, min, max, spread (stdev/mean, 0 for one sample) and the noisy flag."""
    if not samples:
        raise ValueError("no timed samples")
    spread = statistics.stdev(samples) / statistics.fmean(samples) if len(samples) > 1 else 0.0
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples),
            "spread": spread, "noisy": spread > NOISY_SPREAD, "repeats": len(samples)}


def rates(info: dict[str, Any], median_ms: float) -> tuple[float | None, float | None]:
    """(TFLOP/s, GB/s) at the median: TFLOP/s when the case counts flops, else GB/s."""
    seconds = median_ms * 1e-3
    if info.get("flops"):
        return info["flops"] / seconds / 1e12, None
    if info.get("bytes"):
        return None, info["bytes"] / seconds / 1e9
    return None, None


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


WALL_SLACK_S = 1.0
"""Seconds a reported timed region may stick out of tileproof's bracket of the step (clock reads, rounding)."""


def wall_of(case: dict[str, Any], window: tuple[float, float] | None) -> tuple[float | None, bool | None]:
    """(wall-clock seconds of the case's timed regions, whether all lie inside ``window``: tileproof's own start
    and end of the step, Unix seconds); (None, None) when the program reported no regions."""
    regions = case.get("wall_unix")
    if not regions:
        return None, None
    spans = [(float(a), float(b)) for a, b in regions]
    if any(not (math.isfinite(a) and math.isfinite(b)) or b < a for a, b in spans):
        raise ValueError(f"case {case['key']}: wall_unix holds a region that ends before it starts")
    inside = None if window is None else all(
        window[0] - WALL_SLACK_S <= a and b <= window[1] + WALL_SLACK_S for a, b in spans)
    return sum(b - a for a, b in spans), inside


@dataclass(frozen=True)
class _Sweep:
    """What every case of a results file's sweep is built against (``build_cases``)."""

    results: dict[str, Any]
    stats: dict[str, dict[str, Any]]
    """Case key -> ``stats`` of its samples."""
    rate: dict[str, tuple[float | None, float | None]]
    """Case key -> (TFLOP/s, GB/s) at its median."""
    reference: dict[tuple[str, tuple], str]
    ceilings: dict[str, float]
    ceiling_keys: dict[str, str]
    window: tuple[float, float] | None


def _ceilings(results: dict[str, Any], rate: dict[str, tuple[float | None, float | None]]
              ) -> tuple[dict[str, float], dict[str, str]]:
    """(unit -> the ceiling's rate, unit -> the case it was measured on): the results' ``ceilings`` and ``peak``."""
    ceilings: dict[str, float] = {}
    ceiling_keys: dict[str, str] = dict(results.get("ceilings", {}))
    for unit, key in ceiling_keys.items():
        value = rate[key][0 if unit == "tflops" else 1]
        if value is None:
            raise ValueError(f"ceiling {unit}: case {key} has no {unit} rate")
        ceilings[unit] = value
    peak = results.get("peak")
    if peak is not None:
        ceilings["peak_tflops"] = float(peak["tflops"])
    return ceilings, ceiling_keys


def _case(sw: _Sweep, c: dict[str, Any], report: CheckReport | None) -> BenchCase:
    """One sweep case of the results file as a ``BenchCase``."""
    key = c["key"]
    tflops, gbps = sw.rate[key]
    mine = tflops if tflops is not None else gbps
    ref_key = sw.reference.get((c["name"], tuple(c["shape"])))
    pct_ref = None
    if ref_key is not None and mine is not None:
        ref = sw.rate[ref_key][0 if tflops is not None else 1]
        pct_ref = 100.0 * mine / ref if ref else None
    ceiling = sw.ceilings.get("tflops" if tflops is not None else "gbps")
    index = c.get("check_index")
    check = report.checks[index] if report is not None and isinstance(index, int) \
        and 0 <= index < len(report.checks) else None
    s = sw.stats[key]
    roof = roofline(c, s["median_ms"], tflops, gbps, sw.ceilings, sw.ceiling_keys)
    wall_s, in_step = wall_of(c, sw.window)
    return BenchCase(
        key=key, name=c["name"], variant=c["variant"], shape=list(c["shape"]), dtype=c["dtype"],
        tiles=c.get("tiles"), repeats=s["repeats"], first_launch_ms=_finite(c.get("first_launch_ms")),
        median_ms=s["median_ms"], min_ms=s["min_ms"], max_ms=s["max_ms"], spread=s["spread"],
        noisy=s["noisy"], tflops=tflops, gbps=gbps, pct_of_reference=pct_ref,
        pct_of_ceiling=(100.0 * mine / ceiling) if ceiling and mine is not None else None,
        max_rel_err=_finite(check.max_rel_err) if check else None,
        checked=bool(check and check.passed), config=dict(c.get("config") or {}),
        tiles_per_sm=_finite(c.get("tiles_per_sm")), resources=_resources(c.get("resources")),
        roofline=roof, load=gpu_load(c.get("load"), sw.results.get("load"), sw.results.get("peak"),
                                     tflops if roof is not None and roof.bound == "flops" else None),
        events_ms=float(sum(c["samples_ms"])) if wall_s is not None else None, wall_s=wall_s,
        wall_in_step=in_step,
    )


def build_cases(results: dict[str, Any], report: CheckReport | None,
                window: tuple[float, float] | None = None
                ) -> tuple[list[BenchCase], dict[str, float], dict[str, float]]:
    """BenchCases, ceilings and repeat spreads from a program's results JSON; ``window``: the step's start and
    end as tileproof saw them (Unix seconds), which each case's reported timed regions must lie in.

    Raises KeyError/TypeError/ValueError on a malformed results file (the caller
    turns that into an ``error`` verdict)."""
    sweep = [c for c in results["cases"] if c.get("phase", "sweep") == "sweep"]
    repeat = [c for c in results["cases"] if c.get("phase") == "repeat"]
    by_key = {c["key"]: c for c in sweep}
    st = {c["key"]: stats(c["samples_ms"]) for c in sweep}
    rate = {k: rates(by_key[k], s["median_ms"]) for k, s in st.items()}
    ceilings, ceiling_keys = _ceilings(results, rate)
    sw = _Sweep(results, st, rate, references(results, sweep), ceilings, ceiling_keys, window)
    cases = [_case(sw, c, report) for c in sweep]
    repeat_spread = {}
    for c in repeat:
        first = st[c["key"]]["median_ms"]
        second = statistics.median(c["samples_ms"])
        repeat_spread[c["key"]] = abs(second - first) / first
    return cases, ceilings, repeat_spread


def references(results: dict[str, Any], sweep: list[dict[str, Any]]) -> dict[tuple[str, tuple], str]:
    """(computation, shape) -> the key of its library reference's case (``results['reference']``
    names the reference variant of each computation)."""
    reference_variant: dict[str, str] = results.get("reference", {})
    return {(c["name"], tuple(c["shape"])): c["key"] for c in sweep
            if reference_variant.get(c["name"]) == c["variant"]}


def roofline(case: dict[str, Any], median_ms: float, tflops: float | None, gbps: float | None,
             ceilings: dict[str, float], ceiling_keys: dict[str, str]) -> Roofline | None:
    """What bounds one case, against the ceilings measured (or computed) in the same run.

    Its floor is the larger of its counted FLOPs at the FLOP ceiling (the dense peak, else
    the largest cuBLAS product) and its counted bytes at the copy's bandwidth; the larger
    term names the bound. A case that counts FLOPs is measured against the FLOP ceiling when
    that term is the larger or no copy was timed; else against the copy. None when the case
    counts nothing a ceiling of this run could measure."""
    flop_ceiling = ceilings.get("peak_tflops") or ceilings.get("tflops")
    copy_gbps = ceilings.get("gbps")
    flops, nbytes = case.get("flops"), case.get("bytes")
    t_flops = flops / (flop_ceiling * 1e12) * 1e3 if flops and flop_ceiling else None
    t_bytes = nbytes / (copy_gbps * 1e9) * 1e3 if nbytes and copy_gbps else None
    if flop_ceiling and t_flops is not None and tflops is not None and (t_bytes is None or t_flops >= t_bytes):
        peak = "peak_tflops" in ceilings
        return Roofline(bound="flops", ceiling="dense peak" if peak else "largest cuBLAS product",
                        ceiling_key=None if peak else ceiling_keys.get("tflops"), ceiling_rate=flop_ceiling,
                        pct_of_ceiling=100.0 * tflops / flop_ceiling, floor_ms=max(t_flops, t_bytes or 0.0))
    if copy_gbps and nbytes and t_bytes is not None:
        rate = gbps if gbps is not None else nbytes / (median_ms * 1e-3) / 1e9
        return Roofline(bound="bytes", ceiling="device copy", ceiling_key=ceiling_keys.get("gbps"),
                        ceiling_rate=copy_gbps, pct_of_ceiling=100.0 * rate / copy_gbps,
                        floor_ms=max(t_bytes, t_flops or 0.0))
    return None


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(lower quartile, median, upper quartile); all three the value itself for one value."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4)
    return q1, statistics.median(values), q3


def gpu_load(raw: Any, about: Any, peak: Any, flops_rate: float | None) -> GpuLoad | None:
    """One case's ``GpuLoad`` from its NVML readings (``raw``: the results file's per-case ``load``) and what
    the program says about the readings as a whole (``about``: results ``load``, with the card's maximum SM
    clock, its power limit and the reason bits' names); ``flops_rate``: the case's TFLOP/s when FLOPs bound it,
    for its share of the dense peak at its own clock (``peak``: results ``peak``, with the clock it was computed
    at). None without readings. Raises KeyError/TypeError/ValueError on a malformed entry, like build_cases."""
    if not isinstance(raw, dict) or not isinstance(about, dict) or "max_sm_clock_mhz" not in about \
            or not raw["sm_clock_mhz"]:
        return None
    clocks = [float(x) for x in raw["sm_clock_mhz"]]
    power = [float(x) for x in raw["power_w"]]
    bits = raw["reasons"]
    if not len(clocks) == len(power) == len(bits):
        raise ValueError(f"load readings of unequal length: {len(clocks)} clocks, {len(power)} powers, "
                         f"{len(bits)} reasons")
    names: dict[int, ClockEventReason] = {int(bit): name for bit, name in about["reason_bits"].items()}
    counts: dict[ClockEventReason, int] = {}
    for word in bits:
        seen: set[ClockEventReason] = {names.get(1 << i, "other") for i in range(int(word).bit_length())
                                        if int(word) >> i & 1}
        for name in seen:
            counts[name] = counts.get(name, 0) + 1
    c1, clock, c3 = quartiles(clocks)
    p1, watts, p3 = quartiles(power)
    at_clock = None
    if flops_rate is not None and isinstance(peak, dict) and peak.get("sm_clock_mhz"):
        at_clock = 100.0 * flops_rate / (float(peak["tflops"]) * clock / float(peak["sm_clock_mhz"]))
    return GpuLoad(samples=len(clocks), window_s=float(raw["window_s"]), sm_clock_mhz=clock, sm_clock_q1_mhz=c1,
                   sm_clock_q3_mhz=c3, max_sm_clock_mhz=float(about["max_sm_clock_mhz"]), power_w=watts,
                   power_q1_w=p1, power_q3_w=p3, power_limit_w=float(about["power_limit_w"]),
                   power_reading=about["power_reading"],
                   reasons={k: v / len(clocks) for k, v in sorted(counts.items())}, pct_of_peak_at_clock=at_clock)


def load_unavailable(results: dict[str, Any], cases: list[BenchCase]) -> str | None:
    """Why some case with a rate has no ``load`` (None when every one has): the program's own word when it
    could not read NVML, else the cases that got no reading."""
    missing = [c.key for c in cases if c.load is None and (c.tflops is not None or c.gbps is not None)]
    if not missing:
        return None
    about = results.get("load")
    if not isinstance(about, dict):
        return "the bench program wrote no GPU clock and power readings (its results file has no 'load')"
    why = f"no NVML reading during the batches of {len(missing)} case(s): " + ", ".join(missing)[:300]
    return f"{about['error']}; {why}" if about.get("error") else why


def control_band(control: PairedRatio | None, reference: BenchCase | None) -> tuple[float, str]:
    """How far from 100% the method alone puts a ratio at one shape, in points: the
    cuBLAS-against-itself control's median and quartiles, their farthest from 100; without a
    control, the reference's own spread (stdev/mean of its samples)."""
    if control is not None:
        band = max(abs(control.pct_of_reference - 100.0), control.q3 - 100.0, 100.0 - control.q1)
        return band, (f"control {control.pct_of_reference:.1f}% [{control.q1:.1f}, {control.q3:.1f}] "
                      f"over {control.cycles} cycles")
    spread = 100.0 * reference.spread if reference is not None else 0.0
    return spread, f"no control at this shape: the reference's own spread {spread:.1f}%"


def second_looks(results: dict[str, Any], cases: list[BenchCase],
                 paired: dict[str, PairedRatio]) -> list[BenchCase]:
    """The cases again, each flagged (``second_look``) when its result is too good to believe from
    one measurement: a bytes-bound case (other than the copy itself) above SECOND_LOOK_COPY_PCT of
    the copy; a flops-bound tile kernel whose % of cuBLAS -- head to head when it was paired, the
    sweep's medians otherwise -- exceeds 100 by more than ``control_band`` at its shape."""
    sweep = [c for c in results["cases"] if c.get("phase", "sweep") == "sweep"]
    reference = references(results, sweep)
    by_key = {c.key: c for c in cases}
    controls = {p.reference: p for p in paired.values() if p.control}
    out = []
    for c in cases:
        r, look = c.roofline, None
        if r is not None and r.bound == "bytes" and c.key != r.ceiling_key and r.pct_of_ceiling > SECOND_LOOK_COPY_PCT:
            look = SecondLook(rule="above-copy", value=r.pct_of_ceiling, threshold=SECOND_LOOK_COPY_PCT,
                              basis=f"{r.pct_of_ceiling * r.ceiling_rate / 100:.0f} GB/s against the device copy's "
                                    f"{r.ceiling_rate:.0f} GB/s in the same run")
        ref_key = reference.get((c.name, tuple(c.shape)))
        if r is not None and r.bound == "flops" and c.tiles is not None and ref_key is not None:
            pair = paired.get(c.key)
            value = pair.pct_of_reference if pair is not None else c.pct_of_reference
            band, why = control_band(controls.get(ref_key), by_key.get(ref_key))
            how = f"head to head, {pair.cycles} cycles" if pair is not None else "sweep medians"
            if value is not None and value > 100.0 + band:
                look = SecondLook(rule="above-reference", value=value, threshold=100.0 + band, basis=f"{how}; {why}")
        out.append(c.model_copy(update={"second_look": look}) if look else c)
    return out


def head_to_head(results: dict[str, Any]) -> dict[str, PairedRatio]:
    """PairedRatios from a results file's phase ``paired``: for each case that is not the
    reference, the reference's ms over its ms, sample by sample (sample i of each came
    from cycle i), as a median percentage with quartiles. A case with ``twin_of`` naming
    the reference is the reference again: its ratio is the control.

    Raises KeyError/TypeError/ValueError on a malformed results file, like build_cases."""
    paired = [c for c in results["cases"] if c.get("phase") == "paired"]
    reference_variant: dict[str, str] = results.get("reference", {})
    refs = {(c["name"], tuple(c["shape"])): c for c in paired
            if reference_variant.get(c["name"]) == c["variant"] and not c.get("twin_of")}
    out = {}
    for c in paired:
        ref = refs.get((c["name"], tuple(c["shape"])))
        if ref is None or ref is c:
            continue
        if len(ref["samples_ms"]) != len(c["samples_ms"]) or len(c["samples_ms"]) < 4:
            raise ValueError(f"paired case {c['key']}: {len(c['samples_ms'])} samples against "
                             f"{len(ref['samples_ms'])} of {ref['key']} (need the same number, at least 4)")
        pct = [100.0 * r / m for r, m in zip(ref["samples_ms"], c["samples_ms"], strict=True)]
        q1, median, q3 = statistics.quantiles(pct, n=4)
        out[c["key"]] = PairedRatio(reference=ref["key"], cycles=len(pct), pct_of_reference=median, q1=q1, q3=q3,
                                    control=c.get("twin_of") == ref["key"])
    return out


def _resources(raw: Any) -> dict[str, int | str] | None:
    """A case's ``resources`` as the program wrote them: ints, or one ``error`` string."""
    if not isinstance(raw, dict):
        return None
    if isinstance(raw.get("error"), str):
        return {"error": raw["error"]}
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)}


# --- GPU state -------------------------------------------------------------------


def gpu_state(root: Path, run_id: str, when: str, env: dict[str, str]) -> Transcript | None:
    """``nvidia-smi --query-gpu`` clocks/temperature/power as an evidence transcript."""
    if shutil.which("nvidia-smi", path=env.get("PATH")) is None:
        return None
    fields = list(GPU_STATE_FIELDS)
    done = probe(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv"], env)
    if done.exit_code != 0:  # newer drivers call the throttle reasons "clocks_event_reasons"
        fields[-1] = "clocks_event_reasons.active"
        retry = probe(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv"], env)
        if retry.exit_code == 0:
            done = retry
    return write_evidence(root, run_id, f"nvidia-smi-{when}.csv", done.stdout + done.stderr)


def _state_line(root: Path, t: Transcript | None) -> str:
    if t is None:
        return "no nvidia-smi"
    lines = read_evidence(root, t.path).decode("utf-8", "replace").strip().splitlines()
    return lines[1].strip() if len(lines) > 1 else (lines[0].strip() if lines else "empty")


# --- the command -----------------------------------------------------------------


def summary(cases: list[BenchCase], repeat_spread: dict[str, float], ceilings: dict[str, float],
            paired: dict[str, PairedRatio] | None = None) -> list[str]:
    lines = [f"    {'case':62} {'median ms':>10} {'rate':>10} {'%ref':>6} {'%ceil':>6} {'spread':>7}  roofline"]
    for c in cases:
        rate = f"{c.tflops:6.1f} TF/s" if c.tflops is not None else f"{c.gbps:6.0f} GB/s"
        ref = f"{c.pct_of_reference:6.1f}" if c.pct_of_reference is not None else f"{'-':>6}"
        ceil = f"{c.pct_of_ceiling:6.1f}" if c.pct_of_ceiling is not None else f"{'-':>6}"
        roof = f"  {ROOF_TAGS[c.roofline.ceiling]} {c.roofline.pct_of_ceiling:5.1f}%" if c.roofline else ""
        load = (f"  SM {c.load.sm_clock_mhz:4.0f}/{c.load.max_sm_clock_mhz:.0f} MHz "
                f"{c.load.power_w:3.0f}/{c.load.power_limit_w:.0f} W" if c.load else "")
        flags = (" NOISY" if c.noisy else "") + (" SECOND-LOOK" if c.second_look else "")
        lines.append(f"    {c.key:62} {c.median_ms:10.4f} {rate:>10} {ref} {ceil} {100 * c.spread:6.1f}%{roof}{load}"
                     f"{flags}")
    lines += [f"    ceiling {k}: {v:.1f}" for k, v in ceilings.items()]
    lines += [f"    repeat {k}: medians differ by {100 * v:.2f}%" for k, v in repeat_spread.items()]
    lines += [f"    {c.key}: {c.second_look.text()}" for c in cases if c.second_look]
    lines += [f"    {line}" for line in best_lines(cases)]
    lines += [f"    head to head {k}: {p.pct_of_reference:.1f}% of {p.reference.split('/')[1]} "
              f"(quartiles {p.q1:.1f}-{p.q3:.1f}%, {p.cycles} cycles){' [control: itself]' if p.control else ''}"
              for k, p in (paired or {}).items()]
    return lines


def best_lines(cases: list[BenchCase]) -> list[str]:
    """Per computation, shape and variant, the fastest tile kernel (a case with tiles):
    what the sweep found, with its waves and, when known, its registers and spills."""
    best: dict[tuple, BenchCase] = {}
    for c in cases:
        slot = (c.name, tuple(c.shape), c.variant)
        if c.tiles is not None and (slot not in best or c.median_ms < best[slot].median_ms):
            best[slot] = c
    lines = []
    for c in best.values():
        ref = f"{c.pct_of_reference:.1f}% of reference" if c.pct_of_reference is not None else "no reference"
        waves = f", {c.tiles_per_sm:g} tiles/SM" if c.tiles_per_sm is not None else ""
        res = c.resources or {}
        cost = (f", {res['registers']} registers + {res['local_bytes']} B spilled per thread"
                if "registers" in res and "local_bytes" in res else "")
        load = f"; {c.load.text()}" if c.load else ""
        lines.append(f"best {c.key}: {c.median_ms:.4f} ms, {ref}{waves}{cost}{load}")
    return lines


@dataclass(frozen=True)
class Session:
    """What every bench program of one command shares."""

    root: Path
    environment: Environment
    gpu: GpuFacts | None
    git: GitState
    host: HostFacts
    env: dict[str, str]
    quick: bool
    timeout: float
    cap: int
    signer: Signer | None = None


def bench_verdict(outcome: Outcome) -> BenchVerdict:
    """A bench record's verdict: the run's (``execute.run_program``: the program's word and tileproof's own check
    of its handed-over outputs, ``outside_check.combine``); ``toolchain-absent``, which run_program never says
    (only a session does), is an ``error``."""
    verdict = outcome.verdict
    return "error" if verdict == "toolchain-absent" else verdict


def _read_results(raw: bytes | None, outcome: Outcome, why_not: str = "") -> tuple[BenchVerdict, str, tuple]:
    """Verdict, reason and (cases, ceilings, repeat spread, head to head, why some case has no load) from a
    results file."""
    verdict: BenchVerdict = bench_verdict(outcome)
    reason = outcome.reason
    empty: tuple = ([], {}, {}, {}, None)
    if raw is None:
        return ("error", reason + f"; wrote no results file{why_not}", empty) if verdict in ("passed", "unverified") \
            else (verdict, reason, empty)
    try:
        results = json.loads(raw)
        window = (outcome.step.started.timestamp(), outcome.step.ended.timestamp())
        cases, ceilings, repeat_spread = build_cases(results, outcome.report, window)
        paired = head_to_head(results)
        cases = second_looks(results, cases, paired)
        skipped = results.get("skipped") or []
        if skipped and verdict in ("passed", "unverified"):
            reason += (f"; {len(skipped)} config(s) skipped: "
                       + "; ".join(f"{s['key']}: {s['reason']}" for s in skipped)[:300])
    except (KeyError, TypeError, ValueError, IndexError) as e:
        return ("error" if verdict in ("passed", "unverified") else verdict,
                reason + f"; results file unreadable: {type(e).__name__}: {e}", empty)
    return verdict, reason, (cases, ceilings, repeat_spread, paired, load_unavailable(results, cases))


def bench_one(s: Session, program: Path) -> BenchRecord:
    """Run one bench program between two GPU-state reads; write and print its record."""
    rel = program.relative_to(s.root).as_posix()
    run_id = new_run_id("bench")
    print(f"bench: {rel} [{run_id}]", flush=True)
    before = gpu_state(s.root, run_id, "before", s.env)
    print(f"  gpu before: {_state_line(s.root, before)}", flush=True)
    with scratch_dir() as tmp:
        results_path = tmp / "results.json"
        argv = [sys.executable, str(program), "--results", str(results_path), *(["--quick"] if s.quick else [])]
        cache = Path(s.env.get("CUDA_TILE_CACHE_DIR", "off"))  # the session's own JIT cache (commands.bench)
        writes = (tmp, *([cache] if cache.name.startswith(SCRATCH_PREFIX) and cache.is_dir() else []))
        outcome = run_program(s.root, run_id, program.stem, argv, s.env, s.timeout, RunOptions(s.cap, writable=writes))
        left = read_left(tmp, results_path.name)
    raw = left.data
    if left.redactions:
        outcome = dataclasses.replace(outcome, step=outcome.step.model_copy(
            update={"redactions": merge(outcome.step.redactions, left.redactions)}))
    after = gpu_state(s.root, run_id, "after", s.env)
    print(f"  gpu after:  {_state_line(s.root, after)}", flush=True)
    verdict, reason, (cases, ceilings, repeat_spread, paired, no_load) = _read_results(raw, outcome, left.why_not)
    if s.gpu and s.gpu.runtime_compute_capability not in (None, s.gpu.compute_capability):
        verdict, reason = "error", (f"nvidia-smi says compute capability {s.gpu.compute_capability}, "
                                    f"the CUDA runtime says {s.gpu.runtime_compute_capability}")
    record = BenchRecord(
        **header(run_id, s.git, s.host), kind="bench", bench_version=BENCH_VERSION, environment=s.environment,
        program=rel,
        sources=[digest(s.root, p) for p in sources(s.root, program)], step=outcome.step, report=outcome.report,
        report_file=outcome.report_file,
        results_file=write_evidence(s.root, run_id, f"{program.stem}-results.json", raw) if raw else None,
        gpu_before=before, gpu_after=after, cases=cases, ceilings=ceilings, repeat_spread=repeat_spread,
        head_to_head=paired, load_unavailable=no_load, outside=outcome.outside, verdict=verdict, reason=reason,
    )
    write_record(s.root, record, s.signer)
    print(f"  {verdict:8} {rel:36} {outcome.step.duration_s:7.1f}s  {reason}  [{run_id}]", flush=True)
    if cases:
        print("\n".join(summary(cases, repeat_spread, ceilings, paired)), flush=True)
    if no_load:
        print(f"  no clock and power readings: {no_load}", flush=True)
    return record
