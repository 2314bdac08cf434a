"""Rendering an ``AuditResult`` as ``evidence/AUDIT.md`` and one self-contained HTML page.

Both say the same things in the same order: findings first, then each lesson
with the gate's decision per row, then lessons × programs × GPUs with the
newest run's verdict and links to its transcripts, then the environment of
each run shown. Links are relative to the folder the report is written to, so
the page works from a checkout, a CI artifact or a browser's ``file://``.
The HTML has inline CSS, no script and nothing fetched; every value is escaped.
Nothing here reads a file: the audit already did.
"""

from __future__ import annotations

import html
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from tileproof.judge.audit.result import AuditResult
from tileproof.judge.audit.rules import load as load_rules
from tileproof.records.capability import cc_of, cc_tuple
from tileproof.records.models import CompileRecord, Environment, RunRecord

RULES = load_rules()

NO_LESSON = "(no lesson)"
NO_GPU = ("no GPU", "")
SHOWN_PACKAGES = ("cuda-tile", "cupy", "numpy", "python", "os", "kernel")


# --- the view: what both reports show ------------------------------------------------


@dataclass(frozen=True)
class Cell:
    newest: RunRecord
    runs: int
    """Runs of this program on this GPU, the newest included."""


@dataclass(frozen=True)
class Row:
    lesson: str
    program: str
    compile: str
    """Newest build verdict per target, e.g. ``sm_80 built, sm_90 built``."""
    cells: dict
    """GPU column key → Cell."""


@dataclass(frozen=True)
class View:
    gpus: list
    """Column keys (name, compute capability), largest capability first; no GPU last."""
    rows: list[Row]
    environments: list[Environment]
    other_sessions: int
    counts: Counter


@dataclass(frozen=True)
class LessonRow:
    """One line of a lesson's table: a results row, a performance claim or a refuted claim."""

    program: str
    check: str
    outcome: str
    run_id: str | None
    reason: str
    command: str | None


def lesson_rows(lesson) -> list[LessonRow]:
    """Every results row, performance claim and refuted claim of the lesson's publish decision."""
    d = lesson.decision
    out = [LessonRow(r.row.program, r.row.check + (" (optional)" if r.row.optional else ""), r.outcome,
                     r.record.run_id if r.record else None, r.reason, r.command) for r in d.rows]
    out += [LessonRow(c.claim.program, f"perf:{c.claim.id}", c.outcome, c.record.run_id if c.record else None,
                      c.reason, c.command) for c in d.perf]
    out += [LessonRow("-", f"claim:{c.claim_id}", "refuted", c.run_id, c.reason, c.command) for c in d.refuted]
    return out


def verdict_text(lesson) -> str:
    """``publishable``, or what it lacks (the decision's own words)."""
    return "publishable" if lesson.publishable else lesson.decision.lacking()


def gpu_key(rec: RunRecord) -> tuple[str, str]:
    gpu = rec.environment.gpu
    return (gpu.name, gpu.compute_capability) if gpu else NO_GPU


def _cc_order(key: tuple[str, str]):
    cc = cc_tuple(key[1])
    return (0, -cc[0], -cc[1], key[0]) if cc is not None else (1, 0, 0, key[0])


def view(result: AuditResult) -> View:
    cells: dict[tuple[str, tuple], Cell] = {}
    builds: dict[tuple[str, str], str] = {}
    counts: Counter = Counter()
    for rec in result.records:  # oldest first: later ones replace earlier ones
        if isinstance(rec, RunRecord):
            key = (rec.program, gpu_key(rec))
            old = cells.get(key)
            cells[key] = Cell(rec, (old.runs if old else 0) + 1)
            counts[rec.verdict] += 1
        elif isinstance(rec, CompileRecord):
            for b in rec.builds:
                builds[(b.program, b.target)] = b.verdict
    gpus = sorted({g for _, g in cells}, key=_cc_order)
    compiled: dict[str, list[str]] = {}
    for (program, target), verdict in sorted(builds.items(), key=lambda kv: (kv[0][0], _target_order(kv[0][1]))):
        compiled.setdefault(program, []).append(f"{target} {verdict}")
    programs_seen = {p for p, _ in cells} | set(compiled)
    rows, placed = [], set()
    for lesson in result.lessons:
        for program in lesson.programs:
            rows.append(_row(lesson.id, program, gpus, cells, compiled))
            placed.add(program)
    for program in sorted(programs_seen - placed):
        rows.append(_row(NO_LESSON, program, gpus, cells, compiled))
    shown: dict[str, Environment] = {}
    for row in rows:
        for cell in row.cells.values():
            env = cell.newest.environment
            shown.setdefault(env.session_id, env)
    sessions = {r.environment.session_id for r in result.records if isinstance(r, RunRecord)}
    envs = sorted(shown.values(), key=lambda e: e.session_id, reverse=True)
    return View(gpus, rows, envs, len(sessions - set(shown)), counts)


