"""Compile-derived tables: the REG/SHARED table filled from compile records through the one decision.

Unit cases over FIXTURE compile records built in code, then the real spike note published in a
temporary copy of the repository from its committed records (its H200 runs, the 13.4 claims
records and compile record 20261129T122301Z-compile-917a22af), and the audit re-deriving it.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import timedelta

import fixture_records as fx
import pytest
from conftest import copy_lessons_as_draft

from tileproof.commands import publish as publish_cmd
from tileproof.gather import audit as audit_mod
from tileproof.judge import gate
from tileproof.judge.res_usage import decide_res_usage
from tileproof.records import lessons, store
from tileproof.records.models import (
    BuildResult,
    CompileRecord,
    FileDigest,
    Hardware,
    LessonFront,
    LessonProgram,
    ResultRow,
    ResUsage,
    ResUsageKernel,
    ResUsageTable,
)

CU, HEADER, OTHER = "cpp/prog.cu", "cpp/harness.h", "cpp/other.cu"
TODAY = {CU: fx.sha("cu v1"), HEADER: fx.sha("h v1"), OTHER: fx.sha("other v1")}
TABLE = ResUsageTable(program=CU, target="sm_89", kernels=[
    ResUsageKernel(name="tile_max_native", reduction="reduce_max", mechanism="builtin"),
    ResUsageKernel(name="tile_sum_native", reduction="sum", mechanism="builtin")])
FRONT = LessonFront(lesson_version=1, id="demo", title="Demo", status="draft",
                    programs=[LessonProgram(path=CU, checks=["tile_max_native"])], hardware=Hardware(),
                    results=[ResultRow(program=CU, check="tile_max_native", bound="exact")], res_usage=TABLE)


def _usage(fn: str, reg: int, shared: int) -> ResUsage:
    return ResUsage(function=fn, registers=reg, shared_bytes=shared, stack_bytes=0, local_bytes=0, constant_bytes=0)


def compile_record(n: int, release: str = "13.4", sources: dict | None = None, target: str = "sm_89",
                   regs: int = 22, kernels: tuple[str, ...] = ("tile_max_native", "tile_sum_native"),
                   seal: bool = True) -> CompileRecord:
    v = f"{release}.90"
    created = fx.T0 + timedelta(minutes=n)
    build = BuildResult(program=CU, target=target, artifact_kind="tilefatbin", key="k", reused_from=None, step=None,
                        artifact=None, verdict="built", diagnoses=[],
                        res_usage=[_usage(f"_Z{len(k)}{k}PKfPfm", regs + i, 16 * i) for i, k in enumerate(kernels)])
    rec = CompileRecord(compile_version=1,
                        schema_version=1, kind="compile", run_id=f"FIXTURE-{created:%Y%m%dT%H%M%SZ}-compile-{n:08x}",
                        created=created, tileproof_version="0", git=fx.GitState(commit=fx.COMMIT, dirty=False),
                        host=fx.HostFacts(system="fixture", release="f", machine="x86_64", python="3.11", cpu_count=1),
                        toolchain=fx.toolchain(nvcc=v, tileiras=v, nvvm=v), targets=[target],
                        sources=[FileDigest(path=p, sha256=d) for p, d in (sources or TODAY).items()],
                        builds=[build], api=None, passed=True)
    return rec.model_copy(update={"seal": store.seal_of(rec)}) if seal else rec


CASES = [
    ("one release", [compile_record(1)], ["13.4"], None),
    ("two releases: a column each", [compile_record(1), compile_record(2, "13.5", regs=16)], ["13.4", "13.5"], None),
    ("the newest record of a release decides", [compile_record(1, regs=30), compile_record(2)], ["13.4"], None),
    ("a changed header is stale", [compile_record(1, sources={**TODAY, HEADER: fx.sha("h v0")})], [],
     "cpp/harness.h changed since compile record"),
    ("another program changing is not stale", [compile_record(1, sources={**TODAY, OTHER: fx.sha("other v0")})],
     ["13.4"], None),
    ("no build for the target", [compile_record(1, target="sm_90")], [], "no compile record has a built tilefatbin"),
    ("a kernel without an entry", [compile_record(1, kernels=("tile_max_native",))], [],
     "no res-usage entry for tile_sum_native"),
    ("a broken seal never counts", [compile_record(1).model_copy(update={"passed": False})], [],
     "no compile record holds"),
    ("no compile record", [], [], "no compile record holds a tilefatbin build of cpp/prog.cu for sm_89"),
]


@pytest.mark.parametrize("records, releases, why", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_table_comes_from_the_compile_record_that_attests_today(records, releases, why):
    got = decide_res_usage(FRONT, records, TODAY)
    assert [str(c.release) for c in got.columns] == releases
    assert got.filled == bool(releases)
    if why:
        assert why in got.reason
        decision = gate.Decision("demo", (), res_usage=got)
        (blocker,) = decision.blockers
        assert (blocker.kind, blocker.command) == ("res-usage", "nox -s compile")
        assert "no compile record fills its res-usage table" in decision.lacking()
        assert "| ? | ? |" in got.rendered()


def test_the_rendered_table_has_the_numbers_and_names_the_record():
    one = decide_res_usage(FRONT, [compile_record(1)], TODAY).rendered()
    assert "| `tile_max_native` | reduce_max | 22 | 0 B | builtin |" in one
    assert "| `tile_sum_native` | sum | 23 | 16 B | builtin |" in one
    assert "compile record `FIXTURE-20260901T120100Z-compile-00000001` (nvcc 13.4.90, sm_89, --tilefatbin)" in one
    two = decide_res_usage(FRONT, [compile_record(1), compile_record(2, "13.5", regs=16)], TODAY).rendered()
    assert two.startswith("| Kernel | Reduction | REG (13.4) | SHARED (13.4) | REG (13.5) | SHARED (13.5) "
                          "| Mechanism |")
    assert "| `tile_max_native` | reduce_max | 22 | 0 B | 16 | 0 B | builtin |" in two
    assert "Source (13.5): " in two
    assert "?" not in two


def test_a_lesson_without_a_table_gets_none():
    assert decide_res_usage(FRONT.model_copy(update={"res_usage": None}), [compile_record(1)], TODAY) is None


def test_the_table_program_must_be_a_lesson_program(repo_root):
    lesson = lessons.load(repo_root, "tile-reduction-spike")
    text = lesson.text.replace("  program: cpp/tile_spike.cu\n  target", "  program: cpp/nope.cu\n  target")
    with pytest.raises(lessons.RecordError, match="res_usage.program: 'cpp/nope.cu' is not in programs"):
        lessons.parse(lesson.shown, text)


# --- the spike note, end to end, from its committed records ----------------------------------

SPIKE = "tile-reduction-spike"
RECORDS = ["20261129T122301Z-compile-917a22af", "20261129T123040Z-run-92fcbf0f", "20261129T123225Z-run-7155d66e",
           "20261129T122814Z-claims-af4906ae", "20261129T123104Z-claims-f8e0266f"]


@pytest.fixture
def spike_tree(tmp_path, committed_tree):
    """The spike note's programs, evidence and records as committed at ``conftest.COMMITTED``, the note a draft."""
    root = tmp_path / "repo"
    for folder in ("cpp", "kernels", "evidence"):
        shutil.copytree(committed_tree / folder, root / folder)
    copy_lessons_as_draft(committed_tree / "lessons", root / "lessons")  # the note as it was before publishing
    (root / "runs").mkdir()
    for name in RECORDS:
        shutil.copy(committed_tree / "runs" / f"{name}.json", root / "runs")
    for path in (committed_tree / "runs").glob("*-session-*.json"):
        shutil.copy(path, root / "runs")
    lesson = lessons.load(root, SPIKE)
    if lesson.front.status != "draft":
        pytest.skip("the spike note is published in this tree already")
    return root


