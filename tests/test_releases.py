"""The release axis in the judge: which records decide a lesson's rows (only the lock's cuda-tile release), and
the program x release matrix, the verified releases and the lesson's range in words (FIXTURE records)."""

from __future__ import annotations

import fixture_records as fx
import pytest
from test_gate import CU, FRONT, PY, TABLE, TODAY, World

from tileproof import lesson_text
from tileproof.judge import gate, release_matrix, releases
from tileproof.judge.releases import ReleaseKey
from tileproof.records.models import ProgramFailure
from tileproof.records.tolerances import entry_digest

LOCK = ReleaseKey("1.7.0", True)
TODAY_LOCKED = gate.Today(TODAY, cuda_tile=LOCK)
ENTRIES = {"matmul": entry_digest("matmul", 1e-4, 1e-3)}
"""What a run_version 4 record attests of the tolerance table (its check's entry)."""
REFUSAL = ProgramFailure(type="TypeError", message="Unexpected parameter descriptor type 'ConstantConstraint' for "
                                                   "non-constant parameter `tm` at position 3\nsecond line")


def old(w, n=1, **kw):
    """A run_version 1 record (before the axis): cuda-tile named only in its environment."""
    return w.rec(n, **kw)


def on(w, n, version, in_range=True, **kw):
    return w.rec(n, cuda_tile=fx.cuda_tile(version, in_range=in_range), tolerances=ENTRIES, **kw)


def refused(w, n, version, in_range=False):
    return on(w, n, version, in_range, verdict="error", checks=[], failure=REFUSAL)


# --- which release a record was made with, and the rule -----------------------------------------------------


def test_release_of_reads_the_record_and_older_records_by_their_environment(tmp_path):
    w = World(tmp_path)
    assert releases.release_of(on(w, 1, "1.5.0", in_range=False)) == ReleaseKey("1.5.0", False)
    assert releases.release_of(old(w)) == ReleaseKey("1.7.0", True)  # before run_version 4: made from the lock
    assert releases.release_of(w.rec(program=CU)) is None  # a C++ program imports no cuda-tile
    assert str(ReleaseKey("1.4.0", False)) == "1.4.0*"
    assert str(LOCK) == "1.7.0"


@pytest.mark.parametrize(("make", "lock", "decides"), [
    (lambda w: old(w), LOCK, True),
    (lambda w: on(w, 1, "1.7.0"), LOCK, True),
    (lambda w: on(w, 1, "1.5.0"), LOCK, False),
    (lambda w: on(w, 1, "1.7.0", in_range=False), LOCK, False),
    (lambda w: on(w, 1, "1.5.0", program=CU), LOCK, True),
    (lambda w: on(w, 1, "1.5.0"), None, True),
], ids=["old-record-of-the-lock", "lock-release", "other-release", "lock-release-outside-its-range",
        "cpp-program-whatever-is-installed", "tree-without-a-lock"])
def test_only_the_locks_release_decides_rows(tmp_path, make, lock, decides):
    assert releases.decides_rows(make(World(tmp_path)), lock) is decides


def test_a_newer_failing_record_of_another_release_neither_decides_a_row_nor_blocks_publishing(tmp_path):
    w = World(tmp_path)
    recs = [old(w, 1), w.rec(2, program=CU), refused(w, 3, "1.3.0"), on(w, 4, "1.4.0", verdict="failed",
                                                                       checks=[fx.check("matmul", 1e-4, 1e-3, False)])]
    decision = gate.decide(FRONT, recs, TODAY_LOCKED, TABLE, w.read)
    assert decision.rows[0].outcome == "passed"
    assert decision.rows[0].record is recs[0]
    assert decision.publishable, decision.blockers
    # without the rule (no lock known) the newest record decides: the 1.4 failure would block
    unlocked = gate.decide(FRONT, recs, TODAY, TABLE, w.read)
    assert unlocked.rows[0].outcome == "failed"
    assert not unlocked.publishable


def test_a_newer_pass_of_another_release_does_not_decide_either(tmp_path):
    w = World(tmp_path)
    recs = [old(w, 1, verdict="failed", checks=[fx.check("matmul", 1e-4, 1e-3, False)]), on(w, 2, "1.6.0")]
    row = gate.decide(FRONT, recs, TODAY_LOCKED, TABLE, w.read).rows[0]
    assert row.outcome == "failed"
    assert row.record is recs[0]