def _target_order(target: str):
    """sm_80 < sm_90 < sm_100: by compute capability, not by text (an unreadable target sorts first)."""
    try:
        return (cc_tuple(cc_of(target)) or (0, 0), target)
    except ValueError:
        return ((0, 0), target)


def _row(lesson, program, gpus, cells, compiled) -> Row:
    return Row(lesson, program, ", ".join(compiled.get(program, [])) or "-",
               {g: cells[(program, g)] for g in gpus if (program, g) in cells})


def gpu_label(key: tuple[str, str]) -> str:
    return key[0] if key == NO_GPU else f"{key[0]} (cc {key[1]})"


def link(result: AuditResult, base: Path, path: str) -> str:
    """``path`` (repo-relative) relative to the report's folder, POSIX separators."""
    return Path(os.path.relpath(Path(result.root) / path, base)).as_posix()


def headline(result: AuditResult) -> str:
    n = len(result.findings)
    rules = Counter(f.rule for f in result.findings)
    what = ", ".join(f"{rule} {k}" for rule, k in sorted(rules.items()))
    return (f"FAILED: {n} finding{'s' * (n != 1)} ({what})" if n else "PASSED: no findings") + (
        f" in {len(result.records)} records, {result.evidence_files} evidence files, {len(result.lessons)} lessons"
        f"; {result.history_line()}")


def _env_summary(env: Environment) -> dict[str, str]:
    gpu = env.gpu
    tc = env.toolchain
    tools = ", ".join(f"{t.name} {t.version or '?'}" for t in tc.tools)
    nvidia = ", ".join(f"{k} {v}" for k, v in sorted(tc.packages.items()))
    versions = ", ".join(f"{k} {env.versions[k]}" for k in SHOWN_PACKAGES if env.versions.get(k))
    return {
        "GPU": (f"{gpu.name}, cc {gpu.compute_capability} (runtime {gpu.runtime_compute_capability or '?'}), "
                f"{gpu.memory_total_mib or '?'} MiB, {gpu.uuid}") if gpu else "none",
        "driver": gpu.driver_version if gpu else "-",
        "toolchain": f"{tc.source} {tc.major_minor or 'mixed'} ({'coherent' if tc.coherent else 'NOT coherent'}, "
                     f"children's environment {env.toolchain_env}): {tools}",
        "toolchain packages": nvidia or "-",
        "versions": versions or "-",
        "packages": f"{len(env.packages)} installed (full list: pip freeze transcript)",
        "environment": ", ".join(f"{k}={v}" for k, v in sorted(env.env.items())) or "-",
    }


def _env_transcripts(env: Environment) -> list[tuple[str, str]]:
    out = [("pip freeze", env.pip_freeze.path)]
    if env.nvidia_smi:
        out.append(("nvidia-smi", env.nvidia_smi.path))
    if env.nvidia_smi_query:
        out.append(("nvidia-smi query", env.nvidia_smi_query.path))
    return out


def _run_links(rec: RunRecord) -> list[tuple[str, str]]:
    out = [("record", f"runs/{rec.run_id}.json"), ("stdout", rec.step.stdout.path), ("stderr", rec.step.stderr.path)]
    if rec.report_file:
        out.append(("report", rec.report_file.path))
    return out


# --- Markdown ------------------------------------------------------------------------


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def _mdlink(label: str, href: str) -> str:
    return f"[{_md(label)}]({quote(href)})"


