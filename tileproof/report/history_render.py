"""A series and its steps (``judge.history``) as text (``tileproof history``) and as the HTML report's section
"Steps in the bench history": per bench program and GPU class, the fastest tile kernel of each computation, variant
and shape across records, drawn with ``svg.history_chart`` (red when its newest step is a regression), each step
named with both levels and their bands. Pure: reads only the series (and the records given).
"""

from __future__ import annotations

from collections.abc import Iterable

from tileproof.judge import history
from tileproof.records.errors import one_line
from tileproof.records.models import BenchRecord
from tileproof.report import svg
from tileproof.report.bench_view import HistoryPoint, HistorySeries
from tileproof.report.markup import e
from tileproof.report.page import Context, Links

METHOD = ("steps by binary segmentation, kept where the two levels differ beyond noise (judge/noise.py: the "
          "change at least both levels' bands together)")
WORDS = {"improvement": "improvement", "regression": "REGRESSION", "within-noise": "within noise"}


def _value(s: history.Series, v: float, band: float | None = None) -> str:
    digits = 1 if s.metric != "max_abs_err" else None
    text = f"{v:.{digits}f}" if digits is not None else f"{v:.2g}"
    if band is not None:
        text += f" ± {band:.{digits}f}" if digits is not None else f" ± {band:.2g}"
    return f"{text}{'%' if s.unit.startswith('%') else ''}"


def step_text(s: history.Series, step: history.Step) -> str:
    at = s.points[step.index]
    return (f"step at {at.run_id} ({at.when}): {_value(s, step.before.value, step.before.band)} -> "
            f"{_value(s, step.after.value, step.after.band)} ({step.change:+.1%}), {WORDS[step.judged]}")


def text(series: list[history.Series]) -> list[str]:
    """Each series: a header, one line per record (its level and, for a ``/*`` series, which case), its steps."""
    out: list[str] = []
    for s in series:
        what = "max abs error" if s.metric == "max_abs_err" else s.unit
        out += [f"{s.program} {s.key}: {what} over {len(s.points)} record(s), {len(s.steps)} step(s)"]
        for i, p in enumerate(s.points):
            case = f"  {p.case}" if s.key.split(" on ")[0].endswith("/*") else ""
            out.append(f"  {p.run_id}  {p.when}  {_value(s, p.value, p.band)}  level {s.level(i) + 1}{case}")
        out += [f"  {step_text(s, step)}" for step in s.steps]
        out.append("")
    out.append(f"({METHOD})")
    return [one_line(x) for x in out]


def spark(s: history.Series) -> str:
    """The series drawn by the report's history chart helper (``svg.history_chart``)."""
    points = tuple(HistoryPoint(p.run_id, p.when, p.value, _value(s, p.value, p.band)) for p in s.points)
    regressed = bool(s.steps) and s.steps[-1].judged == "regression"
    change = step_text(s, s.steps[-1]) if s.steps else "no step"
    return svg.history_chart(HistorySeries(s.program, s.key, s.unit, points, regressed, change), width=260, height=60)


def fastest_series(records: Iterable) -> list[history.Series]:
    """The fastest-of-shape series (``name/variant/shape/*``) of every bench program, every GPU class."""
    records = list(records)
    programs = sorted({r.program for r in records if isinstance(r, BenchRecord)})
    return [s for p in programs for s in history.bench_series(records, p)
            if s.key.split(" on ")[0].endswith("/*") and len(s.points) > 1]


def view(ctx: Context) -> list[history.Series] | None:
    """The section's view: the fastest-of-shape series of the audit's own records (those it did not refuse)."""
    result = ctx.result
    return fastest_series(r for r in result.records if r.run_id not in result.bad_records)


def _intro() -> str:
    return (f"The fastest tile kernel of each computation, variant and shape, record by record in commit order, as % "
            f"of the measured ceiling (the rate where a record has none); {METHOD}. "
            f"`tileproof history PROGRAM[:CASE] --gpu CLASS` prints any case's series.")


def markdown(series: list[history.Series], links: Links) -> list[str]:
    """The section in Markdown: the same series, levels and steps as text."""
    if not series:
        return [_intro(), "", "No case was measured in more than one bench record yet."]
    return [_intro(), "", "```text", *text(series), "```"]


def html(series: list[history.Series], links: Links) -> list[str]:
    """The section in HTML: one table row per series, its chart, its levels and its steps."""
    out = [f'<p class="muted">{e(_intro())}</p>']
    if not series:
        return out + ["<p>No case was measured in more than one bench record yet.</p>"]
    out.append('<table class="history steps"><tr><th>Series</th><th>Over records</th><th>Levels and steps</th></tr>')
    for s in series:
        steps = "<br>".join(e(step_text(s, step)) for step in s.steps) or "no step: one level"
        last = s.points[-1]
        out.append(f'<tr><td class="mono">{e(s.program)}<br>{e(s.key)}</td><td>{spark(s)}</td>'
                   f'<td>{steps}<br><span class="muted">newest: {e(last.run_id)} {e(last.case)} '
                   f"{e(_value(s, last.value, last.band))}</span></td></tr>")
    return out + ["</table>"]
