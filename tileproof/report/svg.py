"""Charts as inline SVG, written by hand: horizontal bars with whiskers, and small dot-line charts.

Each function takes a chart's typed view (``report.bench_view``) and returns one
``<svg>`` element as text: no script, no external font or stylesheet, every label
escaped, a ``<title>`` and an ``aria-label`` for screen readers, and a legend drawn
in the SVG itself, so the chart reads the same with JavaScript off, printed, or
opened from a CI artifact. Colours are fixed per bar kind (a case, its library
reference, the reference against itself); a vertical line marks a reference value
(100% of cuBLAS, the device copy's bandwidth, the GPU's ceiling).
"""

from __future__ import annotations

import html
import math

from tileproof.report.bench_view import BarChart, BarKind, HistorySeries

COLOURS: dict[BarKind, str] = {"case": "#4a78c2", "reference": "#8c959f", "control": "#d4a72c"}
LEGEND: dict[BarKind, str] = {"case": "course kernel", "reference": "library reference",
                              "control": "reference vs itself (control)"}
FONT = 'font-family="system-ui,sans-serif"'
ROW = 16
LABEL_W = 300
PLOT_W = 420
VALUE_W = 150
SPARK_RANGE = 0.10
"""A history chart's vertical axis spans at least 10% of its values' mean either side."""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ticks(top: float) -> list[float]:
    """About five round tick values from 0 to ``top``."""
    if top <= 0:
        return [0.0]
    raw = top / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(top // step) + 1)]


def _fmt(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 100 or x == int(x) else f"{x:.1f}"


def bar_chart(chart: BarChart) -> str:
    """Horizontal bars, one per row, with quartile (or min-max) whiskers and reference lines."""
    n = len(chart.bars)
    kinds = [k for k in COLOURS if any(b.kind == k for b in chart.bars)]
    top_pad, legend_h, axis_h = 8, 20, 34
    height = top_pad + n * ROW + axis_h + legend_h
    width = LABEL_W + PLOT_W + VALUE_W
    highest = max([b.high if b.high is not None else b.value for b in chart.bars]
                  + [line.value for line in chart.lines] + [1.0])
    top = highest * 1.05
    ticks = _ticks(top)
    top = max(top, ticks[-1])

    def x(v: float) -> float:
        return LABEL_W + PLOT_W * max(v, 0.0) / top

    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" aria-label="{_e(chart.title)}" {FONT} font-size="11">'),
           f"<title>{_e(chart.title)}</title>"]
    plot_bottom = top_pad + n * ROW
    for t in ticks:
        out.append(f'<line x1="{x(t):.1f}" y1="{top_pad}" x2="{x(t):.1f}" y2="{plot_bottom}" stroke="#eaeef2"/>')
        out.append(f'<text x="{x(t):.1f}" y="{plot_bottom + 12}" text-anchor="middle" fill="#57606a">{_fmt(t)}</text>')
    out.append(f'<text x="{LABEL_W + PLOT_W / 2:.0f}" y="{plot_bottom + 26}" text-anchor="middle" '
               f'fill="#1b1f24">{_e(chart.axis)}</text>')
    for i, b in enumerate(chart.bars):
        y = top_pad + i * ROW
        colour = COLOURS[b.kind]
        out.append(f'<text x="{LABEL_W - 6}" y="{y + 12}" text-anchor="end" fill="#1b1f24">{_e(b.label)}</text>')
        out.append(f'<rect x="{LABEL_W}" y="{y + 3}" width="{x(b.value) - LABEL_W:.1f}" height="{ROW - 6}" '
                   f'fill="{colour}"><title>{_e(b.label)}: {_e(b.value_text)}</title></rect>')
        if b.low is not None and b.high is not None:
            mid = y + ROW / 2
            out.append(f'<line x1="{x(b.low):.1f}" y1="{mid}" x2="{x(b.high):.1f}" y2="{mid}" stroke="#1b1f24"/>')
            for end in (b.low, b.high):
                out.append(f'<line x1="{x(end):.1f}" y1="{mid - 4}" x2="{x(end):.1f}" y2="{mid + 4}" '
                           f'stroke="#1b1f24"/>')
        out.append(f'<text x="{LABEL_W + PLOT_W + 6}" y="{y + 12}" fill="#1b1f24">{_e(b.value_text)}</text>')
    for line in chart.lines:
        out.append(f'<line x1="{x(line.value):.1f}" y1="{top_pad - 4}" x2="{x(line.value):.1f}" y2="{plot_bottom}" '
                   f'stroke="#cf222e" stroke-dasharray="4 3"><title>{_e(line.label)}</title></line>')
    ly = plot_bottom + axis_h + 6
    lx = float(LABEL_W)
    for k in kinds:
        out.append(f'<rect x="{lx:.0f}" y="{ly}" width="10" height="10" fill="{COLOURS[k]}"/>')
        out.append(f'<text x="{lx + 14:.0f}" y="{ly + 9}" fill="#1b1f24">{_e(LEGEND[k])}</text>')
        lx += 24 + 6.2 * len(LEGEND[k])
    for line in chart.lines:
        out.append(f'<line x1="{lx:.0f}" y1="{ly + 5}" x2="{lx + 14:.0f}" y2="{ly + 5}" stroke="#cf222e" '
                   f'stroke-dasharray="4 3"/>')
        out.append(f'<text x="{lx + 18:.0f}" y="{ly + 9}" fill="#1b1f24">{_e(line.label)}</text>')
        lx += 28 + 6.2 * len(line.label)
    if chart.whiskers:
        out.append(f'<text x="8" y="{ly + 9}" fill="#57606a">whiskers: {_e(chart.whiskers)}</text>')
    out.append("</svg>")
    return "".join(out)


def history_chart(series: HistorySeries, width: int = 180, height: int = 44) -> str:
    """One case's value over bench records: dots joined by a line, the newest dot marked."""
    pad_x, pad_y = 6, 6
    values = [p.value for p in series.points]
    lo, hi = min(values), max(values)
    # At least +-SPARK_RANGE of the mean on the axis: repeat noise of 1% stays flat, a 5% regression shows.
    mid = (lo + hi) / 2
    half = max((hi - lo) / 2 * 1.15, abs(mid) * SPARK_RANGE, 1e-9)
    lo, hi = mid - half, mid + half
    n = len(values)

    def xy(i: int, v: float) -> tuple[float, float]:
        px = pad_x + (width - 2 * pad_x) * (i / (n - 1) if n > 1 else 0.5)
        py = height - pad_y - (height - 2 * pad_y) * (v - lo) / (hi - lo)
        return px, py

    pts = [xy(i, v) for i, v in enumerate(values)]
    colour = "#cf222e" if series.regressed else "#4a78c2"
    label = f"{series.key}: {series.metric} over {n} bench records"
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" class="spark" role="img" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" aria-label="{_e(label)}" {FONT} font-size="9">'),
           f"<title>{_e(label)}</title>",
           f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" fill="none" stroke="#eaeef2"/>']
    if n > 1:
        out.append('<polyline fill="none" stroke="' + colour + '" stroke-width="1.5" points="'
                   + " ".join(f"{px:.1f},{py:.1f}" for px, py in pts) + '"/>')
    for (px, py), p in zip(pts, series.points, strict=True):
        out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.6" fill="{colour}">'
                   f"<title>{_e(p.run_id)}: {_e(p.value_text)}</title></circle>")
    out.append("</svg>")
    return "".join(out)
