"""The report's bench, claims and lessons sections, from the committed records (real GPU captures)
and from the small audit tree: the view models, the SVG, and what both reports say."""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from datetime import timedelta
from html import escape
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "audit"))
import audit_tree

from tileproof.gather import audit
from tileproof.records.models import BenchRecord
from tileproof.report import bench_view, grid_view, render, svg
from tileproof.report.claims_render import view_of
from tileproof.report.lesson_view import MEANING, lesson_rows
from tileproof.report.shorten import env_text, plural


@pytest.fixture(scope="module")
def committed(committed_tree):
    """The audit of the repository as committed at ``conftest.COMMITTED`` (never the working tree)."""
    result = audit.audit(committed_tree)
    assert result.ok, [str(f) for f in result.findings]
    return result


def _benches(result, program):
    return sorted((r for r in result.records if isinstance(r, BenchRecord) and r.program == program),
                  key=lambda r: r.created)


def test_head_to_head_charts_carry_the_control(committed):
    rec = next(r for r in reversed(_benches(committed, "kernels/bench/matmul_bench.py")) if r.head_to_head)
    v = bench_view.bench_view(rec)
    references = {p.reference for p in rec.head_to_head.values()}
    assert len(v.head_to_head) == len(references) >= 1
    for chart in v.head_to_head:
        controls = [b for b in chart.bars if b.kind == "control"]
        assert len(controls) == 1
        assert controls[0].label == "cuBLAS vs cuBLAS (control)"
        assert [line.value for line in chart.lines] == [100.0]
    # Every paired ratio of the record is one bar, at its median with its quartiles.
    bars = {(b.value, b.low, b.high) for c in v.head_to_head for b in c.bars}
    assert bars == {(p.pct_of_reference, p.q1, p.q3) for p in rec.head_to_head.values()}


def test_sweeps_show_every_case_the_reference_and_the_ceiling(committed):
    rec = _benches(committed, "kernels/bench/matmul_bench.py")[-1]
    v = bench_view.bench_view(rec)
    assert sum(len(c.bars) for c in v.sweeps) == sum(1 for c in rec.cases if c.tflops is not None)
    for chart in v.sweeps:
        assert [b.kind for b in chart.bars].count("reference") == 1
        assert chart.lines[0].value == rec.ceilings["tflops"]
        for b in chart.bars:
            assert b.low <= b.value <= b.high
    soft = bench_view.bench_view(_benches(committed, "kernels/bench/softmax_bench.py")[-1])
    assert soft.sweeps
    assert all("against the device copy" in c.title for c in soft.sweeps)
    assert all(c.lines[0].label.startswith("device copy") for c in soft.sweeps)


def test_an_older_record_without_the_paired_phase_says_so(committed):
    rec = _benches(committed, "kernels/bench/matmul_bench.py")[0]
    assert not rec.head_to_head
    v = bench_view.bench_view(rec)
    assert not v.head_to_head
    assert any("no head-to-head phase" in n for n in v.notes)


def test_history_follows_a_case_and_marks_a_regression(committed):
    matmul = _benches(committed, "kernels/bench/matmul_bench.py")
    key = "matmul/cublas/4096x4096x4096"
    series = {(s.key, s.metric): s for s in bench_view.history(committed.records)}
    s = series[(key, "tflops")]
    assert [p.run_id for p in s.points] == [r.run_id for r in matmul]
    assert not s.regressed
    # A newer record 10% slower on that case is a regression; the same record 1% slower is not.
    last = matmul[-1]

    def slower(factor, minutes):
        cases = [c.model_copy(update={"tflops": c.tflops * factor}) if c.key == key else c for c in last.cases]
        return last.model_copy(update={"run_id": last.run_id + f"-{minutes}", "cases": cases,
                                       "created": last.created + timedelta(minutes=minutes)})

    for factor, regressed in ((0.9, True), (0.99, False)):
        got = {(x.key, x.metric): x for x in bench_view.history([*committed.records, slower(factor, 5)])}
        assert got[(key, "tflops")].regressed is regressed
        case = last.cases[[c.key for c in last.cases].index(key)]
        assert got[(key, "tflops")].points[-1].value == pytest.approx(case.tflops * factor)
    # A record with a finding against it is left out of the history.
    left = bench_view.history(committed.records, bad={matmul[-1].run_id})
    assert all(p.run_id != matmul[-1].run_id for x in left for p in x.points)


