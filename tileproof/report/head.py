"""The top of both reports: what was audited, the verdict, one summary table and the table of contents.

``header`` says first which commit was audited, whether the working tree was dirty, when, against which
trust root and range, what the audit covered (``--since``) and where the page's file links point
(``report.page.Links``). ``summary`` is one table, a row per root cause, per lesson and for the findings
no lesson owns: its state and what to do next, all from the audit's decisions and findings (a lesson's
finding that follows from a root cause says to fix that first). ``headline`` is the one-line verdict.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tileproof.judge.audit.result import AuditResult, LessonAudit
from tileproof.records.findings import Finding
from tileproof.report.causes import FindingsView, grouped
from tileproof.report.findings_render import notices
from tileproof.report.markup import e, md
from tileproof.report.page import Audited, Context, Links
from tileproof.report.shorten import plural

NOTHING = "nothing"


def headline(result: AuditResult, view: FindingsView | None = None) -> str:
    """``PASSED: no findings in ...`` or ``FAILED: 130 findings: 1 root cause (...) and 129 ... (rules)``."""
    n = len(result.findings)
    view = view or grouped(result.findings, result.lessons)
    rules = Counter(f.rule for f in result.findings)
    what = ", ".join(f"{rule} {k}" for rule, k in sorted(rules.items()))
    lead = view.lead()
    verdict = (f"FAILED: {plural(n, 'finding')}" + (f": {lead}" if lead else "") + f" ({what})") if n \
        else "PASSED: no findings"
    return verdict + (f" in {plural(result.validated, 'record')}, {plural(result.evidence_files, 'evidence file')}, "
                      f"{plural(len(result.lessons), 'lesson')}; {result.history_line()}")


@dataclass(frozen=True)
class Header:
    headline: str
    failed: bool
    facts: tuple[tuple[str, str], ...]
    """(label, value) in the order a reviewer asks: commit, tree, when, trust root, range, scope, links."""


def _tree(audited: Audited | None) -> tuple[tuple[str, str], ...]:
    if audited is None:
        return (("audited commit", "not recorded (a page rendered without the tree's state)"),)
    at = ("audited at", audited.at.strftime("%Y-%m-%d %H:%M:%S UTC"))
    if audited.commit is None:
        return (("audited commit", "none: not a git checkout (no commit to compare the files with)"), at)
    tree = ("DIRTY: tracked files differed from the commit; the audit read the working tree as it was"
            if audited.dirty else "clean: tracked files were those of the commit")
    return (("audited commit", audited.commit), ("working tree", tree),
            at)


def header(ctx: Context) -> Header:
    result = ctx.result
    trust = result.trust
    facts = _tree(ctx.audited) + (
        ("trust root", trust.root if trust is not None else "not checked (no trust report)"),
        ("trust range", trust.range if trust is not None else "none"),
        ("scope", result.scope or "the whole tree"),
        ("links", ctx.links.describe(ctx.audited)),
    )
    return Header(headline(result, ctx.causes), bool(result.findings), facts)


def header_markdown(h: Header, _links: Links) -> list[str]:
    return ["# tileproof audit", "", f"**{md(h.headline)}**", ""] + [f"- {k}: {md(v)}" for k, v in h.facts] + [""]


def header_html(h: Header, _links: Links) -> list[str]:
    facts = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in h.facts)
    return ["<h1>tileproof audit</h1>", f'<div class="banner {"bad" if h.failed else "good"}">{e(h.headline)}</div>',
            f'<dl class="audited">{facts}</dl>']


# --- the summary ---------------------------------------------------------------------


@dataclass(frozen=True)
class SummaryRow:
    subject: str
    status: str
    state: str
    todo: str
    anchor: str
    """Where the page says more (an id of the page)."""
    command: str | None = None
    """The command to run, when there is one."""


def _lesson_row(lesson: LessonAudit, found: list[Finding], followed: set[int]) -> SummaryRow:
    blockers = lesson.decision.blockers
    first = next((b.command for b in blockers if b.command), None)
    anchor = f"lesson-{lesson.id}"
    if found:
        state = "audit fails: " + ", ".join(dict.fromkeys(f.rule for f in found))
        if all(id(f) in followed for f in found):
            return SummaryRow(lesson.id, lesson.status, state, "fix the root cause above: this follows from it",
                              "findings")
        return SummaryRow(lesson.id, lesson.status, state, "see Findings" + ("; next:" if first else ""),
                          "findings", first)
    if lesson.status == "published":
        return SummaryRow(lesson.id, lesson.status, "holds: its cited records still back it", NOTHING, anchor)
    if lesson.publishable:
        return SummaryRow(lesson.id, lesson.status, "ready to publish", "publish it:", anchor,
                          f"nox -s publish -- {lesson.id}")
    return SummaryRow(lesson.id, lesson.status, f"stays draft: {lesson.decision.lacking()}",
                      "next:" if first else "see Lessons", anchor, first)


def summary(ctx: Context) -> list[SummaryRow]:
    """One row per root cause, per lesson, for the findings no lesson owns and for the notices."""
    result = ctx.result
    view = ctx.causes
    followed = {id(f) for g in view.groups for f in g.consequences}
    rows = [SummaryRow(g.cause.file, "-", f"root cause: {g.cause.rule}",
                       f"fix this first: {plural(len(g.consequences), 'finding')} "
                       f"follow{'s' * (len(g.consequences) == 1)} from it", "findings")
            for g in view.groups]
    files = {lesson.file for lesson in result.lessons}
    rows += [_lesson_row(lesson, [f for f in result.findings if f.file == lesson.file], followed)
             for lesson in result.lessons]
    causes = {id(g.cause) for g in view.groups}
    rest = [f for f in result.findings if f.file not in files and id(f) not in followed | causes]
    if rest:
        rows.append(SummaryRow("(other files)", "-", f"{plural(len(rest), 'finding')}: "
                               + ", ".join(dict.fromkeys(f.rule for f in rest)), "see Findings", "findings"))
    notes = notices(result)
    if notes:
        rows.append(SummaryRow("(notices)", "-", f"{plural(len(notes), 'notice')}, findings under --strict",
                               "see Notices", "notices"))
    return rows


def summary_markdown(rows: list[SummaryRow], _links: Links) -> list[str]:
    if not rows:
        return ["No lessons and no findings.", ""]
    return (["| Lesson or file | Status | State | What to do |", "|---|---|---|---|"]
            + [f"| [{md(r.subject)}](#{r.anchor}) | {md(r.status)} | {md(r.state)} | {md(r.todo)}"
               + (f" `{md(r.command)}`" if r.command else "") + " |" for r in rows] + [""])


def summary_html(rows: list[SummaryRow], _links: Links) -> list[str]:
    if not rows:
        return ["<p>No lessons and no findings.</p>"]
    return ["<table class=\"summary\"><tr><th>Lesson or file</th><th>Status</th><th>State</th><th>What to do</th>"
            "</tr>" + "".join(f'<tr><td><a href="#{e(r.anchor)}">{e(r.subject)}</a></td><td>{e(r.status)}</td>'
                              f"<td>{e(r.state)}</td><td>{e(r.todo)}"
                              + (f" <code>{e(r.command)}</code>" if r.command else "") + "</td></tr>"
                              for r in rows) + "</table>"]


def toc_markdown(entries: list[tuple[str, str]]) -> list[str]:
    return ["Contents: " + " · ".join(f"[{md(title)}](#{anchor})" for anchor, title in entries), ""]


def toc_html(entries: list[tuple[str, str]]) -> list[str]:
    return ['<nav class="toc" id="contents"><b>Contents</b><ol>'
            + "".join(f'<li><a href="#{e(anchor)}">{e(title)}</a></li>' for anchor, title in entries)
            + "</ol></nav>"]
