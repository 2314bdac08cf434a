"""The bench section of both reports: charts, the lessons' performance claims, and the history.

HTML: each chart is inline SVG (``report.svg``); the newest bench record of each
program is open, older ones sit in a ``<details>`` (no script needed to open it).
Markdown: the same values as tables, older records folded the same way. Both read
only the view models of ``report.bench_view``.
"""

from __future__ import annotations

from tileproof.judge.audit.result import AuditResult
from tileproof.judge.perf_claims import ClaimDecision
from tileproof.report import svg
from tileproof.report.bench_view import (
    REGRESSION,
    BarChart,
    BenchView,
    HistorySeries,
    bench_views,
    history,
)
from tileproof.report.markup import a, badge, e, md, mdlink
from tileproof.report.page import Context, Links

PerfRows = list[tuple[str, ClaimDecision]]
"""(lesson id, its decision) for every performance claim of every lesson."""


def perf_rows(result: AuditResult) -> PerfRows:
    """(lesson id, ClaimDecision) for every performance claim of every lesson."""
    return [(lesson.id, c) for lesson in result.lessons for c in lesson.decision.perf]


def views(ctx: Context) -> list[BenchView]:
    return bench_views(ctx.result.records, ctx.result.bad_records)


def perf_view(ctx: Context) -> PerfRows:
    return perf_rows(ctx.result)


def history_view(ctx: Context) -> list[HistorySeries]:
    return history(ctx.result.records, ctx.result.bad_records)


def _record(run_id: str) -> str:
    return f"runs/{run_id}.json"


def _newest_flags(views: list[BenchView]) -> list[bool]:
    seen: set[str] = set()
    out = []
    for v in views:
        out.append(v.program not in seen)
        seen.add(v.program)
    return out


# --- Markdown ------------------------------------------------------------------------


def _md_chart(chart: BarChart) -> list[str]:
    head = f"**{md(chart.title)}**" + (f" (whiskers: {md(chart.whiskers)})" if chart.whiskers else "")
    lines = "; ".join(md(line.label) for line in chart.lines)
    out = [head + (f"; reference line: {lines}" if lines else ""), "",
           "| Case | Kind | Value | Whiskers |", "|---|---|---|---|"]
    out += [f"| {md(b.label)} | {b.kind} | {md(b.value_text)} | "
            + (f"{b.low:.1f} to {b.high:.1f}" if b.low is not None and b.high is not None else "-") + " |"
            for b in chart.bars]
    return out + [""]


def markdown(shown: list[BenchView], links: Links) -> list[str]:
    out: list[str] = []
    if not shown:
        out += ["No bench records.", ""]
    for v, newest in zip(shown, _newest_flags(shown), strict=True):
        files = ", ".join(mdlink(label, links.file(p)) for label, p in v.links)
        flag = "" if v.counted else " ⚠ the audit found something against this record: not counted"
        out += [f"### {md(v.program)}: {md(v.run_id)}{flag}", "",
                (f"{md(v.gpu)}, {md(v.created)}, verdict {v.verdict}. Ceilings: {md('; '.join(v.ceilings) or '-')}. "
                f"Files: {files}"), ""]
        out += [f"- {md(n)}" for n in v.notes] + ([""] if v.notes else [])
        charts = [*v.head_to_head, *v.sweeps]
        if not newest:
            out += ["<details><summary>Charts of this older record</summary>", ""]
        for chart in charts:
            out += _md_chart(chart)
        if not newest:
            out += ["</details>", ""]
    return out


def perf_markdown(rows: PerfRows, links: Links) -> list[str]:
    if not rows:
        return ["No lesson makes a performance claim (front matter `performance:`).", ""]
    out = ["| Lesson | Claim | Outcome | Value | Backed by | Why / fix |", "|---|---|---|---|---|---|"]
    for lesson, c in rows:
        run = mdlink(c.record.run_id, links.file(_record(c.record.run_id))) if c.record else "-"
        fix = f" (fix: `{md(c.command)}`)" if c.command else ""
        out.append(f"| {md(lesson)} | {md(c.claim.id)}: {md(c.claim.statement)} | {c.outcome} | "
                   f"{md(c.value_text())} | {run} | {md(c.reason)}{fix} |")
    return out + [""]