def test_svg_is_plain_well_formed_and_labelled(committed):
    rec = next(r for r in reversed(_benches(committed, "kernels/bench/matmul_bench.py")) if r.head_to_head)
    v = bench_view.bench_view(rec)
    ns = "{http://www.w3.org/2000/svg}"
    for chart in (*v.head_to_head, *v.sweeps):
        text = svg.bar_chart(chart)
        tree = ET.fromstring(text)
        assert tree.tag == f"{ns}svg"
        assert tree.find(f"{ns}title").text == chart.title
        assert not re.search(r"<script|url\(|@import|https?://(?!www\.w3\.org/2000/svg)", text)
        bars = [r for r in tree.iter(f"{ns}rect") if r.find(f"{ns}title") is not None]
        assert len(bars) == len(chart.bars)
        legend = {t.text for t in tree.iter(f"{ns}text")}
        assert {svg.LEGEND[b.kind] for b in chart.bars} <= legend
        assert chart.axis in legend
    series = bench_view.history(rec for rec in [*_benches(committed, "kernels/bench/matmul_bench.py")])
    spark = ET.fromstring(svg.history_chart(series[0]))
    assert len(list(spark.iter(f"{ns}circle"))) == len(series[0].points)


def test_claims_view_stands_out_what_the_decision_refuses(committed):
    v = view_of(committed)
    assert v.releases
    assert v.rows
    for row in v.rows:
        assert len(row.cells) == len(v.releases)
        assert row.stands_out == (row.deciding == "refuted" and row.asserted is not False)
    refused = {(lesson.id, c.claim_id) for lesson in committed.lessons for c in lesson.decision.refuted}
    assert refused <= {(r.document, r.claim_id) for r in v.standing_out}
    # A refuted claim its document no longer asserts is shown, but does not stand out.
    assert any(r.deciding == "refuted" and r.asserted is False and not r.stands_out for r in v.rows)
    for row in v.rows:
        for cell in row.cells:
            if cell is not None and cell.evidence:
                assert (committed.root / cell.evidence).is_file(), cell.evidence


def test_the_committed_report_shows_bench_claims_and_history(committed, tmp_path):
    html = render.render_html(committed, tmp_path)
    md = render.render_markdown(committed, tmp_path)
    order = [html.index(s) for s in ('id="findings"', 'id="lessons"', 'id="claims"', 'id="bench"',
                                     'id="perf-claims"', 'id="history"', 'id="grid"', 'id="environments"')]
    assert order == sorted(order)
    assert html.count("<svg") >= len(bench_view.bench_views(committed.records)) * 2
    assert "cuBLAS vs cuBLAS (control)" in html
    assert "cuBLAS vs cuBLAS (control)" in md
    assert html.count('class="standout"') == len(view_of(committed).standing_out) > 0
    assert "@media print" in html
    for text in ("## Claims", "## Bench", "## Bench history", "## Performance claims"):
        assert text in md


def test_compact_rows_plurals_and_no_machine_paths(committed):
    html = render.render_html(committed, committed.root / "evidence")  # where the committed report lives
    md = render.render_markdown(committed, committed.root / "evidence")
    assert not re.search(r"sm_\d+ built, sm_\d+ built", html + md)
    assert "6 of 6 targets built (sm_80, sm_86, sm_89, sm_90, sm_100, sm_120)" in html
    assert not re.search(r"\b1 (checks|findings|records|claims|lessons)\b", html + md)
    for lesson in committed.lessons:
        for r in lesson_rows(lesson):
            if r.outcome == "passed":
                assert r.why.startswith("check passed: max abs err")
                assert r.run_id not in r.why
    envs = html[html.index('id="environments"'):html.index('id="rules"')]
    envs_md = md[md.index("## Environments"):md.index("## Rules")]
    for private in ("/root/", "/tmp/", "/work/", "/home/", ".nox", "pyenv"):
        assert private not in envs, private
        assert private not in envs_md, private
    assert "PATH=" in envs
    assert "/usr/bin" in envs
    assert "VIRTUAL_ENV=(set" in envs
    # The records keep the whole value: only the report shortens it.
    assert any("/root/" in r.environment.env.get("PATH", "") for r in committed.runs.newest.values())


