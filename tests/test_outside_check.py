"""A verdict that does not take the program's word: the outputs a program hands over, checked by tileproof in a
process of its own (runner.outside_check, runner.outside_worker), and what the record and the gate make of it.

The module's one session (``ran``) runs real programs through ``tileproof run`` under a fake GPU: nvidia-smi answers
with the captured H200 query, and ``tests/data/fake_gpu_site`` (on PYTHONPATH) is a numpy-backed cupy plus a numpy
``cuda.tile.launch``, so the course programs run on the CPU end to end. The hostile programs are real files in the
tree's ``kernels/``: one prints a well-formed passing report and exits 0 without computing anything; one hands over
outputs that are wrong; one hands over NaN, Inf or all-equal outputs.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import fixture_records as fx
import numpy as np
import pytest
from conftest import cli_args, fake_nvidia_smi, sources_tree
from one_freeze import frozen, pip_freeze_once  # noqa: F401  # pip_freeze_once: used by pytestmark

from tileproof.commands import run as run_cmd
from tileproof.judge import gate
from tileproof.records import handover, models, tolerances
from tileproof.records.models import OutsideCheck, OutsideVerdict, RunRecord
from tileproof.records.store import load_records, new_run_id
from tileproof.runner import capture, outside_check, outside_worker
from tileproof.runner.wall import PROGRAM_ID

REPO = Path(__file__).resolve().parents[1]
QUERY = REPO / "tests" / "data" / "gpu" / "nvidia-smi-query.csv"
FAKE_GPU = REPO / "tests" / "data" / "fake_gpu_site"
RUNS = REPO / "runs"
pytestmark = pytest.mark.usefixtures("pip_freeze_once")


PASSING_REPORT = '''
import json, sys
report = sys.argv[sys.argv.index("--report") + 1]
check = {"name": "vector_add", "shape": [98765], "dtype": "float32", "rtol": 1.1920928955078125e-07, "atol": 0.0,
         "checked": 98765, "mismatches": 0, "max_abs_err": 0.0, "max_rel_err": 0.0, "first_failure": None,
         "passed": True}
with open(report, "w") as f:
    json.dump({"report_version": 1, "program": "kernels/liar.py", "seed": 1,
               "device": {"name": "NVIDIA H200", "compute_capability": "9.0"}, "gate": "ok",
               "gate_message": "device: NVIDIA H200, compute capability 9.0 (sm_90): ok",
               "checks": [check], "passed": True}, f)
print("check vector_add: PASS")
'''

HANDS_OVER = '''
from pathlib import Path
import numpy as np
rng = np.random.default_rng(1)
a = rng.uniform(-1, 1, 98765).astype(np.float32)
b = rng.uniform(-1, 1, 98765).astype(np.float32)
out = OUTPUT
folder = Path(report).parent
files = {}
for key, array in (("output", out), ("a", a), ("b", b)):
    np.save(folder / f"vector_add.{key}.npy", array, allow_pickle=False)
    files[key] = {"file": f"vector_add.{key}.npy", "dtype": array.dtype.str, "shape": list(array.shape)}
output = files.pop("output")
(folder / "handover.json").write_text(json.dumps({"handover_version": 1, "program": "kernels/liar.py",
    "checks": [{"name": "vector_add", "output": output, "inputs": files}]}))
'''
"""Hands over by hand (no harness): the files and manifest the harness would write."""


def write_liar(root: Path, name: str = "liar", body: str = "") -> None:
    """``kernels/<name>.py``: a program (it names AOT_SIGNATURES) that launches no kernel, writes a passing
    report and exits 0, after ``body``."""
    text = f"AOT_SIGNATURES = {{}}\n{PASSING_REPORT}\n{body}\nsys.exit(0)\n"
    (root / "kernels" / f"{name}.py").write_text(text.replace("kernels/liar.py", f"kernels/{name}.py"))


WRONG_OUTPUTS = [
    ("a - b", "mismatch"),                                          # computed, but not what the check is
    ("np.zeros_like(a)", "all-equal"),                              # nothing computed at all
    ("a + b + np.float32(1e-3)", "mismatch"),                       # close, beyond one ulp
]
NON_FINITE_OUTPUTS = [
    ("np.where(np.arange(98765) == 7, np.float32('nan'), a + b).astype(np.float32)", "non-finite"),
    ("np.where(np.arange(98765) == 7, np.float32('inf'), a + b).astype(np.float32)", "non-finite"),
    ("np.full(98765, 0.5, np.float32)", "all-equal"),
]
HANDED_OVER = [output for output, _ in WRONG_OUTPUTS + NON_FINITE_OUTPUTS]
"""The outputs the liars below hand over for vector_add: each is ``kernels/liar_<i>.py`` (``liar_of``)."""


def liar_of(output: str) -> str:
    return f"liar_{HANDED_OVER.index(output)}"


@dataclass(frozen=True)
class Session:
    """The module's one run session: its tree, its run record of each program (by stem) and how many checkers it
    started."""

    root: Path
    records: dict[str, RunRecord]
    checkers_started: int


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Session:
    """The course's sources in a temporary repository, an H200 nvidia-smi and the fake GPU on PYTHONPATH, the
    hostile programs below written beside the course's, and one ``tileproof run`` of them all (each program a step
    and a record of its own, each handover a job for the session's one checker). Read only: each test judges its
    program's record."""
    root = sources_tree(tmp_path_factory.mktemp("session"))
    bin_dir = fake_nvidia_smi(root.parent / "fakebin", QUERY)
    write_liar(root)
    for output in HANDED_OVER:
        write_liar(root, liar_of(output),
                   "report = sys.argv[sys.argv.index('--report') + 1]\n" + HANDS_OVER.replace("OUTPUT", output))
    # The program's own check compares the output with itself (``want = got``): its report passes.
    path = root / "kernels" / "vector_add.py"
    (root / "kernels" / "vector_add_self_check.py").write_text(path.read_text().replace(
        "(cp.asarray(a_host), cp.asarray(b_host), c, TILE))", "(cp.asarray(a_host), cp.asarray(a_host), c, TILE))")
        .replace('s.check("vector_add", cp.asnumpy(c), want,', 's.check("vector_add", cp.asnumpy(c), cp.asnumpy(c),'))
    stems = ["liar", *map(liar_of, HANDED_OVER), "tile_matmul_softmax", "vector_add_self_check", "vector_add",
             "fused"]
    started = []
    real = outside_check.start
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
        mp.setenv("PYTHONPATH", str(FAKE_GPU))
        mp.setattr(capture, "pip_freeze", frozen)
        mp.setattr(outside_check, "start", lambda *a, **k: started.append(a) or real(*a, **k))
        run_cmd.run(cli_args("run", *(a for stem in stems for a in ("--program", stem)), "--root", str(root)))
    found = {r.program: r for r in load_records(root) if isinstance(r, RunRecord)}
    return Session(root, {stem: found[f"kernels/{stem}.py"] for stem in stems}, len(started))