def test_publish_fills_the_spike_table_and_the_audit_rederives_it(spike_tree):
    code, lines = publish_cmd.publish(spike_tree, SPIKE, dry_run=True)
    shown = "\n".join(lines)
    assert code == 0, shown
    assert "res-usage table (cpp/tile_spike.cu sm_89): filled from 20261129T122301Z-compile-917a22af (13.4)" in shown
    assert "| `tile_sum_via_scan` | additive, via two scans | 48 | 6144 B |" in shown
    before = (spike_tree / "lessons" / f"{SPIKE}.md").read_text()

    assert publish_cmd.publish(spike_tree, SPIKE)[0] == 0
    lesson = lessons.load(spike_tree, SPIKE)
    table = lessons.block_text(lesson.shown, lesson.body, lessons.RES_USAGE)
    assert "?" not in table
    assert "| `tile_max_native` | reduce_max (builtin) | 22 | 16 B |" in table
    assert "compile record `20261129T122301Z-compile-917a22af` (nvcc 13.4.92, sm_89, --tilefatbin)" in table
    outside = before.split("<!-- res-usage:begin -->")[1].split("<!-- res-usage:end -->")[1]
    assert lesson.body.endswith(outside)  # nothing after the table changed

    def spike_findings():
        result = audit_mod.audit(spike_tree)
        return [f for f in result.findings if f.file == f"lessons/{SPIKE}.md"]
    assert spike_findings() == []
    path = spike_tree / "lessons" / f"{SPIKE}.md"
    path.write_text(path.read_text().replace("| 48 | 6144 B |", "| 40 | 4096 B |"))
    (finding,) = spike_findings()
    assert finding.rule == "lesson-rederive"
    assert "body res-usage table line 4" in finding.reason