def render_markdown(result: AuditResult, base: Path) -> str:
    v = view(result)
    out = ["# tileproof audit", "", f"**{_md(headline(result))}**", ""]
    out += ["## Findings", ""]
    if result.findings:
        out += ["| File | Rule | Reason |", "|---|---|---|"]
        out += [f"| `{_md(f.file)}` | {f.rule} | {_md(f.reason)} |" for f in result.findings]
    else:
        out.append("None.")
    out += ["", "## Lessons", ""]
    if not result.lessons:
        out.append("No lessons under lessons/.")
    for lesson in result.lessons:
        out += [f"### {_md(lesson.id)}: {_md(lesson.title)}", "",
                f"Status **{lesson.status}**; publish decision: {_md(verdict_text(lesson))}.", "",
                "| Program | Check | Outcome | Run | Reason / fix |", "|---|---|---|---|---|"]
        for r in lesson_rows(lesson):
            fix = f" (fix: `{_md(r.command)}`)" if r.command else ""
            run = _mdlink(r.run_id, link(result, base, f"runs/{r.run_id}.json")) if r.run_id else "-"
            out.append(f"| `{_md(r.program)}` | {_md(r.check)} | {r.outcome} | {run} | {_md(r.reason)}{fix} |")
        out.append("")
    out += ["## Lessons × programs × GPUs", "",
            "Newest run of each program on each GPU; (+n) counts older runs. Verdicts over all runs: "
            + (", ".join(f"{k} {n}" for k, n in sorted(v.counts.items())) or "none") + ".", ""]
    if v.rows:
        out.append("| Lesson | Program | Compile | " + " | ".join(_md(gpu_label(g)) for g in v.gpus) + " |")
        out.append("|---|---|---|" + "---|" * len(v.gpus))
        for row in v.rows:
            cells = []
            for g in v.gpus:
                cell = row.cells.get(g)
                if cell is None:
                    cells.append("-")
                    continue
                rec = cell.newest
                flag = " ⚠" if rec.run_id in result.bad_records else ""
                more = f" (+{cell.runs - 1})" if cell.runs > 1 else ""
                links = " ".join(_mdlink(label, link(result, base, p)) for label, p in _run_links(rec))
                cells.append(f"**{rec.verdict}**{flag}{more} {links}")
            out.append(f"| {_md(row.lesson)} | `{_md(row.program)}` | {_md(row.compile)} | " + " | ".join(cells) + " |")
    else:
        out.append("No run records.")
    out += ["", "## Environments", ""]
    for env in v.environments:
        out += [f"### Session {_md(env.session_id)}", ""]
        out += [f"- {k}: {_md(val)}" for k, val in _env_summary(env).items()]
        transcript_links = (_mdlink(label, link(result, base, p)) for label, p in _env_transcripts(env))
        out.append("- transcripts: " + ", ".join(transcript_links))
        out.append("")
    if v.other_sessions:
        out += [f"{v.other_sessions} older session(s) not shown: no table cell's newest run came from them.", ""]
    out += ["## Rules", "", "| Rule | Catches |", "|---|---|"]
    out += [f"| {rule} | {_md(text)} |" for rule, text in RULES.items()]
    return "\n".join(out) + "\n"