def test_a_program_that_prints_a_passing_report_without_computing_is_never_passed(ran):
    """The attack as tried on the landed tree: a well-formed passing report, exit 0, no kernel launched, no
    output handed over. Recorded ``unverified``: never ``passed``, and it decides no row."""
    rec = ran.records["liar"]
    assert rec.verdict == "unverified", rec.reason
    assert rec.report is not None and rec.report.passed  # the program's word, kept as it said it
    assert rec.outside is not None
    assert [(c.name, c.status, c.problem) for c in rec.outside.checks] == [("vector_add", "unverified", "no-outputs")]
    assert rec.unverified("vector_add")
    assert rec.verdict_by == "program-and-checker"


@pytest.mark.parametrize(("output", "problem"), WRONG_OUTPUTS, ids=["wrong-op", "zeros", "off-by-1e-3"])
def test_a_program_handing_over_wrong_outputs_is_checker_disagrees(ran, output, problem):
    rec = ran.records[liar_of(output)]
    assert rec.verdict == "checker-disagrees", rec.reason
    assert rec.outside is not None
    (mine,) = rec.outside.checks
    assert (mine.status, mine.problem) == ("failed", problem)
    assert mine.mismatches > 0
    assert "tileproof's own check says failed" in rec.reason
    assert (ran.root / rec.outside.manifest.path).is_file()


@pytest.mark.parametrize(("output", "problem"), NON_FINITE_OUTPUTS, ids=["nan", "inf", "all-equal"])
def test_nan_inf_and_all_equal_outputs_fail_whatever_the_report_says(ran, output, problem):
    rec = ran.records[liar_of(output)]
    assert rec.verdict == "checker-disagrees", rec.reason
    (mine,) = rec.outside.checks
    assert (mine.status, mine.problem) == ("failed", problem)


