"""Rendering an ``AuditResult`` as ``evidence/AUDIT.md`` and one self-contained HTML page.

Both say the same things in the same order: findings first, then each lesson
with the gate's decision per row and what blocks it (``report.lesson_view``),
the claims matrix (``report.claims_render``), the programs per cuda-tile release
(``report.releases_render``), the bench charts, performance
claims and history (``report.bench_render``), then lessons × programs × GPUs
with the newest run's verdict and links to its transcripts, then the
environment of each run shown (paths of the machine shortened: ``report.shorten``).
Links are relative to the folder the report is written to, so
the page works from a checkout, a CI artifact or a browser's ``file://``.
The HTML has inline CSS, no script and nothing fetched; every value is escaped.
Nothing here reads a file: the audit already did.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tileproof.judge import releases
from tileproof.judge.audit.result import NO_GPU, AuditResult
from tileproof.judge.audit.rules import load as load_rules
from tileproof.records.capability import cc_of, cc_tuple
from tileproof.records.models import CompileRecord, Environment, RunRecord
from tileproof.report import bench_render, claims_render, markup, releases_render
from tileproof.report.lesson_view import blocker_lines, lesson_rows, verdict_text
from tileproof.report.markup import a as _a
from tileproof.report.markup import badge as _badge
from tileproof.report.markup import e as _e
from tileproof.report.markup import md as _md
from tileproof.report.markup import mdlink as _mdlink
from tileproof.report.shorten import env_text, plural

RULES = load_rules()

NO_LESSON = "(no lesson)"
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
    """The newest build verdict of every target in one summary, e.g. ``6 of 6 targets built (sm_80 ... sm_120)``."""
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


def _cc_order(key: tuple[str, str]):
    cc = cc_tuple(key[1])
    return (0, -cc[0], -cc[1], key[0]) if cc is not None else (1, 0, 0, key[0])


def view(result: AuditResult) -> View:
    table = result.runs
    cells = {key: Cell(rec, table.runs[key]) for key, rec in table.newest.items()}
    builds: dict[tuple[str, str], str] = {}
    for rec in result.records:  # oldest first: later ones replace earlier ones
        if isinstance(rec, CompileRecord):
            axis = not releases.exports_rest_on(rec, result.cuda_tile_lock)  # another cuda-tile's exports
            for b in rec.builds:
                if not (axis and b.artifact_kind == "cubin"):
                    builds[(b.program, b.target)] = b.verdict
    gpus = sorted({g for _, g in cells}, key=_cc_order)
    per_program: dict[str, dict[str, str]] = {}
    for (program, target), verdict in sorted(builds.items(), key=lambda kv: (kv[0][0], _target_order(kv[0][1]))):
        per_program.setdefault(program, {})[target] = verdict
    compiled = {program: compile_summary(targets) for program, targets in per_program.items()}
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
    envs = sorted(shown.values(), key=lambda e: e.session_id, reverse=True)
    return View(gpus, rows, envs, len(table.sessions - set(shown)), Counter(table.verdicts))


def _target_order(target: str):
    """sm_80 < sm_90 < sm_100: by compute capability, not by text (an unreadable target sorts first)."""
    try:
        return (cc_tuple(cc_of(target)) or (0, 0), target)
    except ValueError:
        return ((0, 0), target)


def compile_summary(targets: dict[str, str]) -> str:
    """One line for a program's builds (target → newest verdict, in target order):
    ``6 of 6 targets built (sm_80, sm_86, ..., sm_120)``, or what did not build, by verdict."""
    built = [t for t, v in targets.items() if v == "built"]
    head = f"{len(built)} of {plural(len(targets), 'target')} built"
    if len(built) == len(targets):
        return f"{head} ({', '.join(built)})"
    others: dict[str, list[str]] = {}
    for t, v in targets.items():
        if v != "built":
            others.setdefault(v, []).append(t)
    return head + "; " + "; ".join(f"{v}: {', '.join(ts)}" for v, ts in others.items())


def _row(lesson, program, gpus, cells, compiled) -> Row:
    return Row(lesson, program, compiled.get(program, "-"),
               {g: cells[(program, g)] for g in gpus if (program, g) in cells})


def gpu_label(key: tuple[str, str]) -> str:
    return key[0] if key == NO_GPU else f"{key[0]} (cc {key[1]})"


def link(result: AuditResult, base: Path, path: str) -> str:
    """``path`` (repo-relative) relative to the report's folder, POSIX separators."""
    return markup.link(result.root, base, path)