def test_only_other_releases_leave_the_row_without_a_record(tmp_path):
    w = World(tmp_path)
    row = gate.decide(FRONT, [on(w, 1, "1.6.0")], TODAY_LOCKED, TABLE, w.read).rows[0]
    assert row.outcome == "no-record"


# --- the matrix ---------------------------------------------------------------------------------------------


def lesson(w, recs):
    return release_matrix.lesson_releases(FRONT, recs, TODAY_LOCKED, TABLE, w.read)


def test_cells_say_passed_failed_stale_and_not_run(tmp_path):
    w = World(tmp_path)
    recs = [refused(w, 1, "1.3.0"), on(w, 2, "1.4.0", in_range=False), on(w, 3, "1.5.0", sources={PY: fx.sha("v0")}),
            on(w, 4, "1.6.0", verdict="no-gpu", gpu=None, query=None), old(w, 5)]
    lr = lesson(w, recs)
    keys = [ReleaseKey("1.3.0", False), ReleaseKey("1.4.0", False), ReleaseKey("1.5.0", True),
            ReleaseKey("1.6.0", True), LOCK]
    assert list(lr.releases) == keys
    (row,) = lr.rows
    assert row.program == PY
    assert [row.cells[k].state for k in keys] == ["failed", "passed", "stale", "not-run", "passed"]
    assert row.cells[keys[0]].failure == REFUSAL
    assert row.cells[keys[0]].record is recs[0]
    assert row.cells[keys[0]].text() == f"failed: TypeError: {REFUSAL.first_line}"
    assert row.cells[keys[0]].text(20) == "failed: TypeError..."


def test_a_failed_check_is_its_cells_reason(tmp_path):
    w = World(tmp_path)
    lr = lesson(w, [on(w, 1, "1.5.0", verdict="failed", checks=[fx.check("matmul", 1e-4, 1e-3, False)])])
    cell = lr.rows[0].cells[ReleaseKey("1.5.0", True)]
    assert cell.state == "failed"
    assert cell.failure is None
    assert "verdict failed" in cell.text()


def test_a_failure_on_sources_that_changed_since_is_stale(tmp_path):
    w = World(tmp_path)
    rec = w.rec(1, cuda_tile=fx.cuda_tile("1.3.0", in_range=False), verdict="error", checks=[], failure=REFUSAL,
                sources={PY: fx.sha("py v0")}, tolerances=ENTRIES)
    assert lesson(w, [rec]).rows[0].cells[ReleaseKey("1.3.0", False)].state == "stale"


def test_verified_releases_and_the_range_in_words(tmp_path):
    w = World(tmp_path)
    recs = [refused(w, 1, "1.3.0"), on(w, 2, "1.4.0", in_range=False), on(w, 3, "1.6.0"), old(w, 4)]
    lr = lesson(w, recs)
    verified = lr.verified()
    assert [(v.cuda_tile, v.tileiras_in_range) for v in verified] == [("1.4.0", False), ("1.6.0", True),
                                                                       ("1.7.0", True)]
    assert verified[0].run_ids == [recs[1].run_id]
    assert verified[0].tileiras == ["13.4.92"]
    assert verified[-1].run_ids == [recs[3].run_id]  # an older record: its toolchain's tileiras
    assert lr.holds() == (f"demo: verified on cuda-tile 1.4.0*, 1.6.0, 1.7.0; the oldest is 1.4.0*; 1.3.0* refused "
                          f"it: {PY} failed: TypeError: {REFUSAL.first_line} (run {recs[0].run_id})")
    assert release_matrix.verified(FRONT, recs, TODAY_LOCKED, TABLE, w.read) == tuple(verified)


def test_the_range_in_words_without_an_older_refusal_or_any_pass(tmp_path):
    w = World(tmp_path)
    assert lesson(w, [old(w)]).holds() == "demo: verified on cuda-tile 1.7.0; the oldest is 1.7.0; no older " \
                                          "release refused it"
    assert lesson(w, [refused(w, 1, "1.3.0")]).holds() == "demo: verified on no cuda-tile release"


