"""The run grid (lessons x programs x GPUs) and the environments: both reports, from ``report.grid_view``.

Each cell is the newest run of a program on a GPU, its verdict, (+n) older runs, a mark when the audit found
something against it, and links to its record and transcripts; each environment lists what the run's
machine was (GPU, driver, toolchain, shortened paths) and links its transcripts.
"""

from __future__ import annotations

from tileproof.report.grid_view import Cell, Row, View, env_summary, env_transcripts, gpu_label, run_links, run_reason
from tileproof.report.grid_view import view as grid_view
from tileproof.report.markup import a, badge, e, md, mdlink
from tileproof.report.page import Context, Links
from tileproof.report.shorten import plural

GRID_TITLE = "Lessons × programs × GPUs"
GRID_NOTE = "Newest run of each program on each GPU; (+n) counts older runs."
OLDER = "no table cell's newest run came from them."


def view(ctx: Context) -> View:
    return grid_view(ctx.result)


def _totals(v: View) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(v.counts.items())) or "none"


# --- Markdown ------------------------------------------------------------------------


def _md_cell(cell: Cell | None, v: View, links: Links) -> str:
    if cell is None:
        return "-"
    rec = cell.newest
    flag = " ⚠" if rec.run_id in v.flagged else ""
    more = f" (+{cell.runs - 1})" if cell.runs > 1 else ""
    hrefs = " ".join(mdlink(label, links.file(p)) for label, p in run_links(rec))
    return f"**{rec.verdict}**{flag}{more}: {md(run_reason(rec))} {hrefs}"


def grid_markdown(v: View, links: Links) -> list[str]:
    out = [f"{GRID_NOTE} Verdicts over all runs: {_totals(v)}.", ""]
    if not v.rows:
        return out + ["No run records.", ""]
    out.append("| Lesson | Program | Compile | " + " | ".join(md(gpu_label(g)) for g in v.gpus) + " |")
    out.append("|---|---|---|" + "---|" * len(v.gpus))
    for row in v.rows:
        cells = " | ".join(_md_cell(row.cells.get(g), v, links) for g in v.gpus)
        out.append(f"| {md(row.lesson)} | `{md(row.program)}` | {md(row.compile)} | {cells} |")
    return out + [""]


def environments_markdown(v: View, links: Links) -> list[str]:
    out: list[str] = []
    for env in v.environments:
        out += [f"### Session {md(env.session_id)}", ""]
        out += [f"- {k}: {md(val)}" for k, val in env_summary(env).items()]
        out.append("- transcripts: " + ", ".join(mdlink(label, links.file(p)) for label, p in env_transcripts(env)))
        out.append("")
    if v.other_sessions:
        out += [f"{plural(v.other_sessions, 'older session')} not shown: {OLDER}", ""]
    return out or ["No run sessions.", ""]


# --- HTML ----------------------------------------------------------------------------


def _html_cell(cell: Cell | None, v: View, links: Links) -> str:
    if cell is None:
        return '<td class="muted">-</td>'
    rec = cell.newest
    flag = ' <span class="flag" title="this run has findings">&#9888;</span>' if rec.run_id in v.flagged else ""
    more = f' <span class="muted">(+{cell.runs - 1})</span>' if cell.runs > 1 else ""
    hrefs = " &middot; ".join(a(label, links.file(path)) for label, path in run_links(rec))
    session = rec.environment.session_id
    return (f"<td>{badge(rec.verdict)}{flag}{more}<br>"
            f'<span class="muted mono">{e(rec.run_id)}</span><br>{hrefs}<br>'
            f'<span class="muted">{e(run_reason(rec))} &middot; session '
            f'<a href="#{e(session)}">{e(session[-8:])}</a></span></td>')


def _html_row(row: Row, v: View, links: Links) -> str:
    return (f"<tr><td>{e(row.lesson)}</td><td class=\"mono\">{e(row.program)}</td>"
            f"<td class=\"muted\">{e(row.compile)}</td>"
            + "".join(_html_cell(row.cells.get(g), v, links) for g in v.gpus) + "</tr>")


def grid_html(v: View, links: Links) -> list[str]:
    out = [f'<p class="muted">{e(GRID_NOTE)} <span class="flag">&#9888;</span> marks a run with findings. '
           f"Verdicts over all runs: {e(_totals(v))}.</p>"]
    if not v.rows:
        return out + ["<p>No run records.</p>"]
    out.append("<table><tr><th>Lesson</th><th>Program</th><th>Compile</th>"
               + "".join(f"<th>{e(gpu_label(g))}</th>" for g in v.gpus) + "</tr>")
    out += [_html_row(row, v, links) for row in v.rows]
    return out + ["</table>"]


def environments_html(v: View, links: Links) -> list[str]:
    out = []
    for env in v.environments:
        out.append(f'<h3 id="{e(env.session_id)}">Session <span class="mono">{e(env.session_id)}</span></h3><dl>')
        out += [f"<dt>{e(k)}</dt><dd>{e(val)}</dd>" for k, val in env_summary(env).items()]
        hrefs = " &middot; ".join(a(label, links.file(path)) for label, path in env_transcripts(env))
        out.append(f"<dt>transcripts</dt><dd>{hrefs}</dd></dl>")
    if v.other_sessions:
        out.append(f'<p class="muted">{plural(v.other_sessions, "older session")} not shown: {e(OLDER)}</p>')
    return out or ["<p>No run sessions.</p>"]