def run_reason(rec: RunRecord) -> str:
    """The run's one line; a passed run's as ``3 checks passed`` (plural right, from its report)."""
    if rec.verdict == "passed" and rec.report is not None:
        return f"{plural(len(rec.report.checks), 'check')} passed"
    return rec.reason


def headline(result: AuditResult) -> str:
    n = len(result.findings)
    rules = Counter(f.rule for f in result.findings)
    what = ", ".join(f"{rule} {k}" for rule, k in sorted(rules.items()))
    return (f"FAILED: {plural(n, 'finding')} ({what})" if n else "PASSED: no findings") + (
        f" in {plural(result.validated, 'record')}, {plural(result.evidence_files, 'evidence file')}, "
        f"{plural(len(result.lessons), 'lesson')}; {result.history_line()}")


NOTICES_HEAD = ("What rests on a committer's word: no finding, each one a finding under --strict (the reviewer's "
                "mode).")


def notices(result: AuditResult) -> list:
    """The notices the reports list apart (under ``--strict`` they are among the findings)."""
    return [] if result.strict else result.notices


def trust_lines(result: AuditResult) -> list[str]:
    """The trust root the registry's history was checked from, the range and every change in it
    (``judge.trust.trust_root.TrustReport``)."""
    return result.trust.lines() if result.trust is not None else ["not checked (no trust report)"]


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
        "environment": env_text(env.env),
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