def test_shorten_and_plural():
    env = {"PATH": "/home/ci/proj/.venv/bin:/home/ci/.local/bin:/tmp/x/bin:/usr/local/cuda/bin:/usr/bin",
           "VIRTUAL_ENV": "/home/ci/proj/.venv", "CUDA_HOME": "/home/ci/cuda", "CUDA_VISIBLE_DEVICES": "0",
           "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}
    text = env_text(env)
    assert "PATH=$VIRTUAL_ENV/bin:…(2):/usr/local/cuda/bin:/usr/bin" in text
    assert "CUDA_HOME=(a path on the machine that ran it)" in text
    assert "/home/" not in text
    assert "CUDA_VISIBLE_DEVICES=0" in text
    assert "LD_LIBRARY_PATH=/usr/local/nvidia/lib64" in text
    assert env_text({}) == "-"
    assert plural(1, "check") == "1 check"
    assert plural(3, "check") == "3 checks"
    assert plural(0, "finding") == "0 findings"


def test_a_stale_row_says_which_input_changed(tmp_path):
    info = audit_tree.clean_tree(tmp_path)
    (tmp_path / "kernels" / "vector_add.py").write_text('"""Changed after the run."""\n')
    result = audit.audit(tmp_path)
    lesson = next(lesson for lesson in result.lessons if lesson.id == "01-vector-add")
    html = render.render_html(result, tmp_path / "evidence")
    md = render.render_markdown(result, tmp_path / "evidence")
    blocker = next(b for b in lesson.decision.blockers if b.outcome == "stale")
    assert "kernels/vector_add.py" in blocker.reason
    assert info["run"].run_id in blocker.reason
    for text, meaning in ((html, escape(MEANING["stale"])), (md, MEANING["stale"])):
        assert "What keeps it from publishing" in text
        assert meaning in text
    assert blocker.reason in md.replace("\\|", "|")
    gated = next(lesson for lesson in result.lessons if lesson.id == "02-softmax")
    assert any(MEANING[b.outcome] in md for b in gated.decision.blockers)


def test_a_performance_claim_shows_the_record_that_backs_it(committed, tmp_path):
    from dataclasses import replace

    from tileproof.judge import gate, perf_claims
    from tileproof.judge.audit.result import LessonAudit
    from tileproof.records.models import PerfClaim

    claim = PerfClaim(id="grouped-4096", statement="grouped matmul reaches 80% of cuBLAS at 4096³ on sm_90",
                      case="matmul/grouped/4096x4096x4096/*", metric="pct_of_reference", at_least=80,
                      program="kernels/bench/matmul_bench.py",
                      compute_capability="9.0")
    decided = perf_claims.decide([claim], committed.records)
    assert decided[0].supported
    lesson = LessonAudit(id="perf-lesson", file="lessons/day79-cutile.md", title="perf", status="draft",
                         programs=[], decision=gate.Decision("perf-lesson", (), tuple(decided)))
    result = replace(committed, lessons=[*committed.lessons, lesson])
    html = render.render_html(result, committed.root / "evidence")
    section = html[html.index('id="perf-claims"'):html.index('id="history"')]
    run_id = decided[0].record.run_id
    assert "grouped-4096" in section
    assert "supported" in section
    assert escape(decided[0].value_text()) in section
    assert f'href="#bench-{run_id}"' in section
    assert f'id="bench-{run_id}"' in html
    assert "grouped-4096" in render.render_markdown(result, committed.root / "evidence")


def test_claims_per_release_when_there_are_several(committed):
    """The committed claims matrix (13.3, 13.4, 13.5): the compiler's warning number changed in 13.5."""
    v = view_of(committed)
    assert v.releases == ("13.3", "13.4", "13.5")
    row = next(r for r in v.rows if (r.document, r.claim_id) == ("day79-cutile", "warning-20359-d"))
    assert [c.verdict for c in row.cells] == ["confirmed", "confirmed", "refuted"]
    assert row.holds == "confirmed on 13.3-13.4; refuted since 13.5"
    assert row.deciding == "refuted"
    assert row.stands_out is (row.asserted is not False)


def replace_records(result, records):
    from dataclasses import replace

    return replace(result, records=records)


def test_a_record_that_does_not_count_is_named_with_why(tmp_path):
    info = audit_tree.clean_tree(tmp_path)
    path = tmp_path / "runs" / f"{info['run'].run_id}.json"
    path.write_text(path.read_text().replace('"reason": "', '"reason": "edited after writing: ', 1))
    result = audit.audit(tmp_path)
    assert any(f.rule.startswith("record-seal") or "seal" in f.rule for f in result.findings)
    lesson = next(lesson for lesson in result.lessons if lesson.id == "01-vector-add")
    row = lesson.decision.rows[0]
    assert info["run"].run_id in row.ignored
    md = render.render_markdown(result, tmp_path / "evidence")
    shown = next(r for r in lesson_rows(lesson) if r.program == row.row.program)
    assert f"seal broken: {info['run'].run_id}" in shown.why
    assert shown.why in md.replace("\\|", "|")


def test_both_reports_show_each_lessons_python_programs_per_cuda_tile_release(committed, tmp_path):
    day79 = next(lesson for lesson in committed.lessons if lesson.id == "day79-cutile")
    assert day79.releases is not None
    assert [str(k) for k in day79.releases.releases] == ["1.7.0"]
    md, page = render.render_markdown(committed, tmp_path), render.render_html(committed, tmp_path)
    assert "## cuda-tile releases" in md
    assert "### day79-cutile" in md
    for program in ("kernels/tile_matmul_softmax.py", "kernels/fused.py"):
        section = md.split("## cuda-tile releases", 1)[1]
        row = next(line for line in section.splitlines() if line.startswith(f"| `{program}` |"))
        assert row.count("passed (") == 1  # one release column, its record linked
    assert 'id="cuda-tile-releases"' in page
    assert escape(day79.releases.holds()) in page
    assert md.index("## Claims") < md.index("## cuda-tile releases")


def test_the_compile_column_shows_the_locks_exports_not_another_releases(tmp_path):
    from datetime import datetime, timezone

    from tileproof.judge.audit.result import AuditResult
    from tileproof.judge.releases import ReleaseKey
    from tileproof.records.models import CudaTileRelease

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "a.py").write_text("AOT_SIGNATURES = {}\n")
    lock = audit_tree.compile_record(tmp_path, ["kernels/a.py"], datetime(2026, 1, 1, tzinfo=timezone.utc))
    older = audit_tree.compile_record(tmp_path, ["kernels/a.py"], datetime(2026, 1, 2, tzinfo=timezone.utc))
    failed = [b.model_copy(update={"verdict": "failed"}) for b in older.builds]
    older = older.model_copy(update={
        "compile_version": 5, "passed": False, "builds": failed,
        "cuda_tile": CudaTileRelease(version="1.3.0", requires="nvidia-cuda-tileiras<13.3,>=13.2", tileiras="13.4.92",
                                     in_range=False, outside_range_allowed=True)})

    def column(records, lock_release):
        result = AuditResult(root=tmp_path, findings=[], records=records, lessons=[], evidence_files=0,
                             evidence_bytes=0, record_files=len(records), cuda_tile_lock=lock_release)
        return {row.program: row.compile for row in grid_view.view(result).rows}

    assert column([lock, older], ReleaseKey("1.7.0", True)) == {"kernels/a.py": "1 of 1 target built (sm_90)"}
    assert column([lock, older], None)["kernels/a.py"].startswith("0 of 1 target built")  # no lock: newest decides


