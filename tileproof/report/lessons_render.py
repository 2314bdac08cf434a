"""The lessons section of both reports: each lesson's state, what keeps it from publishing, and its rows.

Reads only ``report.lesson_view`` (the one publish decision's words): the lesson's heading links its file,
its status and decision, the blockers with their fixes, and a row per results row, performance claim and
refuted claim with the record that decided it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tileproof.judge.audit.result import LessonAudit
from tileproof.report.lesson_view import LessonRow, blocker_lines, lesson_rows, verdict_text
from tileproof.report.markup import a, badge, e, md, mdlink
from tileproof.report.page import Context, Links


@dataclass(frozen=True)
class LessonView:
    id: str
    file: str
    title: str
    status: str
    decision: str
    blockers: tuple[tuple[str, str, str | None], ...]
    rows: tuple[LessonRow, ...]


def view(ctx: Context) -> list[LessonView]:
    return [_lesson(lesson) for lesson in ctx.result.lessons]


def _lesson(lesson: LessonAudit) -> LessonView:
    return LessonView(lesson.id, lesson.file, lesson.title, lesson.status, verdict_text(lesson),
                      tuple(blocker_lines(lesson)), tuple(lesson_rows(lesson)))


def _record(run_id: str) -> str:
    return f"runs/{run_id}.json"


# --- Markdown ------------------------------------------------------------------------


def _md_lesson(v: LessonView, links: Links) -> list[str]:
    out = [f'### <a id="lesson-{md(v.id)}"></a>{md(v.id)}: {md(v.title)}', "",
           f"Status **{v.status}**; publish decision: {md(v.decision)}.", ""]
    if v.blockers:
        out += ["What keeps it from publishing:", ""]
        out += [f"- **{md(what)}**: {md(why)}" + (f" Fix: `{md(fix)}`" if fix else "") for what, why, fix in v.blockers]
        out.append("")
    out += ["| Program | Check | State | Run | Why / fix |", "|---|---|---|---|---|"]
    for r in v.rows:
        fix = f" (fix: `{md(r.command)}`)" if r.command else ""
        run = mdlink(r.run_id, links.file(_record(r.run_id))) if r.run_id else "-"
        out.append(f"| `{md(r.program)}` | {md(r.check)} | {r.outcome} | {run} | {md(r.why)}{fix} |")
    return out + [""]


def markdown(lessons: list[LessonView], links: Links) -> list[str]:
    if not lessons:
        return ["No lessons under lessons/.", ""]
    return [line for v in lessons for line in _md_lesson(v, links)]


# --- HTML ----------------------------------------------------------------------------


def _html_row(r: LessonRow, links: Links) -> str:
    run = a(r.run_id, links.file(_record(r.run_id))) if r.run_id else "-"
    fix = f'<br><span class="muted">fix: <code>{e(r.command)}</code></span>' if r.command else ""
    return (f'<tr><td class="mono">{e(r.program)}</td><td>{e(r.check)}</td><td>{badge(r.outcome)}</td>'
            f'<td class="mono">{run}</td><td>{e(r.why)}{fix}</td></tr>')


def _html_lesson(v: LessonView, links: Links) -> list[str]:
    out = [f'<h3 id="lesson-{e(v.id)}">{a(v.id, links.file(v.file))}: {e(v.title)}</h3>'
           f'<p>Status <span class="v v-{"passed" if v.status == "published" else "gated"}">{e(v.status)}</span>'
           f" &middot; gate: {e(v.decision)}</p>"]
    if v.blockers:
        items = "".join(f"<li><b>{e(what)}</b>: {e(why)}"
                        + (f'<br><span class="muted">fix: <code>{e(fix)}</code></span>' if fix else "") + "</li>"
                        for what, why, fix in v.blockers)
        out.append(f'<div class="blockers">What keeps it from publishing:<ul>{items}</ul></div>')
    out.append("<table><tr><th>Program</th><th>Check</th><th>State</th><th>Run</th><th>Why / fix</th></tr>")
    out += [_html_row(r, links) for r in v.rows]
    return out + ["</table>"]


def html(lessons: list[LessonView], links: Links) -> list[str]:
    if not lessons:
        return ["<p>No lessons under lessons/.</p>"]
    return [line for v in lessons for line in _html_lesson(v, links)]
