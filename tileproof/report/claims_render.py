"""The claims section of both reports: document x claim x verdict per toolchain release.

Reads only ``report.claims_view``. A refuted claim its document still asserts
stands out (listed first in a red box in HTML, bold in Markdown); each cell links
the probe transcript to open first and names the claims record.
"""

from __future__ import annotations

from tileproof.judge.audit.result import AuditResult
from tileproof.report.claims_view import ClaimCell, ClaimRow, ClaimsView, claims_view
from tileproof.report.markup import a, badge, e, md, mdlink
from tileproof.report.page import Context, Links
from tileproof.report.shorten import plural

EMPTY = "No claims files and no claims records."


def view_of(result: AuditResult) -> ClaimsView:
    return claims_view(result.records, result.claims_files, result.bad_records)


def view(ctx: Context) -> ClaimsView:
    return view_of(ctx.result)


def _record(run_id: str) -> str:
    return f"runs/{run_id}.json"


def _asserted(row: ClaimRow) -> str:
    return {True: "yes", False: "no", None: "no longer listed"}[row.asserted]


# --- Markdown ------------------------------------------------------------------------


def _md_cell(cell: ClaimCell | None, links: Links) -> str:
    if cell is None:
        return "-"
    word = f"**{cell.verdict.upper()}**" if cell.verdict == "refuted" else cell.verdict
    ev = f" {mdlink('transcript', links.file(cell.evidence))}" if cell.evidence else ""
    return f"{word}: {md(cell.why)}{ev} ({mdlink(cell.run_id[-8:], links.file(_record(cell.run_id)))})"


def markdown(v: ClaimsView, links: Links) -> list[str]:
    out: list[str] = []
    if not v.rows:
        return [EMPTY, ""]
    out.append(f"{plural(len(v.rows), 'claim')} over {plural(len(v.releases), 'toolchain release')} "
               f"({', '.join(v.releases) or 'none'}); {len(v.standing_out)} refuted and still asserted.")
    out.append("")
    out += [f"- {md(n)}" for n in v.notes] + ([""] if v.notes else [])
    out += ["| Document | Claim | Asserted | " + " | ".join(v.releases) + " | Holds |",
            "|---|---|---|" + "---|" * len(v.releases) + "---|"]
    for row in v.rows:
        name = f"**{md(row.claim_id)} (refuted, still asserted)**" if row.stands_out else md(row.claim_id)
        cells = " | ".join(_md_cell(c, links) for c in row.cells)
        out.append(f"| {md(row.document)} | {name}: {md(row.statement)} | {_asserted(row)} | {cells} "
                   f"| {md(row.holds)} |")
    return out + [""]


# --- HTML ----------------------------------------------------------------------------


def _html_cell(cell: ClaimCell | None, links: Links) -> str:
    if cell is None:
        return '<td class="muted">-</td>'
    ev = f" &middot; {a('transcript', links.file(cell.evidence))}" if cell.evidence else ""
    rec = a(cell.run_id[-8:], links.file(_record(cell.run_id)))
    return f'<td>{badge(cell.verdict)}<br><span class="why">{e(cell.why)}</span><br>' \
           f'<span class="muted">record {rec}{ev}</span></td>'


def html(v: ClaimsView, links: Links) -> list[str]:
    out: list[str] = []
    if not v.rows:
        return [f"<p>{EMPTY}</p>"]
    out.append(f"<p>{plural(len(v.rows), 'claim')} over {plural(len(v.releases), 'toolchain release')} "
               f"({e(', '.join(v.releases) or 'none')}): each cell is the newest decisive result of that "
               "release's claims records, with the probe transcript to open first.</p>")
    if v.standing_out:
        items = "".join(f"<li><b>{e(r.document)}</b> / <b>{e(r.claim_id)}</b>: {e(r.statement)} "
                        f"(<a href=\"#claim-{e(r.document)}-{e(r.claim_id)}\">row</a>)</li>" for r in v.standing_out)
        out.append(f'<div class="banner bad">{plural(len(v.standing_out), "refuted claim")} that '
                   f"{'its document still asserts' if len(v.standing_out) == 1 else 'their documents still assert'}"
                   f":<ul>{items}</ul></div>")
    else:
        out.append('<p class="muted">No refuted claim is still asserted.</p>')
    out += [f'<p class="muted">{e(n)}</p>' for n in v.notes]
    out.append("<table class=\"claims\"><tr><th>Document</th><th>Claim</th><th>Asserted today</th>"
               + "".join(f"<th>CUDA {e(r)}</th>" for r in v.releases) + "<th>Holds</th></tr>")
    for row in v.rows:
        cls = ' class="standout"' if row.stands_out else ""
        out.append(f'<tr id="claim-{e(row.document)}-{e(row.claim_id)}"{cls}><td>{e(row.document)}</td>'
                   f'<td><b class="mono">{e(row.claim_id)}</b><br>{e(row.statement)}'
                   f'<br><span class="muted">{e(row.source)}</span></td><td>{_asserted(row)}</td>'
                   + "".join(_html_cell(c, links) for c in row.cells)
                   + f"<td>{e(row.holds)}</td></tr>")
    return out + ["</table>"]
