"""The bench section's view model: what the charts show, as typed values, from bench records only.

Pure: ``bench_views(records, bad)`` and ``history(records, bad)`` read nothing but
the records given. For each bench record: one head-to-head chart per size (each
course variant's median rate as % of the library reference over the paired cycles,
quartile whiskers, and the reference against a second copy of itself, the
control), one tile-sweep chart per computation and shape (rates with the fastest
and slowest repeat as whiskers, the library reference as its own bar, the GPU's
ceiling or the device copy as a dashed line), and the ceilings. From bench_version 2 each
sweep bar also says what bounds its case and how close it comes to that ceiling, a case
flagged for a second look says so, and the record's notes list the flags. ``history``
follows each case key across bench records, oldest first, and marks a drop of more than
``REGRESSION`` from the previous record. ``status_lines`` gives ``tileproof status`` one
line per computation and shape of each program's newest counted bench record. Markdown and
HTML both render these.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from tileproof.judge import trust
from tileproof.records.models import BenchCase, BenchRecord, PairedRatio

BarKind = Literal["case", "reference", "control"]
REGRESSION = 0.05
"""A case whose newest value is more than 5% below the previous record's is marked regressed."""
REFERENCE_NAMES = {"cublas": "cuBLAS", "cupy": "CuPy", "memcpy": "device copy"}
CEILING_TEXT = {"tflops": ("TFLOP/s", "a large cuBLAS product"), "gbps": ("GB/s", "a large device copy")}


@dataclass(frozen=True)
class Bar:
    label: str
    kind: BarKind
    value: float
    value_text: str
    low: float | None = None
    high: float | None = None
    """Whisker ends (quartiles, or the slowest and fastest repeat), when known."""


@dataclass(frozen=True)
class RefLine:
    label: str
    value: float


@dataclass(frozen=True)
class BarChart:
    title: str
    axis: str
    bars: tuple[Bar, ...]
    lines: tuple[RefLine, ...] = ()
    whiskers: str = ""
    """What the whiskers span, in words (empty: none drawn)."""


@dataclass(frozen=True)
class BenchView:
    """One bench record as the report shows it."""

    run_id: str
    program: str
    created: str
    gpu: str
    verdict: str
    counted: bool
    """False when the audit found something against the record (it is shown, flagged, and left out of the history)."""
    ceilings: tuple[str, ...]
    head_to_head: tuple[BarChart, ...]
    sweeps: tuple[BarChart, ...]
    notes: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    """(label, repo-relative path) of the record and its transcripts."""


@dataclass(frozen=True)
class HistoryPoint:
    run_id: str
    created: str
    value: float
    value_text: str


@dataclass(frozen=True)
class HistorySeries:
    """One case key across bench records, oldest first."""

    program: str
    key: str
    metric: str
    points: tuple[HistoryPoint, ...]
    regressed: bool
    change_text: str
    """The newest value against the previous one, e.g. ``-6.2% vs previous``."""


def _ref_name(key: str) -> str:
    parts = key.split("/")
    return REFERENCE_NAMES.get(parts[1], parts[1]) if len(parts) > 1 else key


def case_label(key: str) -> str:
    """``matmul/grouped/4096x4096x4096/128x256x64+warps8`` → ``grouped 128x256x64+warps8``
    (the chart names the shape)."""
    parts = key.split("/")
    if len(parts) < 3:
        return key
    variant = REFERENCE_NAMES.get(parts[1], parts[1])
    return " ".join([variant, *parts[3:]])


def _rate(case: BenchCase) -> tuple[float, str] | None:
    if case.tflops is not None:
        return case.tflops, "TFLOP/s"
    if case.gbps is not None:
        return case.gbps, "GB/s"
    return None


def _sweep_bar(case: BenchCase, reference: bool) -> Bar | None:
    rate = _rate(case)
    if rate is None:
        return None
    value, unit = rate
    low = value * case.median_ms / case.max_ms if case.max_ms > 0 else None
    high = value * case.median_ms / case.min_ms if case.min_ms > 0 else None
    pct = f", {case.pct_of_reference:.0f}% of ref" if case.pct_of_reference is not None and not reference else ""
    if case.roofline is not None:
        pct += f", {case.roofline.pct_of_ceiling:.0f}% of {case.roofline.ceiling}"
    elif unit == "GB/s" and case.pct_of_ceiling is not None:
        pct += f", {case.pct_of_ceiling:.0f}% of copy"
    flags = (" noisy" if case.noisy else "") + (" ⚑ second look" if case.second_look else "")
    return Bar(case_label(case.key or f"{case.name}/{case.variant}/x"), "reference" if reference else "case",
               value, f"{value:.0f} {unit}{pct}{flags}", low, high)