def _as_version_2(rec: BenchRecord, root: Path) -> BenchRecord:
    """A committed bench record with its cases rebuilt by today's bench (roofline, second look) from its own
    results file, as a bench_version 2 record would hold them."""
    import json

    from tileproof.bench import core as bench
    from tileproof.records.models import CheckReport

    results = json.loads((root / rec.results_file.path).read_text())
    report = CheckReport.model_validate_json((root / rec.report_file.path).read_text())
    cases, ceilings, _ = bench.build_cases(results, report)
    cases = bench.second_looks(results, cases, rec.head_to_head)
    return rec.model_copy(update={"bench_version": 2, "cases": cases, "ceilings": ceilings})


def test_bench_view_shows_the_roofline_and_flags_a_second_look(committed, committed_tree):
    old = _benches(committed, "kernels/bench/matmul_bench.py")[-1]
    assert any("bench_version 1: no roofline" in n for n in bench_view.bench_view(old).notes)
    v = bench_view.bench_view(_as_version_2(old, committed_tree))
    flagged = [b for c in v.sweeps for b in c.bars if "second look" in b.value_text]
    assert [b.label for b in flagged] == ["persistent 128x256x32+warps8+occ1"]
    assert all("(flops-bound)" in c.title for c in v.sweeps)
    assert any(b.value_text.endswith("% of largest cuBLAS product") for c in v.sweeps for b in c.bars)
    notes = [n for n in v.notes if n.startswith("⚑ ")]
    assert len(notes) == 1
    assert "matmul/persistent/8192x8192x8192/128x256x32+warps8+occ1" in notes[0]
    assert not any("bench_version 1" in n for n in v.notes)
    softmax = _benches(committed, "kernels/bench/softmax_bench.py")[-1]
    soft = bench_view.bench_view(_as_version_2(softmax, committed_tree))
    assert all("(bytes-bound)" in c.title for c in soft.sweeps)


