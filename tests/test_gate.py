"""The gate as a pure function over a table of cases (FIXTURE records built in code)."""

import inspect
from datetime import timedelta

import fixture_records as fx
import pytest

from tileproof.judge import gate
from tileproof.judge.gate import Bound, decide
from tileproof.records.lessons import Cited
from tileproof.records.models import (
    FileDigest,
    Hardware,
    LessonFront,
    LessonProgram,
    ResultRow,
)

PY, CU, HELPER = "kernels/prog.py", "cpp/prog.cu", "kernels/harness.py"
FRONT = LessonFront(
    lesson_version=1, id="demo", title="Demo", status="draft",
    programs=[LessonProgram(path=PY, checks=["matmul"]), LessonProgram(path=CU, checks=["matmul"])],
    hardware=Hardware(),
    results=[
        ResultRow(program=PY, check="matmul", bound="rtol 1e-4, atol 1e-3"),
        ResultRow(program=CU, check="matmul", bound="rtol 1e-4, atol 1e-3"),
        ResultRow(program=PY, check="gate", bound="exit 1", optional=True, hardware="cc < 8.0"),
    ],
)
TODAY = {PY: fx.sha("py v1"), CU: fx.sha("cu v1"), HELPER: fx.sha("harness v1")}
TABLE = {"matmul": Bound(1e-4, 1e-3)}
BINARY = FileDigest(path="build/x/prog", sha256=fx.sha("bin"))


class World:
    """Evidence files in a temp dir, read back only through ``read``."""

    def __init__(self, root):
        self.root = root

    def put(self, rel, data):
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return fx.transcript(rel, data)

    def read(self, rel):
        path = self.root / rel
        return path.read_bytes() if path.is_file() else None

    def h200(self):
        return self.put("evidence/s-h200/nvidia-smi-query.csv", fx.query_csv(fx.H200))

    def t4(self):
        return self.put("evidence/s-t4/nvidia-smi-query.csv", fx.query_csv(fx.T4))

    def rec(self, n=1, program=PY, **kw):
        """A passing sm_90 record unless ``kw`` says otherwise."""
        if "query" not in kw:  # (setdefault would rewrite the file even when a query is given)
            kw["query"] = self.h200()
        kw.setdefault("sources", {program: TODAY[program], HELPER: TODAY[HELPER], "lessons/demo.md": "any"})
        kw.setdefault("checks", [fx.check("matmul", 1e-4, 1e-3)])
        if program.endswith(".cu"):
            kw.setdefault("binary", BINARY)
        return fx.run_record(n=n, program=program, front=FRONT, **kw)

    def t4_gated(self, n=1, **kw):
        if "query" not in kw:
            kw["query"] = self.t4()
        return self.rec(n, gpu=fx.T4, verdict="gated", checks=[], **kw)


def _edited(w):
    q = w.h200()
    (w.root / q.path).write_text(fx.query_csv(fx.H200) + "# edited\n")
    return [w.rec(query=q)]


def _tampered(w):
    good = w.rec(1)
    bad = w.rec(2, verdict="failed").model_copy(update={"verdict": "passed"})  # seal no longer matches
    return [good, bad], bad.run_id


# (id, row index, records(world), expected outcome, text expected in the reason)
CUDA_HOME_HAZARD = fx.problem("hazard-var", "CUDA_HOME", "CUDA_HOME=/usr/local/cuda names CUDA 12.6")