def _h2h_charts(rec: BenchRecord) -> list[BarChart]:
    groups: dict[str, list[tuple[str, PairedRatio]]] = {}
    for key, pair in rec.head_to_head.items():
        groups.setdefault(pair.reference, []).append((key, pair))
    charts = []
    for reference, pairs in groups.items():
        ref = _ref_name(reference)
        shape = reference.split("/")[2] if reference.count("/") >= 2 else reference
        bars = []
        for key, pair in sorted(pairs, key=lambda kp: kp[1].control):
            label = f"{ref} vs {ref} (control)" if pair.control else case_label(key)
            bars.append(Bar(label, "control" if pair.control else "case", pair.pct_of_reference,
                            f"{pair.pct_of_reference:.1f}% [{pair.q1:.1f}, {pair.q3:.1f}]", pair.q1, pair.q3))
        cycles = max(p.cycles for _, p in pairs)
        charts.append(BarChart(f"Head to head against {ref}, {reference.split('/')[0]} {shape} "
                               f"({cycles} paired cycles)",
                               f"% of {ref}'s rate (median over cycles)", tuple(bars),
                               (RefLine(f"100% of {ref}", 100.0),), "quartiles over cycles"))
    return charts


def _sweep_charts(rec: BenchRecord) -> list[BarChart]:
    groups: dict[tuple[str, tuple[int, ...]], list[BenchCase]] = {}
    for case in rec.cases:
        if case.name != "copy":
            groups.setdefault((case.name, tuple(case.shape)), []).append(case)
    charts = []
    for (name, shape), cases in groups.items():
        bars = [b for c in cases if c.tiles is not None and (b := _sweep_bar(c, False))]
        bars += [b for c in cases if c.tiles is None and (b := _sweep_bar(c, True))]
        if not bars:
            continue
        rate = _rate(cases[0])
        unit = rate[1] if rate else ""
        lines: list[RefLine] = []
        if unit == "TFLOP/s" and "tflops" in rec.ceilings:
            lines.append(RefLine(f"GPU ceiling {rec.ceilings['tflops']:.0f} TFLOP/s", rec.ceilings["tflops"]))
        if unit == "TFLOP/s" and "peak_tflops" in rec.ceilings:
            lines.append(RefLine(f"dense peak {rec.ceilings['peak_tflops']:.0f} TFLOP/s", rec.ceilings["peak_tflops"]))
        if unit == "GB/s" and "gbps" in rec.ceilings:
            lines.append(RefLine(f"device copy {rec.ceilings['gbps']:.0f} GB/s", rec.ceilings["gbps"]))
        shape_text = "x".join(map(str, shape))
        against = " against the device copy" if unit == "GB/s" else ""
        bounds = {c.roofline.bound for c in cases if c.roofline is not None}
        if len(bounds) == 1:
            against += f" ({bounds.pop()}-bound)"
        charts.append(BarChart(f"Tile sweep: {name} {shape_text}, {unit}{against}", f"{unit} (median of repeats)",
                               tuple(bars), tuple(lines), "slowest to fastest repeat"))
    return charts


def _gpu(rec: BenchRecord) -> str:
    gpu = rec.environment.gpu
    return f"{gpu.name} (cc {gpu.compute_capability})" if gpu else "no GPU"


def _links(rec: BenchRecord) -> tuple[tuple[str, str], ...]:
    out = [("record", f"runs/{rec.run_id}.json"), ("stdout", rec.step.stdout.path), ("stderr", rec.step.stderr.path)]
    out += [(label, t.path) for label, t in (("results", rec.results_file), ("report", rec.report_file),
                                             ("GPU before", rec.gpu_before), ("GPU after", rec.gpu_after)) if t]
    return tuple(out)


def bench_view(rec: BenchRecord, counted: bool = True) -> BenchView:
    ceilings = tuple(f"{value:.1f} {CEILING_TEXT[k][0]} ({CEILING_TEXT[k][1]})" if k in CEILING_TEXT
                     else f"{k} {value:g}" for k, value in sorted(rec.ceilings.items()))
    notes = []
    if not rec.head_to_head and any(c.name == "matmul" for c in rec.cases):
        notes.append("no head-to-head phase in this record (written by an earlier bench program): "
                     "the sweep's % of reference compares medians taken at different moments")
    noisy = sum(1 for c in rec.cases if c.noisy)
    if noisy:
        notes.append(f"{noisy} noisy case{'s' * (noisy != 1)} (spread above 10%)")
    if not rec.has_rooflines:
        notes.append("bench_version 1: no roofline and no second-look flags in this record (written before them)")
    if rec.load_unavailable:
        notes.append(f"no GPU clock and power readings for some cases: {rec.load_unavailable}")
    notes += [f"⚑ {c.key}: {c.second_look.text()}" for c in rec.cases if c.second_look]
    return BenchView(rec.run_id, rec.program, rec.created.strftime("%Y-%m-%d %H:%M UTC"), _gpu(rec), rec.verdict,
                     counted, ceilings, tuple(_h2h_charts(rec)), tuple(_sweep_charts(rec)), tuple(notes), _links(rec))