def test_a_release_is_verified_only_when_every_python_program_passed(tmp_path):
    w, other = World(tmp_path), "kernels/other.py"
    two = FRONT.model_copy(update={
        "programs": [*FRONT.programs, FRONT.programs[0].model_copy(update={"path": other})],
        "results": [*FRONT.results, FRONT.results[0].model_copy(update={"program": other})]})
    today = gate.Today({**TODAY, other: fx.sha("other")}, cuda_tile=LOCK)

    def rec(n, program, **kw):
        sources = {program: today[program], "kernels/harness.py": TODAY["kernels/harness.py"]}
        return fx.run_record(n=n, program=program, front=two, sources=sources, query=w.h200(), tolerances=ENTRIES,
                             cuda_tile=fx.cuda_tile("1.6.0"), **kw)

    good = rec(1, PY, checks=[fx.check("matmul", 1e-4, 1e-3)])
    lr = release_matrix.lesson_releases(two, [good, rec(2, other, checks=[], verdict="error", failure=REFUSAL)],
                                        today, TABLE, w.read)
    assert [r.program for r in lr.rows] == [PY, other]
    assert [r.cells[ReleaseKey("1.6.0", True)].state for r in lr.rows] == ["passed", "failed"]
    assert lr.verified() == []
    both = release_matrix.lesson_releases(two, [good, rec(2, other, checks=[fx.check("matmul", 1e-4, 1e-3)])],
                                          today, TABLE, w.read)
    assert [v.run_ids for v in both.verified()] == [[good.run_id, f"FIXTURE-20260901T120200Z-run-{2:08x}"]]


def test_the_status_lines(tmp_path):
    w = World(tmp_path)
    lines = release_matrix.lines([lesson(w, [refused(w, 1, "1.3.0"), old(w, 2)])])
    assert lines[0].split() == ["LESSON", "PROGRAM", "1.3.0*", "1.7.0"]
    assert lines[1].split()[:4] == ["demo", PY, "failed:", "TypeError:"]
    assert lines[1].endswith("passed")
    assert lines[2].startswith("*: run with a tileiras outside the range")
    assert lines[3].startswith("demo: verified on cuda-tile 1.7.0")
    assert release_matrix.lines([lesson(w, [w.rec(1, program=CU)])]) == []


# --- publish writes the verified releases; the audit re-derives them --------------------------------------------

LESSON = "day79-cutile"


def axis_record(root, n, program, version, in_range=True, failure=None):
    """A FIXTURE run record of ``program`` with cuda-tile ``version``, attesting the tree's files as they are."""
    from tileproof.records import lessons
    from tileproof.records.tolerances import entry_digests, load_table

    front = lessons.load(root, LESSON).front
    checks = next(p.checks for p in front.programs if p.path == program)
    table = load_table(root)
    query = World(root).put(f"evidence/FIXTURE-axis-{n}/nvidia-smi-query.csv", fx.query_csv(fx.H200))
    sources = {p: fx.sha((root / p).read_bytes()) for p in (program, "kernels/harness.py")}
    return fx.run_record(n=100 + n, program=program, front=front, sources=sources, query=query,
                         checks=[] if failure else [fx.check(c, *table[c]) for c in checks],
                         tolerances=entry_digests(table, set(checks)), failure=failure,
                         cuda_tile=fx.cuda_tile(version, in_range=in_range), verdict="error" if failure else "passed")


def judged(root):
    """The lesson's verdict (what status, publish and the audit say of it)."""
    from tileproof.gather.tree import Tree
    from tileproof.records import lessons

    return Tree.load(root).verdict(lessons.load(root, LESSON))


def stated(root):
    from tileproof.judge.verdict import releases_text
    from tileproof.records import lessons

    return releases_text(lessons.load(root, LESSON).front)


