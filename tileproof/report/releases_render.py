"""The release-axis section of both reports: each lesson's Python programs x cuda-tile releases.

Reads only ``LessonAudit.releases`` (``judge.release_matrix``): a cell says passed, failed with the
exception's first line (or the failed check), stale or not run, and links the record that decided
it; under each lesson its range in words. Rows rest on the lock's release only; this section is
information a student can act on.
"""

from __future__ import annotations

from tileproof.judge.release_matrix import Cell, LessonReleases
from tileproof.judge.releases import OUTSIDE_MARK
from tileproof.report.markup import a, badge, e, md, mdlink
from tileproof.report.page import Context, Links

TITLE = "cuda-tile releases"
NOTE = (f"Each lesson's Python programs with every cuda-tile release their run records were made with "
        f"({OUTSIDE_MARK}: with a tileiras outside the range that release declares). A lesson's rows and its "
        f"publishing rest on the lock's release only.")


def view(ctx: Context) -> list[LessonReleases] | None:
    """Each lesson with a release axis to show; None when none has one (the section is left out)."""
    return [lesson.releases for lesson in ctx.result.lessons if lesson.releases and lesson.releases.releases
            and lesson.releases.rows] or None


def _record(run_id: str) -> str:
    return f"runs/{run_id}.json"


def _md_cell(cell: Cell | None, links: Links) -> str:
    if cell is None:
        return "-"
    rec = cell.record
    run = f" ({mdlink(rec.run_id[-8:], links.file(_record(rec.run_id)))})" if rec is not None else ""
    return f"{md(cell.text())}{run}"


def markdown(shown: list[LessonReleases], links: Links) -> list[str]:
    out = [NOTE, ""]
    for lr in shown:
        out += [f"### {md(lr.lesson)}", "", md(lr.holds()), "",
                "| Program | " + " | ".join(md(k) for k in lr.releases) + " |",
                "|---|" + "---|" * len(lr.releases)]
        out += [f"| `{md(row.program)}` | " + " | ".join(_md_cell(row.cells.get(k), links)
                                                        for k in lr.releases) + " |" for row in lr.rows]
        out.append("")
    return out


def _html_cell(cell: Cell | None, links: Links) -> str:
    if cell is None:
        return '<td class="muted">-</td>'
    rec = cell.record
    run = f'<br><span class="muted">record {a(rec.run_id[-8:], links.file(_record(rec.run_id)))}' \
          "</span>" if rec is not None else ""
    why = f'<br><span class="why">{e(cell.text().removeprefix("failed: "))}</span>' if cell.state == "failed" else ""
    return f"<td>{badge(cell.state)}{why}{run}</td>"


def html(shown: list[LessonReleases], links: Links) -> list[str]:
    out = [f'<p class="muted">{e(NOTE)}</p>']
    for lr in shown:
        out += [f"<h3>{e(lr.lesson)}</h3>", f"<p>{e(lr.holds())}</p>",
                "<table><tr><th>Program</th>" + "".join(f"<th>{e(k)}</th>" for k in lr.releases) + "</tr>"]
        out += [f'<tr><td class="mono">{e(row.program)}</td>'
                + "".join(_html_cell(row.cells.get(k), links) for k in lr.releases) + "</tr>"
                for row in lr.rows]
        out.append("</table>")
    return out