CASES = [
    ("passing-sm90", 0, lambda w: [w.rec()], "passed", "run FIXTURE-"),
    ("sm75-gated", 0, lambda w: [w.t4_gated()], "gated", "only run on Tesla T4 (sm_75, cc 7.5)"),
    ("failed", 0, lambda w: [w.rec(verdict="failed", checks=[fx.check("matmul", 1e-4, 1e-3, passed=False)])],
     "failed", "verdict failed"),
    ("no-gpu-verdict", 0, lambda w: [w.rec(verdict="no-gpu", gpu=None, query=None)], "failed", "verdict no-gpu"),
    ("check-failed-under-passed-verdict", 0,
     lambda w: [w.rec(checks=[fx.check("matmul", 1e-4, 1e-3, passed=False)])], "failed", "3/32768 mismatches"),
    ("check-missing-from-report", 0, lambda w: [w.rec(checks=[fx.check("softmax", 1e-5, 1e-6)])], "failed",
     "no check 'matmul'"),
    ("stale-source", 0, lambda w: [w.rec(sources={PY: fx.sha("py v0"), HELPER: TODAY[HELPER]})], "stale",
     "kernels/prog.py changed since run FIXTURE-20260901T120100Z-run-00000001 (commit f1c7ee0)"),
    ("stale-helper", 0, lambda w: [w.rec(sources={PY: TODAY[PY], HELPER: fx.sha("harness v0")})], "stale",
     "kernels/harness.py changed"),
    ("helper-deleted", 0, lambda w: [w.rec(sources={PY: TODAY[PY], "kernels/gone.py": fx.sha("x")})], "stale",
     "kernels/gone.py deleted"),
    ("lesson-file-edits-are-not-stale", 0,
     lambda w: [w.rec(sources={PY: TODAY[PY], "lessons/demo.md": fx.sha("old lesson")})], "passed", ""),
    ("program-list-changed", 0, lambda w: [w.rec(lesson_programs={"demo": fx.sha("old list")})], "stale",
     "program list changed"),
    ("record-not-for-this-lesson", 0, lambda w: [w.rec(lesson_programs={})], "stale", "does not attest lesson demo"),
    ("program-not-attested", 0, lambda w: [w.rec(sources={HELPER: TODAY[HELPER]})], "stale",
     "does not attest kernels/prog.py"),
    ("forged-cc-transcript-disagrees", 0,
     lambda w: [w.rec(query=w.put("evidence/s/nvidia-smi-query.csv", fx.query_csv(fx.H200, cc="7.5")))],
     "forged-cc", "nvidia-smi transcript 7.5, record 9.0"),
    ("forged-cc-runtime-disagrees", 0, lambda w: [w.rec(runtime_cc="7.5")], "forged-cc", "CUDA runtime 7.5"),
    ("forged-cc-no-runtime", 0, lambda w: [w.rec(runtime_cc=None)], "forged-cc", "CUDA runtime none"),
    ("forged-cc-report-disagrees", 0, lambda w: [w.rec(report_cc="8.6")], "forged-cc", "program report 8.6"),
    ("transcript-edited", 0, _edited, "forged-cc", "does not match its sha256"),
    ("transcript-missing", 0, lambda w: [w.rec(query=fx.transcript("evidence/gone/q.csv", "x"))], "forged-cc",
     "evidence/gone/q.csv is missing"),
    ("no-transcript", 0, lambda w: [w.rec(query=None)], "forged-cc", "no nvidia-smi --query-gpu transcript"),
    ("other-gpu-in-transcript", 0,
     lambda w: [w.rec(query=w.put("evidence/o/q.csv", fx.query_csv(dict(fx.H200, uuid="GPU-other"))))],
     "forged-cc", "lists no GPU with uuid"),
    ("missing-record", 0, lambda w: [], "no-record", "no run record for kernels/prog.py"),
    ("record-of-other-program", 0, lambda w: [w.rec(program=CU)], "no-record", ""),
    ("mixed-toolchain", 0, lambda w: [w.rec(tc=fx.toolchain(tileiras="13.3.1"))], "incoherent-toolchain",
     "mixed releases"),
    ("nvvm-of-other-release", 0, lambda w: [w.rec(tc=fx.toolchain(nvvm="13.5.2"))], "incoherent-toolchain",
     "nvvm 13.5.2"),
    ("toolchain-marked-incoherent", 0,
     lambda w: [w.rec(tc=fx.toolchain(coherent=False,
                                      problems=(fx.problem("tool-missing", "nvcc", "nvcc not found"),)))],
     "incoherent-toolchain",
     "nvcc not found"),
    ("cuda-home-hazard-in-clean-env", 0,
     lambda w: [w.rec(tc=fx.toolchain(coherent=False, problems=(CUDA_HOME_HAZARD,)))],
     "passed", ""),
    ("cuda-home-hazard-as-is", 0,
     lambda w: [w.rec(toolchain_env="as-is",
                      tc=fx.toolchain(coherent=False, problems=(CUDA_HOME_HAZARD,)))],
     "incoherent-toolchain", "CUDA_HOME"),
    ("old-text-hazard-counts-even-in-clean-env", 0,
     lambda w: [w.rec(tc=fx.toolchain(coherent=False, problems=("CUDA_HOME=/usr/local/cuda names CUDA 12.6",)))],
     "incoherent-toolchain", "CUDA_HOME"),
    ("rtol-looser-than-table", 0, lambda w: [w.rec(checks=[fx.check("matmul", 1e-3, 1e-3)])], "out-of-bounds",
     "the table allows rtol 0.0001"),
    ("atol-looser-than-table", 0, lambda w: [w.rec(checks=[fx.check("matmul", 1e-4, 1e-2)])], "out-of-bounds",
     "atol 0.01"),
    ("broken-seal-only", 0, lambda w: [w.rec(seal=False)], "no-record", "seal broken"),
    ("broken-seal-newest-is-ignored", 0, lambda w: _tampered(w)[0], "passed", "seal broken"),
    ("newest-decides", 0, lambda w: [w.rec(1), w.rec(2, verdict="failed")], "failed", "verdict failed"),
    ("newer-pass-replaces-failure", 0, lambda w: [w.rec(1, verdict="failed"), w.rec(2)], "passed", ""),
    ("newer-no-gpu-run-does-not-hide-h200-pass", 0,
     lambda w: [w.rec(1), w.rec(2, verdict="no-gpu", gpu=None, query=None)], "passed", ""),
    ("newer-t4-run-does-not-hide-h200-pass", 0, lambda w: [w.rec(1), w.t4_gated(2)], "passed", ""),
    ("cpp-passing", 1, lambda w: [w.rec(program=CU)], "passed", ""),
    ("cpp-without-binary", 1, lambda w: [w.rec(program=CU, binary=None)], "stale", "no built binary"),
    ("gate-row-without-t4", 2, lambda w: [w.rec()], "no-record", "below cc 8.0"),
    ("gate-row-with-t4", 2, lambda w: [w.rec(), w.t4_gated(2)], "passed", ""),
    ("gate-row-t4-forged", 2,
     lambda w: [w.t4_gated(query=w.put("evidence/f/q.csv", fx.query_csv(fx.T4, cc="9.0")))], "forged-cc",
     "nvidia-smi transcript 9.0"),
    ("gate-row-t4-that-ran", 2, lambda w: [w.rec(gpu=fx.T4, query=w.t4(), verdict="error", checks=[])], "failed",
     "expected the capability gate"),
    ("gate-row-stale", 2, lambda w: [w.t4_gated(sources={PY: fx.sha("py v0")})], "stale", "changed since"),
]


