"""The findings, notices, trust-root and rules sections of both reports.

Findings come grouped under their root cause (``report.causes``): a cause leads, in a box of its own, and
what follows from it sits folded under it with its count per rule; the findings no cause explains follow
in one table. Notices (what rests on a committer's word) are listed apart unless ``--strict`` made them
findings. The trust section is the trust report's own lines (``judge.trust.trust_root.TrustReport``); the rules
section lists every rule id with what it catches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tileproof.judge.audit.result import AuditResult
from tileproof.judge.audit.rules import load as load_rules
from tileproof.records.findings import Finding
from tileproof.report.causes import CauseGroup, FindingsView
from tileproof.report.markup import a, e, md
from tileproof.report.page import Context, Links
from tileproof.report.shorten import plural

RULES = load_rules()
NOTICES_HEAD = ("What rests on a committer's word: no finding, each one a finding under --strict (the reviewer's "
                "mode).")
NOT_A_FILE = frozenset({"HEAD"})
"""What a finding may name that is no file to link."""


def findings_view(ctx: Context) -> FindingsView:
    return ctx.causes


def notices(result: AuditResult) -> list[Finding]:
    """The notices the reports list apart (under ``--strict`` they are among the findings)."""
    return [] if result.strict else result.notices


def notices_view(ctx: Context) -> list[Finding] | None:
    return notices(ctx.result) or None


def trust_view(ctx: Context) -> list[str]:
    """The trust root the registry's history was checked from, the range and every change in it."""
    trust = ctx.result.trust
    return trust.lines() if trust is not None else ["not checked (no trust report)"]


def rules_view(_ctx: Context) -> dict[str, str]:
    return dict(RULES)


@dataclass(frozen=True)
class _Followers:
    """How the reports say what follows from a cause."""

    group: CauseGroup

    def line(self) -> str:
        n = len(self.group.consequences)
        return (f"{plural(n, 'finding')} follow{'s' * (n == 1)} from it ({self.group.counts()}): fix it, and audit "
                f"again" if n else "nothing else follows from it")


# --- Markdown ------------------------------------------------------------------------


def _md_table(found: Sequence[Finding]) -> list[str]:
    return ["| File | Rule | Reason |", "|---|---|---|"] + [
        f"| `{md(f.file)}` | {f.rule} | {md(f.reason)}{_md_fix(f)} |" for f in found]


def _md_fix(f: Finding) -> str:
    return f" (fix: `{md(f.fix)}`)" if f.fix else ""


def findings_markdown(v: FindingsView, _links: Links) -> list[str]:
    if not v.total:
        return ["None.", ""]
    out: list[str] = []
    for g in v.groups:
        out += [f"**Root cause**: `{md(g.cause.file)}` {g.cause.rule}: {md(g.cause.reason)}"
                f"{_md_fix(g.cause)}", "", md(_Followers(g).line()) + ".", ""]
        if g.consequences:
            out += [f"<details><summary>The {plural(len(g.consequences), 'finding')} that follow from it</summary>",
                    "", *_md_table(g.consequences), "", "</details>", ""]
    if v.standalone:
        out += (["Other findings:", ""] if v.groups else []) + _md_table(v.standalone) + [""]
    return out


def notices_markdown(found: list[Finding], _links: Links) -> list[str]:
    return [NOTICES_HEAD, "", *_md_table(found), ""]


def trust_markdown(lines: list[str], _links: Links) -> list[str]:
    return [f"- {md(line)}" for line in lines] + [""]


def rules_markdown(rules: dict[str, str], _links: Links) -> list[str]:
    return ["| Rule | Catches |", "|---|---|"] + [f"| {rule} | {md(text)} |" for rule, text in rules.items()] + [""]


# --- HTML ----------------------------------------------------------------------------


def _html_file(file: str, links: Links) -> str:
    return e(file) if file in NOT_A_FILE else a(file, links.file(file))


def _html_table(found: Sequence[Finding], links: Links) -> str:
    rows = "".join(f'<tr><td class="mono">{_html_file(f.file, links)}</td>'
                   f'<td class="mono" title="{e(RULES.get(f.rule, ""))}">{e(f.rule)}</td>'
                   f"<td>{e(f.reason)}"
                   + (f'<br><span class="muted">fix: <code>{e(f.fix)}</code></span>' if f.fix else "")
                   + "</td></tr>" for f in found)
    return f"<table><tr><th>File</th><th>Rule</th><th>Reason</th></tr>{rows}</table>"


def _html_cause(g: CauseGroup, links: Links) -> list[str]:
    out = [f'<div class="banner bad cause">Root cause: <span class="mono">{_html_file(g.cause.file, links)}</span> '
           f'<span class="mono">{e(g.cause.rule)}</span><br><span class="why">{e(g.cause.reason)}</span>'
           f"<br>{e(_Followers(g).line())}.</div>"]
    if g.consequences:
        out += [f"<details><summary>The {plural(len(g.consequences), 'finding')} that follow from it</summary>",
                _html_table(g.consequences, links), "</details>"]
    return out


def findings_html(v: FindingsView, links: Links) -> list[str]:
    if not v.total:
        return ["<p>None.</p>"]
    out = [line for g in v.groups for line in _html_cause(g, links)]
    if v.standalone:
        out += (["<p>Other findings:</p>"] if v.groups else []) + [_html_table(v.standalone, links)]
    return out


def notices_html(found: list[Finding], links: Links) -> list[str]:
    return [f"<p>{e(NOTICES_HEAD)}</p>", _html_table(found, links)]


def trust_html(lines: list[str], _links: Links) -> list[str]:
    return ["<ul>" + "".join(f"<li>{e(line)}</li>" for line in lines) + "</ul>"]


def rules_html(rules: dict[str, str], _links: Links) -> list[str]:
    return ["<table><tr><th>Rule</th><th>Catches</th></tr>"
            + "".join(f'<tr><td class="mono">{e(rule)}</td><td>{e(text)}</td></tr>' for rule, text in rules.items())
            + "</table>"]