def test_a_published_table_rests_on_the_compile_records_it_cites():
    old, new = compile_record(1), compile_record(2, regs=30)
    assert [c.run_id for c in decide_res_usage(FRONT, [old, new], TODAY).columns] == [new.run_id]  # the newest
    got = decide_res_usage(FRONT, [old, new], TODAY, cited=[old.run_id])
    assert got.holds
    assert [c.run_id for c in got.columns] == [old.run_id]
    assert "| 22 | 0 B |" in got.rendered()
    stale = compile_record(3, "13.5", sources={**TODAY, HEADER: fx.sha("h v0")})
    got = decide_res_usage(FRONT, [old, new, stale], TODAY, cited=[old.run_id, stale.run_id])
    assert got.filled
    assert not got.holds
    assert "cpp/harness.h changed since compile record" in got.reason
    (blocker,) = gate.Decision("demo", (), res_usage=got).blockers
    assert blocker.kind == "res-usage"
    assert "nox -s publish -- demo --republish" in blocker.command
    gone = decide_res_usage(FRONT, [new], TODAY, cited=[old.run_id])
    assert not gone.holds
    assert (f"the cited compile record {old.run_id} is not among the compile records that count" \
        in gone.reason)
    assert not decide_res_usage(FRONT, [new], TODAY, cited=[]).holds


def test_a_published_table_names_the_records_it_rests_on(committed_tree):
    """The spike note as committed cites one compile record per release in its table's source lines."""
    cited = lessons.cited(lessons.load(committed_tree, SPIKE))
    assert cited.compile == ("20261201T092854Z-compile-54eadc13", "20261201T103744Z-compile-5139b75a",
                             "20261201T093220Z-compile-b56228e2")
    one = decide_res_usage(FRONT, [compile_record(1)], TODAY).rendered()
    lesson = lessons.load(committed_tree, SPIKE)
    body = lesson.body.replace(lessons.block_text(lesson.shown, lesson.body, lessons.RES_USAGE), "\n" + one)
    assert lessons.cited(replace(lesson, body=body)).compile == ("FIXTURE-20260901T120100Z-compile-00000001",)