def test_a_course_program_under_the_fake_gpu_passes_both_checks(ran):
    rec = ran.records["tile_matmul_softmax"]
    assert rec.verdict == "passed", rec.reason
    assert [(c.name, c.status) for c in rec.outside.checks] == [("matmul", "passed"), ("softmax", "passed")]
    assert all(c.checked == 256 * 128 for c in rec.outside.checks)
    table = (ran.root / "kernels" / "references.py").read_bytes()
    assert rec.outside.references_sha256 == hashlib.sha256(table).hexdigest()
    manifest = handover.Handover.model_validate_json((ran.root / rec.outside.manifest.path).read_bytes())
    assert [c.name for c in manifest.checks] == ["matmul", "softmax"]


def test_a_check_compared_with_itself_is_caught(ran):
    """The program's own check compares the output with itself (``want = got``): its report passes; tileproof
    recomputes the reference from the handed-over inputs."""
    rec = ran.records["vector_add_self_check"]
    assert rec.report is not None and rec.report.passed
    assert rec.verdict == "checker-disagrees", rec.reason


# --- the worker on handed-over folders -----------------------------------------------------------------------


@pytest.fixture
def harness():
    spec = importlib.util.spec_from_file_location("handover_harness", REPO / "kernels" / "harness.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_an_output_over_the_cap_is_a_documented_sample_that_round_trips(harness, tmp_path):
    """Above the cap: every stride-th row of the output and of the row-aligned inputs, the sha256 of the whole;
    tileproof checks the sampled rows against its own reference of those rows."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1000, 64)).astype(np.float32)
    y = np.asarray(outside_worker_softmax(x), dtype=np.float32)
    harness.Handover(tmp_path, "kernels/x.py", cap=32 * 1024).add("online_softmax", y, {"x": x})
    manifest = handover.Handover.model_validate_json((tmp_path / handover.MANIFEST).read_bytes())
    (check,) = manifest.checks
    stride = -(-y.nbytes // (32 * 1024))
    assert check.output.axis("rows") == handover.Axis(stride=stride) and stride == 8
    assert check.output.axis("columns") is None
    assert check.output.shape == [1000, 64]
    assert check.output.sample.whole_sha256 == harness.whole_sha256(y)
    assert np.load(tmp_path / check.output.file).shape == (125, 64)
    assert check.inputs["x"].axis("rows") == handover.Axis(stride=stride)
    (answer,) = checked(tmp_path)["checks"]
    assert (answer["status"], answer["sampled_stride"], answer["checked"]) == ("passed", 8, 125 * 64)
    assert answer["output_sha256"] == harness.whole_sha256(y)
    # One sampled row altered: the sample no longer holds.
    kept = np.load(tmp_path / check.output.file)
    kept[40] = kept[40][::-1]
    np.save(tmp_path / check.output.file, kept)
    (answer,) = checked(tmp_path)["checks"]
    assert (answer["status"], answer["problem"]) == ("failed", "mismatch")


def test_an_input_over_the_cap_that_is_not_row_aligned_is_withheld_and_unverified(harness, tmp_path):
    b = np.ones((400, 100), np.float32)
    harness.Handover(tmp_path, "kernels/x.py", cap=64 * 1024).add("matmul", np.zeros((2, 100), np.float32),
                                                                    {"a": np.ones((2, 400), np.float32), "b": b})
    (answer,) = checked(tmp_path)["checks"]
    assert (answer["status"], answer["problem"]) == ("unverified", "withheld-input")


def checked(folder: Path) -> dict:
    """What the checker's process prints for ``folder`` (its plan as ``outside_check.plan`` makes it), or the
    reason the manifest was refused."""
    raw, refused = outside_check.read_manifest(folder)
    planned = refused or outside_check.plan(REPO, raw)
    if isinstance(planned, str):
        return {"checks": [], "refused": planned}
    return outside_worker.check_plan(folder, planned or {})


def outside_worker_softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize(("tamper", "problem", "words"), [
    (lambda d: (d / "softmax.0.output.npy").unlink() or (d / "softmax.0.output.npy").symlink_to("/dev/zero"),
     "refused", "symbolic link"),
    (lambda d: np.save(d / "softmax.0.output.npy", np.zeros((3, 3), np.float32)), "refused", "shape [3, 3]"),
    (lambda d: np.save(d / "softmax.0.output.npy", np.zeros((256, 128), np.float64)), "refused", "dtype float64"),
    (lambda d: np.save(d / "softmax.0.output.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True),
     "refused", "not a .npy array"),
], ids=["link", "shape", "dtype", "pickle"])
def test_handed_over_files_are_hostile_input(harness, tmp_path, tamper, problem, words):
    x = np.random.default_rng(1).standard_normal((256, 128)).astype(np.float32)
    harness.Handover(tmp_path, "kernels/x.py").add("softmax", outside_worker_softmax(x).astype(np.float32), {"x": x})
    tamper(tmp_path)
    (answer,) = checked(tmp_path)["checks"]
    assert (answer["status"], answer["problem"]) == ("failed", problem)
    assert words in answer["why"]


def test_a_manifest_naming_a_file_outside_its_folder_is_refused(tmp_path):
    (tmp_path / handover.MANIFEST).write_text(json.dumps({"handover_version": 1, "program": "kernels/x.py", "checks": [
        {"name": "softmax", "output": {"file": "../../etc/passwd", "dtype": "<f4", "shape": [1]}}]}))
    answer = checked(tmp_path)
    assert answer["checks"] == [] and "output.file" in answer["refused"]


def test_a_reference_module_importing_the_program_is_refused(harness, tmp_path):
    """The reference table is refused before a line of it runs, and every check it would decide fails."""
    text = "import numpy as np\nimport harness\nREFERENCES = {}\n"
    with pytest.raises(outside_worker.Refused, match=r"references.py:2: imports harness"):
        outside_worker.references(text, "kernels/references.py")
    root = tmp_path / "repo"
    (root / "kernels").mkdir(parents=True)
    shutil.copy(REPO / "kernels" / "tolerances.py", root / "kernels" / "tolerances.py")
    (root / "kernels" / "references.py").write_text("from os import system\nREFERENCES = {}\n")
    folder = tmp_path / "step"
    a = np.ones(4, np.float32)
    harness.Handover(folder, "kernels/x.py").add("vector_add", a + a, {"a": a, "b": a})
    raw, _ = outside_check.read_manifest(folder)
    answer = outside_worker.check_plan(folder, outside_check.plan(root, raw))
    assert answer["checks"] == [] and "imports os" in answer["refused"]


def test_the_checker_runs_without_a_gpu_or_the_program_s_path():
    env = outside_check.checker_env()
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["PYTHONPATH"] == str(REPO)


# --- the record's verdict and the gate -----------------------------------------------------------------------


def _report(passed: bool = True) -> models.CheckReport:
    check = models.Check(name="fused", shape=[2], dtype="float32", rtol=1e-4, atol=1e-3, checked=2,
                         mismatches=0 if passed else 1, max_abs_err=0.0, max_rel_err=0.0, first_failure=None,
                         passed=passed)
    return models.CheckReport(report_version=1, program="kernels/fused.py", seed=1, device=None, gate="ok",
                              gate_message="ok", checks=[check], passed=passed)


def _outside(status: str, problem: str | None = None) -> OutsideVerdict:
    return OutsideVerdict(checks=[OutsideCheck(name="fused", status=status, problem=problem, why="w")],
                          manifest=None, wall_s=0.1)


@pytest.mark.parametrize(("program", "outside", "want"), [
    ("passed", ("passed", None), "passed"),
    ("passed", ("failed", "mismatch"), "checker-disagrees"),
    ("passed", ("failed", "non-finite"), "checker-disagrees"),
    ("failed", ("passed", None), "checker-disagrees"),
    ("failed", ("failed", "mismatch"), "failed"),
    ("passed", ("unverified", "no-outputs"), "unverified"),
    ("failed", ("unverified", "no-outputs"), "failed"),
], ids=lambda v: str(v))
def test_the_record_passes_only_when_both_agree(program, outside, want):
    verdict, _ = outside_check.combine(program, "r", _report(program == "passed"), _outside(*outside))
    assert verdict == want


def test_old_records_keep_reading_and_say_their_verdict_is_the_program_s():
    """Every committed run record older than the outside check still reads; its verdict is the program's word, and
    nothing makes one of its checks unverified."""
    runs = [r for r in load_records(REPO) if isinstance(r, RunRecord)]
    olds = [r for r in runs if r.run_version < models.OUTSIDE_RUN_VERSION]
    assert olds
    assert all(r.outside is None for r in olds)
    assert {r.verdict_by for r in runs if r.run_version >= models.OUTSIDE_RUN_VERSION} <= {"program-and-checker"}
    assert {r.verdict_by for r in olds} == {"program"}
    assert not any(r.unverified(c.name) for r in olds if r.report for c in r.report.checks)
    old = olds[-1]
    with pytest.raises(ValueError, match="hold the program's verdict only"):
        RunRecord.model_validate({**old.model_dump(mode="json"), "verdict": "unverified"})


PY = "kernels/prog.py"
FRONT = models.LessonFront(
    lesson_version=1, id="demo", title="Demo", status="draft",
    programs=[models.LessonProgram(path=PY, checks=["fused"])], hardware=models.Hardware(),
    results=[models.ResultRow(program=PY, check="fused", bound="rtol 1e-4, atol 1e-3")])
TODAY = {PY: fx.sha("py v1")}
TABLE = {"fused": gate.Bound(1e-4, 1e-3)}


def _record(tmp_path: Path, n: int, verdict: str, outside: OutsideVerdict | None) -> RunRecord:
    query = tmp_path / "evidence" / "s-h200" / "nvidia-smi-query.csv"
    query.parent.mkdir(parents=True, exist_ok=True)
    query.write_text(fx.query_csv(fx.H200))
    return fx.run_record(n=n, program=PY, front=FRONT, sources={PY: TODAY[PY], "lessons/demo.md": "any"},
                         checks=[fx.check("fused", 1e-4, 1e-3)], verdict=verdict, outside=outside,
                         tolerances={"fused": tolerances.entry_digest("fused", 1e-4, 1e-3)},
                         query=fx.transcript("evidence/s-h200/nvidia-smi-query.csv", fx.query_csv(fx.H200)))


def test_an_unverified_check_decides_no_row(tmp_path):
    """A run whose check was unverified neither passes the row nor, newer, hides an older verified pass; a run
    the checker disagreed with fails it."""
    def read(rel):
        path = tmp_path / rel
        return path.read_bytes() if path.is_file() else None

    row = FRONT.results[0]
    only = _record(tmp_path, 1, "unverified", _outside("unverified", "no-outputs"))
    decided = gate.decide_row(FRONT, row, [only], TODAY, TABLE, read)
    assert decided.outcome == "no-record"
    assert "unverified" in decided.reason
    verified = _record(tmp_path, 1, "passed", _outside("passed"))
    later = _record(tmp_path, 2, "unverified", _outside("unverified", "no-outputs"))
    decided = gate.decide_row(FRONT, row, [verified, later], TODAY, TABLE, read)
    assert (decided.outcome, decided.record.run_id) == ("passed", verified.run_id)
    disagrees = _record(tmp_path, 3, "checker-disagrees", _outside("failed", "mismatch"))
    decided = gate.decide_row(FRONT, row, [verified, later, disagrees], TODAY, TABLE, read)
    assert (decided.outcome, decided.record.run_id) == ("failed", disagrees.run_id)
    old = _record(tmp_path, 4, "passed", None)  # run_version 1: the program's word decides, as it always did
    assert gate.decide_row(FRONT, row, [old], TODAY, TABLE, read).outcome == "passed"


CPP_HANDOVER = r'''
#include "harness.h"
int main(int, char** argv) {
    tp::report().report_path = std::string(argv[1]) + "/check-report.json";
    tp::report().program = "cpp/handover_test.cu";
    std::vector<float> x(6 * 4);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i);
    const std::vector<std::uint16_t> bits = {0x3c00, 0xc000, 0x0001};  // 1, -2, the smallest subnormal
    const std::vector<float> sums = {1.5f, 5.5f, 9.5f, 13.5f, 17.5f, 21.5f};
    tp::hand_over("tile_sum_native", tp::input("output", {6}, sums), {tp::input("x", {6, 4}, x)});
    tp::hand_over("matmul", tp::input("output", {3}, std::vector<double>{1.0, 2.0, 3.5}), {tp::input("a", {3}, bits)});
}
'''


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ to build the C++ harness's host half")
def test_the_cpp_harness_hands_over_npy_files_numpy_and_the_checker_read(tmp_path):
    """cpp/harness.h writes the .npy header by hand: numpy reads each file, the manifest validates, and
    tileproof's checker recomputes the reference from them."""
    include = next(Path(sys.prefix).glob("lib/python3*/site-packages/nvidia/cu*/include"), None)
    if include is None or not (include / "cuda_runtime.h").is_file():
        pytest.skip("no cuda_runtime.h in this environment")
    (tmp_path / "t.cpp").write_text(CPP_HANDOVER)
    subprocess.run(["g++", "-std=c++20", f"-I{REPO / 'cpp'}", f"-I{include}", str(tmp_path / "t.cpp"), "-o",
                    str(tmp_path / "t")], check=True, timeout=300)
    out = tmp_path / "out"
    out.mkdir()
    subprocess.run([str(tmp_path / "t"), str(out)], check=True, timeout=60)
    manifest = handover.Handover.model_validate_json((out / handover.MANIFEST).read_bytes())
    assert [(c.name, c.output.dtype, c.output.shape) for c in manifest.checks] == \
        [("tile_sum_native", "<f4", [6]), ("matmul", "<f8", [3])]
    assert np.load(out / "tile_sum_native.input.x.npy", allow_pickle=False).reshape(-1).tolist() == \
        [0.25 * i for i in range(24)]
    assert np.load(out / "matmul.input.a.npy", allow_pickle=False).tolist() == [1.0, -2.0, 2.0 ** -24]
    answers = {a["name"]: a for a in checked(out)["checks"]}
    assert answers["tile_sum_native"]["status"] == "passed", answers["tile_sum_native"]["why"]
    assert answers["matmul"]["status"] == "failed"  # a 1-D "a" and no "b": the reference raises, named
    assert answers["matmul"]["problem"] == "reference-error"


def test_the_audit_finds_a_passed_verdict_without_tileproof_s_own_pass(tmp_path):
    """A record resealed to say passed over an outside check that did not pass (or none) is a finding; an old
    record's verdict, the program's own, is not held to it."""
    from tileproof.judge.audit.rules import outside as rules  # noqa: PLC0415

    assert rules.outside_issues(_record(tmp_path, 1, "passed", _outside("passed"))) == []
    forged = _record(tmp_path, 2, "passed", _outside("unverified", "no-outputs"))
    assert [r for r, _ in rules.outside_issues(forged)] == [rules.OUTSIDE]
    assert [r for r, _ in rules.outside_issues(_record(tmp_path, 3, "passed", _outside("failed", "non-finite")))] \
        == [rules.OUTSIDE]
    assert rules.outside_issues(_record(tmp_path, 4, "passed", None)) == []


def test_a_manifest_that_is_a_link_is_refused_unread(tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text('{"handover_version": 1, "program": "kernels/x.py", "checks": []}')
    folder = tmp_path / "step"
    folder.mkdir()
    (folder / handover.MANIFEST).symlink_to(target)
    raw, refused = outside_check.read_manifest(folder)
    assert raw is None and refused is not None and "symbolic link" in refused


def test_a_manifest_over_its_cap_is_refused_and_not_kept(tmp_path):
    (tmp_path / handover.MANIFEST).write_bytes(b" " * (handover.MANIFEST_CAP_BYTES + 1))
    raw, refused = outside_check.read_manifest(tmp_path)
    assert raw is None and refused is not None and "more than the" in refused


def test_a_check_tileproof_verified_decides_its_row_though_another_was_unverified(tmp_path):
    """Per check, not per record: a run left unverified by another check still passes the row whose check
    tileproof recomputed and passed."""
    def read(rel):
        path = tmp_path / rel
        return path.read_bytes() if path.is_file() else None

    outside = OutsideVerdict(checks=[OutsideCheck(name="fused", status="passed", problem=None, why="w"),
                                     OutsideCheck(name="other", status="unverified", problem="no-reference", why="w")],
                             manifest=None, wall_s=0.1)
    rec = _record(tmp_path, 1, "unverified", outside)
    assert not rec.unverified("fused") and rec.unverified("other")
    decided = gate.decide_row(FRONT, FRONT.results[0], [rec], TODAY, TABLE, read)
    assert (decided.outcome, decided.record.run_id) == ("passed", rec.run_id)


def test_a_failed_run_decides_its_rows_whichever_check_it_left_unverified(tmp_path):
    """Fail closed: a program that failed at its first check never ran (nor handed over) the next; that run still
    fails the next check's row rather than let an older pass decide it."""
    def read(rel):
        path = tmp_path / rel
        return path.read_bytes() if path.is_file() else None

    verified = _record(tmp_path, 1, "passed", _outside("passed"))
    failed = _record(tmp_path, 2, "failed", _outside("unverified", "no-outputs"))
    assert not failed.unverified("fused")
    decided = gate.decide_row(FRONT, FRONT.results[0], [verified, failed], TODAY, TABLE, read)
    assert (decided.outcome, decided.record.run_id) == ("failed", failed.run_id)


# --- one checker per run session -----------------------------------------------------------------------------


HANG = '''
import numpy as np


def vector_add(a, b):
    return np.asarray(a, dtype=np.float64) + b


def hangs(x):
    while True:  # a reference that never returns: only the checker's deadline ends it
        pass


REFERENCES = {"vector_add": vector_add, "hangs": hangs}
'''


@pytest.fixture
def checker_tree(tmp_path):
    """A checkout with the course's tolerance table and a reference table whose ``hangs`` never returns."""
    root = tmp_path / "repo"
    (root / "kernels").mkdir(parents=True)
    shutil.copy(REPO / "kernels" / "tolerances.py", root / "kernels" / "tolerances.py")
    table = (root / "kernels" / "tolerances.py").read_text()
    (root / "kernels" / "tolerances.py").write_text(table.replace(
        '    "vector_add":', '    "hangs": Tolerance(rtol=0.0, atol=0.0),\n    "vector_add":', 1))
    (root / "kernels" / "references.py").write_text(HANG)
    return root


def _handed(harness, checker, name: str = "vector_add") -> tuple[Path, models.CheckReport]:
    """A program's report folder made in the session's handover folder, holding a correct handover of ``name``."""
    folder = Path(tempfile.mkdtemp(dir=checker.handovers))
    folder.chmod(0o755)  # as a walled program's own folder is to the checker (its init gives it to the wall's user)
    a = np.arange(64, dtype=np.float32)
    inputs = {"a": a, "b": a} if name == "vector_add" else {"x": a}
    harness.Handover(folder, "kernels/x.py").add(name, a + a, inputs)
    if os.geteuid() == 0:  # the separate-user wall: a program's folder and files are the wall user's
        for path in [folder, *folder.iterdir()]:
            os.chown(path, PROGRAM_ID, PROGRAM_ID)
    check = models.Check(name=name, shape=[64], dtype="float32", rtol=0.0, atol=0.0, checked=64, mismatches=0,
                         max_abs_err=0.0, max_rel_err=0.0, first_failure=None, passed=True)
    return folder, models.CheckReport(report_version=1, program="kernels/x.py", seed=1, device=None, gate="ok",
                                      gate_message="ok", checks=[check], passed=True)


def _check(checker, folder, report, timeout: float = 60.0) -> OutsideVerdict:
    return outside_check.check(checker, new_run_id("run"), folder, report, timeout)


def test_one_worker_checks_every_program_of_a_session(harness, checker_tree):
    """The worker starts with the session and answers every check; it reads report folders made after it started
    (the handover folder is bound into its wall, as it changes)."""
    with outside_check.session(checker_tree, warm=True) as checker:
        verdicts, pids = [], set()
        for _ in range(3):
            folder, report = _handed(harness, checker)
            verdicts.append(_check(checker, folder, report))
            pids.add(checker.worker.started.proc.pid)
        assert [[(c.name, c.status) for c in v.checks] for v in verdicts] == [[("vector_add", "passed")]] * 3
        assert (checker.starts, checker.jobs, len(pids)) == (1, 3, 1)
        worker = checker.worker
    assert worker.started.proc.poll() is not None  # ended with its session


def test_a_worker_killed_between_programs_is_replaced(harness, checker_tree):
    with outside_check.session(checker_tree, warm=True) as checker:
        folder, report = _handed(harness, checker)
        assert _check(checker, folder, report).checks[0].status == "passed"
        first = checker.worker.started.proc
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        folder, report = _handed(harness, checker)
        assert _check(checker, folder, report).checks[0].status == "passed"
        assert checker.starts == 2 and checker.worker.started.proc.pid != first.pid


def test_a_worker_killed_during_a_check_fails_it_and_the_next_is_checked(harness, checker_tree):
    """Killed while it works on a job: that job's check fails by name (never a pass), and a new worker checks the
    next program."""
    with outside_check.session(checker_tree, warm=True) as checker:
        folder, report = _handed(harness, checker)
        assert _check(checker, folder, report).checks[0].status == "passed"
        # the worker is up (it answered): half a second into the hanging reference, it is killed
        killer = threading.Timer(0.5, lambda: os.killpg(checker.worker.started.proc.pid, signal.SIGKILL))
        killer.start()
        folder, report = _handed(harness, checker, "hangs")
        (dead,) = _check(checker, folder, report).checks
        killer.join()
        assert (dead.status, dead.problem) == ("failed", "checker-error")
        assert "ended without answering" in dead.why
        assert outside_check.combine("passed", "r", report, OutsideVerdict(checks=[dead], manifest=None,
                                                                          wall_s=0.0))[0] == "checker-disagrees"
        folder, report = _handed(harness, checker)
        assert _check(checker, folder, report).checks[0].status == "passed"
        assert checker.starts == 2


def test_a_reference_that_hangs_times_out_and_the_next_program_is_checked(harness, checker_tree):
    with outside_check.session(checker_tree, warm=True) as checker:
        folder, report = _handed(harness, checker)
        assert _check(checker, folder, report).checks[0].status == "passed"  # up: the next job's second is the hang's
        folder, report = _handed(harness, checker, "hangs")
        t0 = time.perf_counter()
        hung = _check(checker, folder, report, timeout=1.0)
        assert time.perf_counter() - t0 < 30
        (one,) = hung.checks
        assert (one.status, one.problem) == ("failed", "checker-error") and "timed out" in one.why
        stuck = checker.starts
        folder, report = _handed(harness, checker)
        assert _check(checker, folder, report).checks[0].status == "passed"
        assert (stuck, checker.starts) == (1, 2)


def test_what_a_reference_table_prints_is_never_read_as_an_answer(harness, checker_tree):
    """A table that prints a passing answer line: the answer tileproof reads is the worker's, for this job."""
    forged = json.dumps({"job": "0" * 16, "checks": [{"name": "vector_add", "status": "passed", "why": "forged"}]})
    (checker_tree / "kernels" / "references.py").write_text(
        HANG.replace("def hangs", f"print({forged!r}, flush=True)\n\n\ndef hangs"))
    with outside_check.session(checker_tree, warm=True) as checker:
        for _ in range(2):
            folder, report = _handed(harness, checker)
            (one,) = _check(checker, folder, report).checks
            assert one.status == "passed" and one.why != "forged"
        assert checker.starts == 1


def test_a_session_starts_one_checker_for_its_programs(ran):
    """One checker for every program of the session (``ran``: the course's and the hostile ones, several of whose
    checks it failed)."""
    recs = [ran.records["vector_add"], ran.records["fused"]]
    assert sorted((r.program, r.verdict) for r in recs) == [("kernels/fused.py", "passed"),
                                                            ("kernels/vector_add.py", "passed")]
    assert all(c.status == "passed" for r in recs for c in r.outside.checks)
    assert ran.checkers_started == 1


def test_the_checker_reads_a_program_s_folder_but_cannot_write_it(harness, checker_tree):
    """The handover folder is bound into the checker's wall read-only: a reference table that tries to rewrite a
    program's handed-over output fails, and the file is as the program left it."""
    with outside_check.session(checker_tree, warm=True) as checker:
        folder, report = _handed(harness, checker)
        target = folder / "vector_add.0.output.npy"
        before = target.read_bytes()
        (checker_tree / "kernels" / "references.py").write_text(HANG.replace(
            "    return np.asarray(a, dtype=np.float64) + b",
            f"    open({str(target)!r}, 'wb').write(b'forged')\n    return np.asarray(a, dtype=np.float64) + b"))
        (one,) = _check(checker, folder, report).checks
        assert (one.status, one.problem) == ("failed", "reference-error"), one
        assert "Read-only file system" in one.why
        assert target.read_bytes() == before