def test_publish_states_the_verified_releases_and_the_audit_re_derives_them(tree, capsys):
    """publish writes the list; a published lesson's list is re-derived from the records it cites (the audit,
    and plain ``publish``, name a release those records do not give); newer evidence of another release is
    a note (republish to refresh), never a finding, and ``--republish`` writes it."""
    from tileproof.__main__ import main
    from tileproof.records import lessons
    from tileproof.records.store import write_record

    (tree / "constraints.txt").write_text("cuda-tile==1.7.0\n")
    assert main(["publish", LESSON, "--root", str(tree)]) == 0
    front = lessons.load(tree, LESSON).front
    assert [(v.cuda_tile, v.tileiras_in_range) for v in front.cuda_tile_verified] == [("1.7.0", True)]
    lock_list = stated(tree)

    python = [p.path for p in front.programs if p.path.endswith(".py")]
    newer = [axis_record(tree, 1, python[0], "1.3.0", False, REFUSAL)]
    newer += [axis_record(tree, 2 + i, p, "1.4.0", in_range=False) for i, p in enumerate(python)]
    for rec in newer:
        write_record(tree, rec)
    # newer records of other releases: the rows still rest on 1.7.0, the stated list still holds, and the
    # newest evidence would state 1.4.0* too: a note
    verdict = judged(tree)
    assert verdict.valid
    assert verdict.rederived == ()
    assert verdict.note() is not None
    assert [str(ReleaseKey(v.cuda_tile, v.tileiras_in_range)) for v in verdict.fresh.cuda_tile_verified] == \
        ["1.4.0*", "1.7.0"]
    capsys.readouterr()
    assert main(["publish", LESSON, "--root", str(tree)]) == 0
    assert "newer evidence" in capsys.readouterr().out
    assert main(["publish", LESSON, "--root", str(tree), "--republish"]) == 0
    front = lessons.load(tree, LESSON).front
    assert [str(ReleaseKey(v.cuda_tile, v.tileiras_in_range)) for v in front.cuda_tile_verified] == ["1.4.0*", "1.7.0"]
    assert front.cuda_tile_verified[0].run_ids == [r.run_id for r in newer[1:]]
    assert all(r.run_id.startswith("FIXTURE-20260901T12") and not r.run_id.startswith("FIXTURE-20260901T14")
               for r in front.results if r.run_id)  # every row still decided by a 1.7.0 record
    assert judged(tree).valid
    assert judged(tree).note() is None
    capsys.readouterr()
    assert main(["status", LESSON, "--root", str(tree)]) == 0
    out = capsys.readouterr().out
    assert f"  {LESSON}  {python[0]}  failed: TypeError: Unexpected parameter" in out
    assert f"{LESSON}: verified on cuda-tile 1.4.0*, 1.7.0; the oldest is 1.4.0*; 1.3.0* refused it: " in out

    # a release the cited records do not give is a finding: one that failed, one run outside its range stated
    # as inside
    lesson = lessons.load(tree, LESSON)
    both = lesson.front.cuda_tile_verified
    claimed = both[0].model_copy(update={"cuda_tile": "1.3.0", "run_ids": [newer[0].run_id]})
    for wrong in ([claimed, *both], [both[0].model_copy(update={"tileiras_in_range": True}), both[1]]):
        wrote = lesson.front.model_copy(update={"cuda_tile_verified": wrong})
        lesson.path.write_text(lesson_text.render(lesson, wrote))
        found = judged(tree).findings()
        assert [rule for rule, _ in found] == ["lesson-rederive"], found
        assert found[0][1].startswith(f"cuda_tile_verified: the lesson says {stated(tree)}, the records give ")
    # a lesson that states none (published before the axis) claims nothing there: no finding, no note (a
    # growing course never turns a true lesson red), and republish adds them
    lesson.path.write_text(lesson_text.render(lesson, lesson.front.model_copy(update={"cuda_tile_verified": []})))
    assert "cuda_tile_verified" not in lesson.path.read_text()
    verdict = judged(tree)
    assert verdict.valid
    assert verdict.findings() == []
    assert verdict.note() is None
    assert verdict.states_releases
    assert main(["publish", LESSON, "--root", str(tree), "--republish"]) == 0
    assert len(lessons.load(tree, LESSON).front.cuda_tile_verified) == 2
    assert lock_list in stated(tree)


def test_the_audit_names_a_release_the_record_itself_contradicts(tmp_path):
    from tileproof.judge.audit.rules.releases import release_issues

    w = World(tmp_path)
    assert release_issues(on(w, 1, "1.5.0", in_range=False)) == []
    assert release_issues(old(w)) == []
    forged = on(w, 2, "1.5.0")
    forged = forged.model_copy(update={"cuda_tile": forged.cuda_tile.model_copy(update={"version": "1.4.0",
                                                                                      "tileiras": "13.3.36"})})
    assert [reason for _rule, reason in release_issues(forged)] == [
        "cuda_tile.version 1.4.0, environment cuda-tile 1.5.0",
        "cuda_tile.tileiras 13.3.36, toolchain tileiras 13.4.92"]
