"""``tileproof diff`` as text (a terminal) and as Markdown (a pull-request comment), from a ``judge.diff.Diff``.

Pure: both read only the diff. Every value comes from the diff's fields; every line of text goes through
``records.errors.one_line`` and every Markdown cell through ``markup.md`` (a record's strings are hostile).
"""

from __future__ import annotations

from tileproof.judge import noise
from tileproof.judge.diff import BenchChange, CaseChange, Diff, LessonChange, RowState, Side
from tileproof.records.errors import one_line
from tileproof.report.markup import md

MARKER = "<!-- tileproof-diff -->"
"""The first line of the Markdown: what a workflow finds to update its comment in place."""
VERDICT_WORDS = {"improvement": "improvement", "regression": "REGRESSION", "within-noise": "within noise"}


def _row(state: RowState | None) -> str:
    if state is None:
        return "absent"
    run = f" ({state.run_id})" if state.run_id else ""
    if state.result in ("-", ""):
        return f"{state.outcome}{run}"
    shown = state.result if state.result.startswith(state.outcome) else f"{state.outcome}: {state.result}"
    return f"{shown}{run}"


def _pair(pair: tuple[object, object]) -> str:
    before, after = ("absent" if x is None else str(x) for x in pair)
    return before if before == after else f"{before} -> {after}"


def _side(s: Side) -> str:
    ceiling = f", {s.pct_of_ceiling:.1f}% of ceiling" if s.pct_of_ceiling is not None else ""
    repeat = f", repeat {s.repeat_spread:.2%}" if s.repeat_spread is not None else ""
    control = f", control {s.control:.2%}" if s.control else ""
    return (f"{s.median_ms:.4f} ± {s.band_ms:.4f} ms (noise {s.noise:.1%}: spread {s.spread:.2%}{repeat}{control}"
            f"{ceiling})")


def _case_name(c: CaseChange) -> str:
    if not c.key.endswith("/*"):
        return c.key
    return f"{c.key} (fastest: {c.before.case} -> {c.after.case})"


def summary(d: Diff) -> str:
    """One line: what the exit code says."""
    parts = []
    if d.turned_false:
        parts.append(f"{len(d.turned_false)} lesson(s) turned false ({', '.join(x.id for x in d.turned_false)})")
    if d.regressions:
        parts.append(f"{len(d.regressions)} bench case(s) regressed beyond noise")
    better = sum(1 for b in d.bench for c in b.cases if c.judged == "improvement")
    head = "; ".join(parts) if parts else "nothing regressed and no lesson turned false"
    return (f"{head}; {len(d.lessons)} lesson(s) changed, {len(d.records.added)} record(s) added, "
            f"{len(d.records.removed)} removed, {len(d.records.changed)} changed, {len(d.claims)} claim verdict(s) "
            f"changed, {better} bench case(s) improved")


def _lesson_lines(lesson: LessonChange) -> list[str]:
    out = [f"  {lesson.id}: status {_pair(lesson.status)}, standing {_pair(lesson.standing)}"
           + (" (TURNED FALSE)" if lesson.turned_false else "")]
    out += [f"    {r.row}: {_row(r.before)} -> {_row(r.after)}" for r in lesson.rows]
    if lesson.releases_gained:
        out.append(f"    cuda-tile releases verified, gained: {', '.join(lesson.releases_gained)}")
    if lesson.releases_lost:
        out.append(f"    cuda-tile releases verified, lost: {', '.join(lesson.releases_lost)}")
    return out


def _bench_lines(b: BenchChange, every: bool) -> list[str]:
    out = [f"  {b.program} on {b.gpu_class}: {b.before_run} -> {b.after_run}"]
    shown = [c for c in b.cases if every or c.judged != "within-noise" or c.key.endswith("/*")]
    for c in shown:
        out.append(f"    {_case_name(c)}: {VERDICT_WORDS[c.judged]}, {c.change:+.1%}: {_side(c.before)} -> "
                   f"{_side(c.after)}")
    quiet = len(b.cases) - len(shown)
    if quiet:
        out.append(f"    {quiet} other case(s) within noise (--every lists them)")
    out.append("    environment: " + "; ".join(
        f"{f.name} {f.before}" + (f" -> {f.after}" if f.differs else "") for f in b.environment))
    return out