def history_markdown(series: list[HistorySeries], _links: Links) -> list[str]:
    if not series:
        return ["No case was measured in more than one bench record yet.", ""]
    regressed = [s for s in series if s.regressed]
    out = [(f"Each case across bench records, oldest first; a drop of more than {REGRESSION:.0%} from the "
            f"previous record is marked ▼ ({len(regressed)} now)."), "",
            "| Program | Case | Metric | Values (oldest → newest) | Change |", "|---|---|---|---|---|"]
    for s in series:
        values = " → ".join(p.value_text for p in s.points)
        mark = "▼ " if s.regressed else ""
        out.append(f"| `{md(s.program)}` | `{md(s.key)}` | {md(s.metric)} | {md(values)} | {mark}{md(s.change_text)} |")
    return out + [""]


# --- HTML ----------------------------------------------------------------------------


def _html_view(v: BenchView, links: Links, newest: bool) -> list[str]:
    files = " &middot; ".join(a(label, links.file(p)) for label, p in v.links)
    flag = "" if v.counted else ' <span class="flag">&#9888; the audit found something against it: not counted</span>'
    head = (f'<h3 id="bench-{e(v.run_id)}"><span class="mono">{e(v.program)}</span>: {e(v.run_id)}{flag}</h3>'
            f"<p>{e(v.gpu)}, {e(v.created)} &middot; verdict {badge(v.verdict)} &middot; ceilings: "
            f"{e('; '.join(v.ceilings) or '-')}<br>{files}</p>")
    out = [head] + [f'<p class="muted">{e(n)}</p>' for n in v.notes]
    charts = [f'<figure><figcaption>{e(c.title)}</figcaption>{svg.bar_chart(c)}</figure>'
              for c in (*v.head_to_head, *v.sweeps)]
    if newest:
        return out + charts
    return out + ["<details><summary>Charts of this older record</summary>", *charts, "</details>"]


def html(shown: list[BenchView], links: Links) -> list[str]:
    out = [('<p class="muted">Head to head: each course kernel and cuBLAS launched in turn, cycle by cycle; the bar is '
           "the median of the per-cycle rate as % of cuBLAS, the whiskers its quartiles, and the control is cuBLAS "
           "against a second copy of itself (how far from 100% the method alone puts a ratio). Tile sweep: every "
           "tile configuration's rate; the dashed line is the GPU's ceiling or the device copy's bandwidth.</p>")]
    if not shown:
        out.append("<p>No bench records.</p>")
    for v, newest in zip(shown, _newest_flags(shown), strict=True):
        out += _html_view(v, links, newest)
    return out


def perf_html(rows: PerfRows, links: Links) -> list[str]:
    if not rows:
        return ["<p>No lesson makes a performance claim (front matter <code>performance:</code>).</p>"]
    out = ["<table><tr><th>Lesson</th><th>Claim</th><th>Outcome</th><th>Value</th><th>Backed by</th>"
               "<th>Why / fix</th></tr>"]
    for lesson, c in rows:
        run = (a(c.record.run_id, links.file(_record(c.record.run_id)))
               + f' (<a href="#bench-{e(c.record.run_id)}">charts</a>)') if c.record else "-"
        fix = f'<br><span class="muted">fix: <code>{e(c.command)}</code></span>' if c.command else ""
        out.append(f"<tr><td>{e(lesson)}</td><td><b>{e(c.claim.id)}</b>: {e(c.claim.statement)}</td>"
                   f"<td>{badge(c.outcome)}</td><td>{e(c.value_text())}</td><td class=\"mono\">{run}</td>"
                   f"<td>{e(c.reason)}{fix}</td></tr>")
    return out + ["</table>"]


def _html_series(s: HistorySeries) -> str:
    mark = '<span class="flag">&#9660;</span> ' if s.regressed else ""
    values = " &rarr; ".join(e(p.value_text) for p in s.points)
    return (f'<tr{" class=regressed" if s.regressed else ""}><td class="mono">{e(s.key)}</td><td>{e(s.metric)}</td>'
            f"<td>{svg.history_chart(s)}</td><td class=\"muted\">{values}</td><td>{mark}{e(s.change_text)}</td></tr>")


def history_html(series: list[HistorySeries], _links: Links) -> list[str]:
    if not series:
        return ["<p>No case was measured in more than one bench record yet.</p>"]
    regressed = sum(1 for s in series if s.regressed)
    out = [f'<p class="muted">Each case across bench records, oldest first. A drop of more than '
               f"{REGRESSION:.0%} from the previous record is red and marked &#9660; ({regressed} now).</p>"]
    for program in dict.fromkeys(s.program for s in series):
        mine = [s for s in series if s.program == program]
        out.append(f'<h3 class="mono">{e(program)}</h3><table class="history"><tr><th>Case</th><th>Metric</th>'
                   "<th>Over time</th><th>Values (oldest &rarr; newest)</th><th>Change</th></tr>")
        out += [_html_series(s) for s in mine]
        out.append("</table>")
    return out