def test_status_lines_name_each_programs_newest_record_and_its_best_per_shape(committed, committed_tree):
    lines = bench_view.status_lines(committed.records)
    programs = ("kernels/bench/matmul_bench.py", "kernels/bench/softmax_bench.py")
    newest = {p: _benches(committed, p)[-1] for p in programs}
    heads = [line for line in lines if not line.startswith("  ")]
    assert [h.split(":")[0] for h in heads] == sorted(newest)
    assert all(newest[h.split(":")[0]].run_id in h for h in heads)
    assert "  softmax 2097152x128: tile 128x128 0.8113 ms, no roofline (bench_version 1), 607.4% of CuPy" in lines
    rec = _as_version_2(newest["kernels/bench/matmul_bench.py"], committed_tree)
    big = next(c for c in bench_view.best_by_shape(rec) if c.shape == [8192] * 3)
    line = bench_view.status_line(rec, big)
    assert "flops-bound: " in line
    assert "head to head 102.8% [102.7, 102.9]" in line
    assert "; ⚑ second look: 102.8% > 100.1% of the reference" in line


def test_status_line_and_notes_say_what_the_gpu_did_while_a_case_ran(committed, committed_tree):
    from tileproof.records.models import GpuLoad

    rec = _as_version_2(_benches(committed, "kernels/bench/matmul_bench.py")[-1], committed_tree)
    load = GpuLoad(samples=150, window_s=1.5, sm_clock_mhz=1410.0, sm_clock_q1_mhz=1395.0, sm_clock_q3_mhz=1425.0,
                   max_sm_clock_mhz=1980.0, power_w=698.0, power_q1_w=694.0, power_q3_w=701.0, power_limit_w=700.0,
                   power_reading="instant", reasons={"sw_power_cap": 0.96, "gpu_idle": 0.02})
    v3 = rec.model_copy(update={"bench_version": 3, "cases": [c.model_copy(update={"load": load}) for c in rec.cases]})
    big = next(c for c in bench_view.best_by_shape(v3) if c.shape == [8192] * 3)
    line = bench_view.status_line(v3, big)
    assert ("head to head 102.8% [102.7, 102.9], SM 1410 of 1980 MHz, 698 of 700 W (instant; sw_power_cap 96%, "
            "gpu_idle 2%), 150 readings; ⚑ second look") in line
    none = rec.model_copy(update={"bench_version": 3, "load_unavailable": "pynvml is not installed"})
    notes = bench_view.bench_view(none).notes
    assert "no GPU clock and power readings for some cases: pynvml is not installed" in notes
    assert not any("clock and power" in n for n in bench_view.bench_view(rec).notes)