def text(d: Diff, every: bool = False) -> list[str]:
    """The diff for a terminal: a summary line, then each section that has anything in it."""
    out = [f"diff {d.base} -> {d.head}", summary(d)]
    if d.lessons:
        out += ["", "lessons:"] + [x for lesson in d.lessons for x in _lesson_lines(lesson)]
    if d.records.added or d.records.removed or d.records.changed:
        out += ["", "records:"]
        for word, ids in (("added", d.records.added), ("removed", d.records.removed),
                          ("changed", d.records.changed)):
            if ids:
                out.append(f"  {word} ({len(ids)}): {', '.join(ids)}")
    if d.claims:
        out += ["", "claims whose verdict changed on a CUDA release:"]
        out += [f"  {c.document} {c.claim} on {c.release}: {_pair((c.before, c.after))}" for c in d.claims]
    if d.bench:
        out += ["", "bench (median time; noise rule: judge/noise.py):"]
        out += [x for b in d.bench for x in _bench_lines(b, every)]
    return [one_line(x) for x in out]


def markdown(d: Diff, every: bool = False) -> list[str]:
    """The diff as a pull-request comment: :data:`MARKER`, a summary, then a table per section."""
    mark = "❌" if d.exit_code else "✅"
    out = [MARKER, f"### tileproof diff `{md(d.base[:12])}` → `{md(d.head[:12])}`", "", f"{mark} {md(summary(d))}"]
    if d.lessons:
        out += ["", "#### Lessons", "", "| Lesson | Status | Standing | What changed |", "|---|---|---|---|"]
        for lesson in d.lessons:
            what = [f"{r.row}: {_row(r.before)} → {_row(r.after)}" for r in lesson.rows]
            what += [f"gained cuda-tile {r}" for r in lesson.releases_gained]
            what += [f"lost cuda-tile {r}" for r in lesson.releases_lost]
            flag = " **turned false**" if lesson.turned_false else ""
            out.append(f"| {md(lesson.id)} | {md(_pair(lesson.status))} | {md(_pair(lesson.standing))}{flag} | "
                       f"{'<br>'.join(md(w) for w in what) or '-'} |")
    if d.records.added or d.records.removed or d.records.changed:
        counts = ", ".join(f"{len(ids)} {word}" for word, ids in (("added", d.records.added),
                                                                   ("removed", d.records.removed),
                                                                   ("changed", d.records.changed)) if ids)
        out += ["", "#### Records", "", f"<details><summary>{md(counts)}</summary>", ""]
        for word, ids in (("removed", d.records.removed), ("changed", d.records.changed), ("added", d.records.added)):
            if ids:
                out.append(f"- {word} ({len(ids)}): " + ", ".join(f"`{md(i)}`" for i in ids))
        out += ["", "</details>"]
    if d.claims:
        out += ["", "#### Claims per CUDA release", "", "| Document | Claim | Release | Verdict |", "|---|---|---|---|"]
        out += [f"| {md(c.document)} | {md(c.claim)} | {md(c.release)} | {md(_pair((c.before, c.after)))} |"
                for c in d.claims]
    for b in d.bench:
        out += ["", f"#### Bench: `{md(b.program)}` on {md(b.gpu_class)}", "",
                f"`{md(b.before_run)}` → `{md(b.after_run)}`; median time, band = median × the largest of spread, "
                f"repeat spread, A/A control and {noise.ACROSS_RUNS:.0%} across runs; beyond noise when the change is "
                "at least both bands together.", "",
                "| Case | Verdict | Change | Before | After |", "|---|---|---|---|---|"]
        shown = [c for c in b.cases if every or c.judged != "within-noise" or c.key.endswith("/*")]
        out += [f"| {md(_case_name(c))} | {md(VERDICT_WORDS[c.judged])} | {c.change:+.1%} | {md(_side(c.before))} | "
                f"{md(_side(c.after))} |" for c in shown]
        if len(shown) < len(b.cases):
            out.append(f"\n{len(b.cases) - len(shown)} other case(s) within noise.")
        out += ["", "<details><summary>environment</summary>", "", "| | Before | After |", "|---|---|---|"]
        out += [f"| {md(f.name)} | {md(f.before)} | {md(f.after)}{' ⚠' if f.differs else ''} |" for f in b.environment]
        out += ["", "</details>"]
    return out