# --- HTML ----------------------------------------------------------------------------

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1f24;margin:24px;max-width:1400px}
h1{font-size:22px;margin:0 0 12px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.banner{padding:10px 14px;border-radius:6px;font-weight:600;margin-bottom:8px}
.bad{background:#ffebe9;border:1px solid #ff8182;color:#82071e}.good{background:#dafbe1;border:1px solid #4ac26b;color:#116329}
table{border-collapse:collapse;margin:6px 0 10px;width:100%}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.v{display:inline-block;padding:1px 7px;border-radius:10px;font-weight:600;font-size:12px}
.v-passed{background:#dafbe1;color:#116329}.v-failed,.v-error,.v-timeout{background:#ffebe9;color:#82071e}
.v-gated,.v-no-gpu{background:#fff8c5;color:#7d4e00}.v-other{background:#eaeef2;color:#424a53}
.flag{color:#cf222e;font-weight:700}.muted{color:#57606a;font-size:12px}
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:4px 0 12px}dt{font-weight:600}dd{margin:0}
"""  # noqa: E501 (a rule per line as the stylesheet is written; wrapping would change the report's bytes)


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _a(label: str, href: str) -> str:
    return f'<a href="{_e(quote(href))}">{_e(label)}</a>'


def _badge(verdict: str) -> str:
    known = {"passed", "failed", "error", "timeout", "gated", "no-gpu"}
    cls = verdict if verdict in known else "other"
    return f'<span class="v v-{cls}">{_e(verdict)}</span>'


OUTCOME_CLASS = {"passed": "passed", "gated": "gated", "no-record": "other"}


def render_html(result: AuditResult, base: Path) -> str:
    v = view(result)
    p: list[str] = ['<!DOCTYPE html>', '<html lang="en"><head><meta charset="utf-8">',
                    '<meta name="viewport" content="width=device-width, initial-scale=1">',
                    "<title>tileproof audit</title>", f"<style>{CSS}</style></head><body>",
                    "<h1>tileproof audit</h1>",
                    f'<div class="banner {"bad" if result.findings else "good"}">{_e(headline(result))}</div>']
    p.append("<h2 id=\"findings\">Findings</h2>")
    if result.findings:
        p.append("<table><tr><th>File</th><th>Rule</th><th>Reason</th></tr>")
        for f in result.findings:
            p.append(f'<tr><td class="mono">{_a(f.file, link(result, base, f.file))}</td>'
                     f'<td class="mono" title="{_e(RULES.get(f.rule, ""))}">{_e(f.rule)}</td>'
                     f'<td>{_e(f.reason)}</td></tr>')
        p.append("</table>")
    else:
        p.append("<p>None.</p>")

    p.append('<h2 id="lessons">Lessons</h2>')
    if not result.lessons:
        p.append("<p>No lessons under lessons/.</p>")
    for lesson in result.lessons:
        gate = verdict_text(lesson)
        p.append(f"<h3>{_a(lesson.id, link(result, base, lesson.file))}: {_e(lesson.title)}</h3>"
                 f'<p>Status <span class="v v-{"passed" if lesson.status == "published" else "gated"}">'
                 f"{_e(lesson.status)}</span> &middot; gate: {_e(gate)}</p>")
        p.append("<table><tr><th>Program</th><th>Check</th><th>Outcome</th><th>Run</th><th>Reason / fix</th></tr>")
        for r in lesson_rows(lesson):
            check = r.check
            run = _a(r.run_id, link(result, base, f"runs/{r.run_id}.json")) if r.run_id else "-"
            fix = f'<br><span class="muted">fix: <code>{_e(r.command)}</code></span>' if r.command else ""
            outcome = OUTCOME_CLASS.get(r.outcome, "failed")
            p.append(f'<tr><td class="mono">{_e(r.program)}</td><td>{_e(check)}</td>'
                     f'<td><span class="v v-{outcome}">{_e(r.outcome)}</span></td><td class="mono">{run}</td>'
                     f"<td>{_e(r.reason)}{fix}</td></tr>")
        p.append("</table>")

    p.append('<h2 id="grid">Lessons &times; programs &times; GPUs</h2>')
    totals = ", ".join(f"{k} {n}" for k, n in sorted(v.counts.items())) or "none"
    p.append(f'<p class="muted">Newest run of each program on each GPU; (+n) counts older runs; '
             f'<span class="flag">&#9888;</span> marks a run with findings. Verdicts over all runs: {_e(totals)}.</p>')
    if v.rows:
        p.append("<table><tr><th>Lesson</th><th>Program</th><th>Compile</th>"
                 + "".join(f"<th>{_e(gpu_label(g))}</th>" for g in v.gpus) + "</tr>")
        for row in v.rows:
            tds = []
            for g in v.gpus:
                cell = row.cells.get(g)
                if cell is None:
                    tds.append('<td class="muted">-</td>')
                    continue
                rec = cell.newest
                flag = ' <span class="flag" title="this run has findings">&#9888;</span>' \
                    if rec.run_id in result.bad_records else ""
                more = f' <span class="muted">(+{cell.runs - 1})</span>' if cell.runs > 1 else ""
                links = " &middot; ".join(_a(label, link(result, base, path)) for label, path in _run_links(rec))
                tds.append(f"<td>{_badge(rec.verdict)}{flag}{more}<br>"
                           f'<span class="muted mono">{_e(rec.run_id)}</span><br>{links}<br>'
                           f'<span class="muted">{_e(rec.reason)} &middot; session '
                           f'<a href="#{_e(rec.environment.session_id)}">{_e(rec.environment.session_id[-8:])}</a>'
                           f"</span></td>")
            p.append(f"<tr><td>{_e(row.lesson)}</td><td class=\"mono\">{_e(row.program)}</td>"
                     f"<td class=\"muted\">{_e(row.compile)}</td>{''.join(tds)}</tr>")
        p.append("</table>")
    else:
        p.append("<p>No run records.</p>")

    p.append('<h2 id="environments">Environments</h2>')
    for env in v.environments:
        p.append(f'<h3 id="{_e(env.session_id)}">Session <span class="mono">{_e(env.session_id)}</span></h3><dl>')
        for k, val in _env_summary(env).items():
            p.append(f"<dt>{_e(k)}</dt><dd>{_e(val)}</dd>")
        links = " &middot; ".join(_a(label, link(result, base, path)) for label, path in _env_transcripts(env))
        p.append(f"<dt>transcripts</dt><dd>{links}</dd></dl>")
    if v.other_sessions:
        p.append(f'<p class="muted">{v.other_sessions} older session(s) not shown: '
                 f"no table cell's newest run came from them.</p>")
    if not v.environments:
        p.append("<p>No run sessions.</p>")

    p.append('<h2 id="rules">Rules</h2><table><tr><th>Rule</th><th>Catches</th></tr>')
    p += [f'<tr><td class="mono">{_e(rule)}</td><td>{_e(text)}</td></tr>' for rule, text in RULES.items()]
    p.append("</table></body></html>")
    return "\n".join(p) + "\n"