def render_markdown(result: AuditResult, base: Path) -> str:
    v = view(result)
    out = ["# tileproof audit", "", f"**{_md(headline(result))}**", ""]
    out += ["## Findings", ""]
    if result.findings:
        out += ["| File | Rule | Reason |", "|---|---|---|"]
        out += [f"| `{_md(f.file)}` | {f.rule} | {_md(f.reason)} |" for f in result.findings]
    else:
        out.append("None.")
    shown = notices(result)
    if shown:
        out += ["", "## Notices", "", NOTICES_HEAD, "", "| File | Rule | Reason |", "|---|---|---|"]
        out += [f"| `{_md(f.file)}` | {f.rule} | {_md(f.reason)} |" for f in shown]
    out += ["", "## Trust root", ""] + [f"- {_md(line)}" for line in trust_lines(result)]
    out += ["", "## Lessons", ""]
    if not result.lessons:
        out.append("No lessons under lessons/.")
    for lesson in result.lessons:
        out += [f"### {_md(lesson.id)}: {_md(lesson.title)}", "",
                f"Status **{lesson.status}**; publish decision: {_md(verdict_text(lesson))}.", ""]
        blockers = blocker_lines(lesson)
        if blockers:
            out += ["What keeps it from publishing:", ""]
            out += [f"- **{_md(what)}**: {_md(why)}" + (f" Fix: `{_md(fix)}`" if fix else "")
                    for what, why, fix in blockers]
            out.append("")
        out += ["| Program | Check | State | Run | Why / fix |", "|---|---|---|---|---|"]
        for r in lesson_rows(lesson):
            fix = f" (fix: `{_md(r.command)}`)" if r.command else ""
            run = _mdlink(r.run_id, link(result, base, f"runs/{r.run_id}.json")) if r.run_id else "-"
            out.append(f"| `{_md(r.program)}` | {_md(r.check)} | {r.outcome} | {run} | {_md(r.why)}{fix} |")
        out.append("")
    out += claims_render.markdown(result, base)
    out += releases_render.markdown(result, base)
    out += bench_render.markdown(result, base)
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
                cells.append(f"**{rec.verdict}**{flag}{more}: {_md(run_reason(rec))} {links}")
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
        out += [f"{plural(v.other_sessions, 'older session')} not shown: "
                "no table cell's newest run came from them.", ""]
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
.v{display:inline-block;padding:1px 7px;border-radius:10px;font-weight:600;font-size:12px;white-space:nowrap}
.v-passed{background:#dafbe1;color:#116329}.v-failed,.v-error,.v-timeout{background:#ffebe9;color:#82071e}
.v-gated,.v-no-gpu{background:#fff8c5;color:#7d4e00}.v-other{background:#eaeef2;color:#424a53}
.flag{color:#cf222e;font-weight:700}.muted{color:#57606a;font-size:12px}
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:4px 0 12px}dt{font-weight:600}dd{margin:0}
dd{overflow-wrap:anywhere}
.blockers{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:6px 12px;margin:6px 0}
.blockers ul,.banner ul{margin:4px 0;padding-left:20px}
figure{margin:8px 0 14px}figcaption{font-weight:600;margin-bottom:2px}
table.claims th:nth-child(2){width:34%}table.claims th:nth-child(3){width:7%}table.claims th:last-child{width:12%}
table.history td.vals{font-size:12px;color:#57606a}
svg.chart{max-width:100%;height:auto;display:block}svg.spark{display:block}
tr.standout td{background:#ffebe9}tr.regressed td{background:#fff1f0}.why{font-size:12px}
table.claims td{font-size:12.5px}table.history td{vertical-align:middle}
details{margin:6px 0 12px}summary{cursor:pointer;color:#0969da}
@media print{
body{margin:0;max-width:none;font-size:10.5px}
code,.mono{font-size:9.5px}.muted,.why,table.claims td{font-size:9px}.v{font-size:9.5px}th,td{padding:2px 5px}
a{color:inherit}h2{break-after:avoid}h3{break-after:avoid}
tr,figure,svg,.blockers,.banner{break-inside:avoid}
.banner,.v,tr.standout td,tr.regressed td,.blockers{-webkit-print-color-adjust:exact;print-color-adjust:exact}
details>summary{display:none}
}
"""  # noqa: E501 (a rule per line as the stylesheet is written; wrapping would change the report's bytes)


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
    shown = notices(result)
    if shown:
        p.append(f'<h2 id="notices">Notices</h2><p>{_e(NOTICES_HEAD)}</p>'
                 "<table><tr><th>File</th><th>Rule</th><th>Reason</th></tr>")
        p += [f'<tr><td class="mono">{_a(f.file, link(result, base, f.file))}</td>'
              f'<td class="mono" title="{_e(RULES.get(f.rule, ""))}">{_e(f.rule)}</td><td>{_e(f.reason)}</td></tr>'
              for f in shown]
        p.append("</table>")
    p.append('<h2 id="trust">Trust root</h2><ul>' + "".join(f"<li>{_e(line)}</li>" for line in trust_lines(result))
             + "</ul>")

    p.append('<h2 id="lessons">Lessons</h2>')
    if not result.lessons:
        p.append("<p>No lessons under lessons/.</p>")
    for lesson in result.lessons:
        gate = verdict_text(lesson)
        p.append(f"<h3>{_a(lesson.id, link(result, base, lesson.file))}: {_e(lesson.title)}</h3>"
                 f'<p>Status <span class="v v-{"passed" if lesson.status == "published" else "gated"}">'
                 f"{_e(lesson.status)}</span> &middot; gate: {_e(gate)}</p>")
        blockers = blocker_lines(lesson)
        if blockers:
            items = "".join(f"<li><b>{_e(what)}</b>: {_e(why)}"
                            + (f'<br><span class="muted">fix: <code>{_e(fix)}</code></span>' if fix else "") + "</li>"
                            for what, why, fix in blockers)
            p.append(f'<div class="blockers">What keeps it from publishing:<ul>{items}</ul></div>')
        p.append("<table><tr><th>Program</th><th>Check</th><th>State</th><th>Run</th><th>Why / fix</th></tr>")
        for r in lesson_rows(lesson):
            run = _a(r.run_id, link(result, base, f"runs/{r.run_id}.json")) if r.run_id else "-"
            fix = f'<br><span class="muted">fix: <code>{_e(r.command)}</code></span>' if r.command else ""
            p.append(f'<tr><td class="mono">{_e(r.program)}</td><td>{_e(r.check)}</td>'
                     f'<td>{_badge(r.outcome)}</td><td class="mono">{run}</td>'
                     f"<td>{_e(r.why)}{fix}</td></tr>")
        p.append("</table>")
    p += claims_render.html(result, base)
    p += releases_render.html(result, base)
    p += bench_render.html(result, base)

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
                           f'<span class="muted">{_e(run_reason(rec))} &middot; session '
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
        p.append(f'<p class="muted">{plural(v.other_sessions, "older session")} not shown: '
                 f"no table cell's newest run came from them.</p>")
    if not v.environments:
        p.append("<p>No run sessions.</p>")

    p.append('<h2 id="rules">Rules</h2><table><tr><th>Rule</th><th>Catches</th></tr>')
    p += [f'<tr><td class="mono">{_e(rule)}</td><td>{_e(text)}</td></tr>' for rule, text in RULES.items()]
    p.append("</table></body></html>")
    return "\n".join(p) + "\n"