def bench_views(records: Iterable, bad: set[str] = frozenset()) -> list[BenchView]:  # type: ignore[assignment]
    """Every bench record, newest first per program (programs in name order)."""
    benches = [r for r in records if isinstance(r, BenchRecord)]
    benches.sort(key=lambda r: (r.program, -r.created.timestamp(), r.run_id))
    return [bench_view(r, r.run_id not in bad) for r in benches]


def _series_points(benches: list[BenchRecord]) -> dict[tuple[str, str, str], list[HistoryPoint]]:
    out: dict[tuple[str, str, str], list[HistoryPoint]] = {}
    for rec in benches:
        when = rec.created.strftime("%Y-%m-%d %H:%M")
        for case in rec.cases:
            rate = _rate(case)
            if rate is not None and case.key:
                metric = "tflops" if rate[1] == "TFLOP/s" else "gbps"
                out.setdefault((rec.program, case.key, metric), []).append(
                    HistoryPoint(rec.run_id, when, rate[0], f"{rate[0]:.1f} {rate[1]}"))
        for key, pair in rec.head_to_head.items():
            out.setdefault((rec.program, key, "% of reference, head to head"), []).append(
                HistoryPoint(rec.run_id, when, pair.pct_of_reference, f"{pair.pct_of_reference:.1f}%"))
    return out


def history(records: Iterable, bad: set[str] = frozenset()) -> list[HistorySeries]:  # type: ignore[assignment]
    """Each case key seen in two or more counted bench records of one program, oldest record first."""
    benches = sorted((r for r in records if isinstance(r, BenchRecord) and r.run_id not in bad),
                     key=lambda r: (r.created, r.run_id))
    out = []
    for (program, key, metric), points in _series_points(benches).items():
        if len(points) < 2:
            continue
        prev, last = points[-2].value, points[-1].value
        change = (last - prev) / prev if prev else 0.0
        out.append(HistorySeries(program, key, metric, tuple(points), change < -REGRESSION,
                                 f"{change:+.1%} vs previous"))
    out.sort(key=lambda s: (s.program, not s.regressed, s.key, s.metric))
    return out


def best_by_shape(rec: BenchRecord) -> list[BenchCase]:
    """The fastest tile kernel (a case with tiles) of each computation and shape, in record order."""
    best: dict[tuple[str, tuple[int, ...]], BenchCase] = {}
    for c in rec.cases:
        slot = (c.name, tuple(c.shape))
        if c.tiles is not None and (slot not in best or c.median_ms < best[slot].median_ms):
            best[slot] = c
    return list(best.values())


def status_line(rec: BenchRecord, case: BenchCase) -> str:
    """``softmax 2097152x128: persistent 64x128+occ2+stg 0.6100 ms, bytes-bound: 84.1% of the device
    copy (4202 GB/s), 760% of CuPy`` (then head to head, the clock and power it ran at and the second
    look, when there are)."""
    parts = [f"{case.name} {'x'.join(map(str, case.shape))}: {case_label(case.key)} {case.median_ms:.4f} ms"]
    parts.append(case.roofline.text() if case.roofline else "no roofline (bench_version 1)")
    if case.pct_of_reference is not None:
        ref = next((c for c in rec.cases if c.name == case.name and c.shape == case.shape and c.tiles is None), None)
        parts.append(f"{case.pct_of_reference:.1f}% of {_ref_name(ref.key) if ref else 'the reference'}")
    pair = rec.head_to_head.get(case.key)
    if pair is not None:
        parts.append(f"head to head {pair.pct_of_reference:.1f}% [{pair.q1:.1f}, {pair.q3:.1f}]")
    if case.load is not None:
        parts.append(case.load.text())
    line = ", ".join(parts)
    return line + (f"; ⚑ {case.second_look.text()}" if case.second_look else "")


def status_lines(records: Iterable) -> list[str]:
    """For ``tileproof status``: per bench program, its newest counted record (``trust``: a broken
    seal or a bad signature never counts), then one line per computation and shape (its fastest
    tile kernel: ``status_line``)."""
    counted, _refused = trust.split(trust.examined(records))
    newest: dict[str, BenchRecord] = {}
    for rec in counted:
        if isinstance(rec, BenchRecord) and (rec.program not in newest
                                             or (rec.created, rec.run_id) > (newest[rec.program].created,
                                                                             newest[rec.program].run_id)):
            newest[rec.program] = rec
    out = []
    for program in sorted(newest):
        rec = newest[program]
        out.append(f"{program}: {rec.run_id} ({_gpu(rec)}, {rec.created.strftime('%Y-%m-%d %H:%M UTC')}, "
                   f"verdict {rec.verdict})")
        out += [f"  {status_line(rec, c)}" for c in best_by_shape(rec)]
    return out