@pytest.mark.parametrize("row, make, outcome, text", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_row_outcome(tmp_path, row, make, outcome, text):
    w = World(tmp_path)
    decision = decide(FRONT, make(w), TODAY, TABLE, w.read)
    got = decision.rows[row]
    assert got.outcome == outcome, got.reason
    assert text in got.reason
    assert got.outcome in gate.OUTCOMES
    assert (got.command is None) == (outcome == "passed")


def test_missing_program_file(tmp_path):
    w = World(tmp_path)
    today = dict(TODAY, **{PY: None})
    got = decide(FRONT, [w.rec()], today, TABLE, w.read).rows[0]
    assert got.outcome == "missing-file"
    assert got.command.startswith("restore kernels/prog.py")


def test_check_without_table_entry(tmp_path):
    w = World(tmp_path)
    got = decide(FRONT, [w.rec()], TODAY, {}, w.read).rows[0]
    assert got.outcome == "out-of-bounds"
    assert "no bound for 'matmul'" in got.reason


def test_optional_row_never_blocks(tmp_path):
    w = World(tmp_path)
    d = decide(FRONT, [w.rec(1), w.rec(2, program=CU)], TODAY, TABLE, w.read)
    assert [r.outcome for r in d.rows] == ["passed", "passed", "no-record"]
    assert d.publishable
    assert d.missing == []


def test_one_missing_row_blocks(tmp_path):
    w = World(tmp_path)
    d = decide(FRONT, [w.rec(1)], TODAY, TABLE, w.read)
    assert not d.publishable
    assert [(r.row.program, r.outcome) for r in d.missing] == [(CU, "no-record")]
    assert d.missing[0].command == "on a GPU of compute capability >= 8.0: nox -s compile && nox -s run-gpu -- demo"
    with pytest.raises(ValueError):
        d.published_front(FRONT)


def test_published_front(tmp_path):
    w = World(tmp_path)
    py, cu, t4 = w.rec(1), w.rec(2, program=CU), w.t4_gated(3)
    front = decide(FRONT, [py, cu, t4], TODAY, TABLE, w.read).published_front(FRONT)
    assert front.status == "published"
    assert front.hardware == Hardware(gpu="NVIDIA H200", compute_capability="9.0", driver="580.95.05",
                                      cuda="13.4.92", tileiras="13.4.92", cuda_tile="1.7.0", run_id=cu.run_id)
    assert [r.run_id for r in front.results] == [py.run_id, cu.run_id, t4.run_id]
    assert front.results[0].result.startswith("passed: max abs err 2.5e-05")
    assert front.results[2].result == "gated, exit 1 (Tesla T4, cc 7.5)"
    assert front.programs == FRONT.programs
    assert front.id == FRONT.id


def test_evidence_and_lines(tmp_path):
    w = World(tmp_path)
    py = w.rec(1)
    d = decide(FRONT, [py], TODAY, TABLE, w.read)
    assert d.evidence == {PY: py.run_id}
    assert str(d.missing[0]) == f"{CU} matmul: no-record: no run record for {CU}"


def test_gate_reads_nothing_but_its_arguments(tmp_path):
    """Pure: same inputs, same answer; evidence only through the reader; no switches."""
    w = World(tmp_path)
    records = [w.rec()]
    seen = []

    def reader(path):
        seen.append(path)
        return w.read(path)

    first = decide(FRONT, records, TODAY, TABLE, reader)
    assert first == decide(FRONT, records, TODAY, TABLE, reader)
    assert seen
    assert all(p.startswith("evidence/") for p in seen)
    # Inputs only, no switch: ``signals`` is the tree's plausibility signals (data about other records).
    assert list(inspect.signature(decide).parameters) == ["front", "records", "today", "table", "read_evidence",
                                                          "signals"]
    source = inspect.getsource(gate)
    assert "os.environ" not in source
    assert "open(" not in source


def test_cc_tuple():
    assert gate.cc_tuple("9.0") == (9, 0)
    assert gate.cc_tuple("12.1") == (12, 1)
    assert gate.cc_tuple("10.0") > gate.cc_tuple("9.0")
    assert gate.cc_tuple("") is None
    assert gate.cc_tuple("nine") is None
    assert gate.cc_tuple(None) is None


def test_cc_and_sm_convert_both_ways():
    from tileproof.records.capability import below_tile, cc_of, sm_of

    assert sm_of("9.0") == "sm_90"
    assert sm_of("12.1") == "sm_121"
    assert sm_of("10.0") == "sm_100"
    assert cc_of("sm_90") == "9.0"
    assert cc_of("sm_121") == "12.1"
    assert cc_of("sm_100") == "10.0"
    assert all(cc_of(sm_of(cc)) == cc for cc in ("7.5", "8.0", "8.9", "9.0", "10.0", "12.1"))
    assert below_tile("7.5")
    assert not below_tile("8.0")
    assert not below_tile(None)
    assert not below_tile("x")
    with pytest.raises(ValueError):
        sm_of("nine")
    with pytest.raises(ValueError):
        cc_of("compute_90")


# --- a published lesson, decided from the records it cites ---------------------------------------------

def _failed(w, n, **kw):
    return w.rec(n, verdict="failed", checks=[fx.check("matmul", 1e-4, 1e-3, passed=False)], **kw)


def _run_id(n):
    """The run id ``fx.run_record(n=n)`` gives."""
    return f"FIXTURE-{fx.T0 + timedelta(minutes=n):%Y%m%dT%H%M%SZ}-run-{n:08x}"


# (id, records(world), the cited record's n (None: the row cites nothing), outcome, the deciding record's n, reason)
CITED = [
    ("the-cited-record-passes", lambda w: [w.rec(1)], 1, "passed", 1, "run FIXTURE-"),
    ("a-newer-pass-moves-nothing", lambda w: [w.rec(1), w.rec(2)], 1, "passed", 1, "run FIXTURE-"),
    ("a-newer-failure-overturns-it", lambda w: [w.rec(1), _failed(w, 2)], 1, "failed", 2,
     "a newer run than the cited FIXTURE-20260901T120100Z-run-00000001 failed: verdict failed"),
    ("a-newer-run-out-of-bounds-overturns-it",
     lambda w: [w.rec(1), w.rec(2, checks=[fx.check("matmul", 1e-3, 1e-3)])], 1, "failed", 2, "the table allows"),
    ("an-older-failure-is-history", lambda w: [_failed(w, 1), w.rec(2)], 2, "passed", 2, "run FIXTURE-"),
    ("a-newer-failure-of-other-inputs-says-nothing",
     lambda w: [w.rec(1), _failed(w, 2, sources={PY: fx.sha("py v0"), HELPER: TODAY[HELPER]})], 1, "passed", 1, ""),
    ("a-newer-run-without-a-gpu-says-nothing",
     lambda w: [w.rec(1), w.rec(2, verdict="no-gpu", gpu=None, query=None)], 1, "passed", 1, ""),
    ("a-newer-run-below-8-is-another-class", lambda w: [w.rec(1), w.t4_gated(2)], 1, "passed", 1, ""),
    ("a-newer-failure-with-a-forged-cc-says-nothing",
     lambda w: [w.rec(1), _failed(w, 2, query=w.t4())], 1, "passed", 1, ""),
    ("the-cited-record-is-gone", lambda w: [w.rec(2)], 1, "no-record", None,
     "the cited run FIXTURE-20260901T120100Z-run-00000001 is not among the records that count"),
    ("the-cited-record-is-stale", lambda w: [w.rec(1, sources={PY: fx.sha("py v0"), HELPER: TODAY[HELPER]})], 1,
     "stale", 1, "kernels/prog.py changed since run"),
    ("a-row-citing-nothing-passes-nothing", lambda w: [w.rec(1)], None, "no-record", None,
     "lessons/demo.md cites no run for this row (the newest evidence passed: republish)"),
    ("a-row-citing-nothing-says-what-the-evidence-says", lambda w: [w.t4_gated(1)], None, "gated", None,
     "cites no run for this row; newest evidence: only run on Tesla T4"),
]


@pytest.mark.parametrize("records, cited, outcome, deciding, why", [c[1:] for c in CITED], ids=[c[0] for c in CITED])
def test_a_published_row_rests_on_its_cited_record(tmp_path, records, cited, outcome, deciding, why):
    w = World(tmp_path)
    recs = records(w)
    row = FRONT.results[0].model_copy(update={"run_id": _run_id(cited) if cited is not None else None})
    got = gate.decide_row(FRONT, row, recs, TODAY, TABLE, w.read, cited=True)
    assert got.outcome == outcome, got.reason
    assert why in got.reason, got.reason
    assert (got.record.run_id if got.record else None) == (_run_id(deciding) if deciding is not None else None)


def test_a_row_class_is_its_program_and_its_hardware(tmp_path):
    w = World(tmp_path)
    required, gate_row = gate.RowClass.of(FRONT.results[0]), gate.RowClass.of(FRONT.results[2])
    h200, t4, none = w.rec(1), w.t4_gated(2), w.rec(3, verdict="no-gpu", gpu=None, query=None)
    assert [required.admits(r) for r in (h200, t4, none)] == [True, False, True]
    assert [gate_row.admits(r) for r in (h200, t4, none)] == [False, True, False]
    assert not required.admits(w.rec(4, program=CU))


def test_the_newest_evidence_and_the_cited_record_part_ways(tmp_path):
    """The draft decision takes the newest record of the row's class; the published lesson keeps its own."""
    w = World(tmp_path)
    recs = [w.rec(1), w.rec(2)]
    front = FRONT.model_copy(update={"status": "published", "results": [
        r.model_copy(update={"run_id": recs[0].run_id}) if not r.optional else r for r in FRONT.results]})
    newest = decide(front, recs, TODAY, TABLE, w.read)
    cited = gate.decide_cited(front, Cited(()), recs, TODAY, TABLE, w.read)
    assert newest.rows[0].record.run_id == recs[1].run_id
    assert cited.rows[0].record.run_id == recs[0].run_id
    assert cited.rows[0].outcome == newest.rows[0].outcome == "passed"
