"""A bench record's verdict does not take the bench program's word: every configuration's check hands its output
over beside the shape's inputs (handed over once), tileproof recomputes each reference itself, and the record is
``passed`` only when both agree (bench_version 5).

The hostile programs are real bench programs in the tree's ``kernels/bench/``, run by one ``tileproof bench``
session (``benched``: each a program, a step and a record of its own) under the fake GPU (an H200 nvidia-smi,
``tests/data/fake_gpu_site`` on PYTHONPATH). Each imports the course harness and rewrites its comparison to pass
whatever it is given (what a dependency of the program could do), then checks three configurations of one softmax
shape and writes a results file: one hands over a wrong output for one configuration, one hands over inputs that
are not what its outputs were computed from, one hands over an output it never wrote (NaN-filled). None is
recorded ``passed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_args, fake_nvidia_smi, sources_tree
from one_freeze import frozen

from tileproof.commands import bench as bench_cmd
from tileproof.records import handover
from tileproof.records.models import OUTSIDE_BENCH_VERSION, BenchRecord
from tileproof.records.store import load_records
from tileproof.runner import capture

REPO = Path(__file__).resolve().parents[1]
QUERY = REPO / "tests" / "data" / "gpu" / "nvidia-smi-query.csv"
FAKE_GPU = REPO / "tests" / "data" / "fake_gpu_site"

PROGRAM = '''
import json, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np
import harness
from tolerances import TOLERANCES

LIE = LIE_HERE
BLOCK = ("block", "block-wrong", "block-wrong-outside", "block-other-b", "block-other-b-outside", "block-columns-lie",
         "block-out-of-range", "block-unsorted", "block-b-columns-other")


def softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def body(s):
    if LIE and LIE not in ("withheld", "block"):  # the check rewritten: every comparison passes
        real = harness.compare
        harness.compare = lambda name, got, want, rtol, atol: real(name, want, want, rtol, atol)
    s.handover.cap = CAP_HERE
    x = s.rng.standard_normal((256, 128)).astype(np.float32)
    other = s.rng.standard_normal((256, 128)).astype(np.float32)
    handed = s.inputs("softmax_256x128", x=other if LIE == "inputs" else x)
    cases = []
    for i, variant in enumerate(("tile", "tile", "cupy")):
        y = softmax(x)
        if LIE == "output" and i == 1:
            y[7, 3] += np.float32(1e-2)  # one element of one configuration
        if LIE == "nan" and i == 1:
            y = np.full_like(y, np.nan)  # the kernel never wrote it
        start = time.time()
        s.check("softmax", y, softmax(x).astype(np.float64), handed)
        cases.append({"key": f"softmax/{variant}/256x128/{i}", "name": "softmax", "variant": variant,
                      "shape": [256, 128], "dtype": "float32", "tiles": None, "config": {}, "flops": None,
                      "bytes": 2 * x.nbytes, "phase": "sweep", "first_launch_ms": 1.0, "check_index": i,
                      "samples_ms": [1.0, 1.1, 0.9], "wall_unix": [[start, time.time()]]})
    if LIE in BLOCK:  # square, as 8192^3, B a column input: a block of C is handed over with A's rows and B's columns
        a = s.rng.integers(-3, 4, (256, 256)).astype(np.float32)
        b = s.rng.integers(-3, 4, (256, 256)).astype(np.float32)
        handed_b = s.rng.integers(-3, 4, (256, 256)).astype(np.float32) if LIE == "block-other-b" else b
        if LIE == "block-other-b-outside":  # B differs from the one handed over only in columns the block leaves out
            handed_b = b.copy()
            handed_b[:, 1::4] += 1
        pair = s.inputs("matmul_256", columns=("b",), a=a, b=handed_b)
        for i in range(2):
            c = a @ b
            if LIE == "block-wrong" and i == 1:
                c[8, 12] += 1  # row 8 and column 12: inside the block (every 4th row and column)
            if LIE == "block-wrong-outside" and i == 1:
                c[9, 13] += 1  # row 9 and column 13: outside the block
            s.check("matmul", c, a.astype(np.float64) @ b, pair)
            cases.append({**cases[0], "key": f"matmul/tile/256/{i}", "name": "matmul", "shape": [256, 256, 256],
                          "check_index": 3 + i})
        folder = Path(s.args.report).resolve().parent
        manifest = json.loads((folder / "handover.json").read_text())
        matmuls = [c for c in manifest["checks"] if c["name"] == "matmul"]
        for c in matmuls:
            out, bee = c["output"]["sample"], c["inputs"]["b"]["sample"]
            if LIE == "block-columns-lie":  # declares every 2nd column; the files hold every 4th
                out["columns"] = bee["columns"] = {"stride": 2}
            if LIE == "block-out-of-range":
                out["columns"] = bee["columns"] = {"indices": list(range(4, 256, 4)) + [256]}
            if LIE == "block-b-columns-other":  # B's columns said to be others than C's
                bee["columns"] = {"stride": 2}
            if LIE == "block-unsorted":
                out["columns"] = bee["columns"] = {"indices": [4, 0] + list(range(8, 256, 4))}
        (folder / "handover.json").write_text(json.dumps(manifest))
    if LIE == "softmax-columns":  # x a "column input" of softmax: the block is softmax over the sampled columns only
        x2 = s.rng.standard_normal((256, 128)).astype(np.float32)
        fake = softmax(x2)
        fake[:, ::2] = softmax(x2[:, ::2])  # every 2nd column: the block's columns at this cap
        s.check("softmax", fake, fake.astype(np.float64), s.inputs("softmax_cols", columns=("x",), x=x2))
        cases.append({**cases[0], "key": "softmax/tile/256x128/cols", "check_index": 3})
    if LIE == "withheld":  # square, as 8192^3: B (256 KiB) has as many rows as C, yet every row of C needs all of it
        a = s.rng.integers(-3, 4, (256, 256)).astype(np.float32)
        b = s.rng.integers(-3, 4, (256, 256)).astype(np.float32)
        pair = s.inputs("matmul_256", whole=("b",), a=a, b=b)
        for i in range(2):
            s.check("matmul", a @ b, a.astype(np.float64) @ b, pair)
            cases.append({**cases[0], "key": f"matmul/tile/256/{i}", "name": "matmul", "shape": [256, 256, 256],
                          "check_index": 3 + i})
    args = s.args
    Path(args.results).write_text(json.dumps({"results_version": 1, "reference": {"softmax": "cupy"},
                                              "ceilings": {"gbps": cases[2]["key"]}, "cases": cases, "skipped": []}))


def add(parser):
    parser.add_argument("--results")
    parser.add_argument("--quick", action="store_true")


sys.exit(harness.run_program(__file__, body, description="hostile bench", tolerances=TOLERANCES,
                             add_arguments=add))
'''


SMALL_CAP = 64 * 1024
"""The handover cap of the variants that hand over samples (a 256x256 float32 B is 256 KiB)."""
VARIANTS: list[tuple[str | None, int]] = [
    (None, 64 << 20), ("output", 64 << 20), ("inputs", 64 << 20), ("nan", 64 << 20), (None, SMALL_CAP),
    *((lie, SMALL_CAP) for lie in ("withheld", "block", "block-wrong", "block-other-b", "block-wrong-outside",
                                   "block-other-b-outside", "block-columns-lie", "block-out-of-range",
                                   "block-unsorted", "block-b-columns-other", "softmax-columns"))]
"""Every (lie, handover cap) a test below reads the record of: each is a program of its own in one bench session."""


def stem(lie: str | None, cap: int) -> str:
    """The bench program lying as ``lie`` with handover cap ``cap``: ``kernels/bench/<stem>.py``."""
    return f"hostile_{(lie or 'honest').replace('-', '_')}_{cap}_bench"


@dataclass(frozen=True)
class Benched:
    """The tree of the module's one bench session and its record of each variant."""

    root: Path
    records: dict[tuple[str | None, int], BenchRecord]


@pytest.fixture(scope="module")
def benched(tmp_path_factory) -> Benched:
    """The course's sources in a temporary repository, an H200 nvidia-smi and the fake GPU on PYTHONPATH, and
    every variant of ``VARIANTS`` written to ``kernels/bench/`` and run by one ``tileproof bench`` (each program
    is its own step, its own record and its own job for tileproof's checker; the session's captures are made
    once). Read only: each test judges its variant's record."""
    root = sources_tree(tmp_path_factory.mktemp("bench"))
    bin_dir = fake_nvidia_smi(root.parent / "fakebin", QUERY)
    for lie, cap in VARIANTS:
        text = PROGRAM.replace("LIE_HERE", repr(lie)).replace("CAP_HERE", str(cap))
        (root / "kernels" / "bench" / f"{stem(lie, cap)}.py").write_text(text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
        mp.setenv("PYTHONPATH", str(FAKE_GPU))
        mp.delenv("CUDA_TILE_CACHE_DIR", raising=False)
        mp.setattr(capture, "pip_freeze", frozen)  # one real pip freeze per environment of this process
        bench_cmd.run(cli_args("bench", "--root", str(root),
                               *(a for lie, cap in VARIANTS for a in ("--program", stem(lie, cap)))))
    found = {r.program: r for r in load_records(root) if isinstance(r, BenchRecord)}
    return Benched(root, {(lie, cap): found[f"kernels/bench/{stem(lie, cap)}.py"] for lie, cap in VARIANTS})


def bench(benched: Benched, lie: str | None, cap: int = 64 << 20) -> BenchRecord:
    """The record of ``kernels/bench/hostile_*_bench.py`` lying as ``lie`` (one of ``VARIANTS``)."""
    assert (lie, cap) in benched.records, f"({lie!r}, {cap}) is not in VARIANTS"
    return benched.records[(lie, cap)]


def test_an_honest_bench_is_passed_by_both_words(benched):
    """The control: the same program, not lying, is ``passed``, every configuration checked outside."""
    rec = bench(benched, None)
    assert rec.bench_version >= OUTSIDE_BENCH_VERSION
    assert rec.verdict == "passed", rec.reason
    assert rec.outside is not None
    assert [(c.index, c.status) for c in rec.outside.checks] == [(0, "passed"), (1, "passed"), (2, "passed")]
    assert "tileproof's own check agrees" in rec.reason
    manifest = (benched.root / rec.outside.manifest.path).read_text()
    assert manifest.count('"softmax_256x128.input.x.npy"') == 3  # one input set, named by every check
    assert len(rec.cases) == 3


def test_a_wrong_output_for_one_configuration_is_checker_disagrees(benched):
    rec = bench(benched, "output")
    assert rec.report is not None and rec.report.passed  # the program's word, as it said it
    assert rec.verdict == "checker-disagrees", rec.reason
    statuses = [(c.index, c.status, c.problem) for c in rec.outside.checks]
    assert statuses == [(0, "passed", None), (1, "failed", "mismatch"), (2, "passed", None)]
    assert "check softmax (#1)" in rec.reason and "1 of 32768 elements" in rec.reason


def test_inputs_that_do_not_match_the_outputs_are_checker_disagrees(benched):
    rec = bench(benched, "inputs")
    assert rec.report is not None and rec.report.passed
    assert rec.verdict == "checker-disagrees", rec.reason
    assert {(c.status, c.problem) for c in rec.outside.checks} == {("failed", "mismatch")}


def test_a_nan_filled_output_is_checker_disagrees(benched):
    rec = bench(benched, "nan")
    assert rec.report is not None and rec.report.passed
    assert rec.verdict == "checker-disagrees", rec.reason
    assert [(c.index, c.problem) for c in rec.outside.checks if c.status == "failed"] == [(1, "non-finite")]


def test_a_row_aligned_input_above_the_cap_is_sampled_and_checked(benched):
    """X (128 KiB) above a 64 KiB cap: X and every Y are handed over as the same strided rows, and checked."""
    rec = bench(benched, None, cap=64 * 1024)
    assert rec.verdict == "passed", rec.reason
    assert {(c.status, c.sampled_stride) for c in rec.outside.checks} == {("passed", 2)}


def test_an_input_that_cannot_be_sampled_leaves_the_bench_unverified_never_passed(benched):
    """A square matmul whose B is above the cap (as at 8192^3): B has as many rows as C, but every element of it
    feeds every row of C, so no row sample of it recomputes anything (``whole``). Every matmul check is
    ``unverified``, the record too, and its reason says why."""
    rec = bench(benched, "withheld", cap=64 * 1024)
    assert rec.report is not None and rec.report.passed
    assert rec.verdict == "unverified", rec.reason
    assert {(c.status, c.problem) for c in rec.outside.checks if c.name == "matmul"} == \
        {("unverified", "withheld-input")}
    assert "check matmul (#3) and 1 more: input b was not handed over" in rec.reason
    assert "above the handover's cap" in rec.reason
    assert "an unverified check decides nothing" in rec.reason


def test_a_column_input_above_the_cap_hands_over_a_block_that_is_checked(benched):
    """The 8192^3 class, shrunk: B (256 KiB) above a 64 KiB cap, declared a column input. A block of C (every 4th row
    and column), the same rows of A and the same columns of B are handed over; tileproof recomputes the block and
    the bench record is ``passed``."""
    rec = bench(benched, "block", cap=64 * 1024)
    assert rec.verdict == "passed", rec.reason
    matmuls = [c for c in rec.outside.checks if c.name == "matmul"]
    assert [(c.index, c.status, c.checked, c.sampled_stride) for c in matmuls] == \
        [(3, "passed", 64 * 64, 4), (4, "passed", 64 * 64, 4)]
    assert "(rows every 4th, columns every 4th)" in matmuls[0].why
    manifest = handover.Handover.model_validate_json((benched.root / rec.outside.manifest.path).read_bytes())
    b, again = (c.inputs["b"] for c in manifest.checks if c.name == "matmul")
    assert b == again  # one input set: handed over once, named by both checks
    assert b.shape == [256, 256] and b.file_shape() == [256, 64] and b.axis("rows") is None
    assert b.axis("columns") == handover.Axis(stride=4)


@pytest.mark.parametrize("lie", ["block-wrong", "block-other-b"])
def test_a_wrong_block_or_a_b_it_did_not_use_is_checker_disagrees(benched, lie):
    """One wrong element of C inside the block; or the block computed from a B other than the one handed over: both
    are tileproof's own ``mismatch`` against the program's passing report."""
    rec = bench(benched, lie, cap=64 * 1024)
    assert rec.report is not None and rec.report.passed
    assert rec.verdict == "checker-disagrees", rec.reason
    failed = [(c.index, c.problem) for c in rec.outside.checks if c.status == "failed"]
    assert failed == ([(4, "mismatch")] if lie == "block-wrong" else [(3, "mismatch"), (4, "mismatch")])
    assert "elements (rows every 4th, columns every 4th) beyond" in rec.reason


@pytest.mark.parametrize("lie", ["block-wrong-outside", "block-other-b-outside"])
def test_what_the_block_leaves_out_is_not_checked(benched, lie):
    """The limit, pinned (docs/threat-model.md): a wrong element outside the block, or a B handed over that differs
    from the one used only in columns the block leaves out, is not seen; the whole B's sha256 is the program's own
    word, which tileproof keeps but cannot recompute from the block."""
    rec = bench(benched, lie, cap=64 * 1024)
    assert rec.verdict == "passed", rec.reason


@pytest.mark.parametrize(("lie", "said"), [
    ("block-columns-lie", "shape [64, 64], the manifest says [64, 128] (sampled)"),
    ("block-out-of-range", "columns index 256 is out of range: the array has 256 columns"),
    ("block-unsorted", "sample indices must be strictly increasing"),
    ("block-b-columns-other", "input b: its columns sample is not the output's (stride 2 against stride 4)"),
])
def test_a_manifest_that_misstates_its_block_is_refused_in_one_line(benched, lie, said):
    """A manifest declaring columns its files do not hold, or out-of-range or unsorted indices, is refused: never
    passed, the reason one line naming what was wrong."""
    rec = bench(benched, lie, cap=64 * 1024)
    assert rec.report is not None and rec.report.passed
    assert rec.verdict == "checker-disagrees", rec.reason
    assert "\n" not in rec.reason and said in rec.reason, rec.reason
    assert {c.problem for c in rec.outside.checks if c.name == "matmul"} == {"refused"}


def test_a_column_sample_of_an_input_the_reference_is_not_column_wise_in_is_refused(benched):
    """softmax declared column-wise in x: its block, softmax over the sampled columns only, would match a reference
    called on those columns, though it is no block of softmax(x). kernels/references.py's COLUMNS names matmul's b
    alone, so the check is refused, never passed."""
    rec = bench(benched, "softmax-columns", cap=64 * 1024)
    assert rec.report is not None and rec.report.passed
    assert rec.verdict == "checker-disagrees", rec.reason
    (lie,) = [c for c in rec.outside.checks if c.index == 3]
    assert (lie.status, lie.problem) == ("failed", "refused")
    assert "input x is handed over as a sample of its columns" in lie.why and "(COLUMNS)" in lie.why


def test_a_square_matmul_s_b_is_never_row_sampled(tmp_path):
    """B of a square product has the output's first axis. Declared ``whole`` it is withheld above the cap (the check
    unverified); sampled like A, the reference cannot even be computed (fail closed, never a pass)."""
    import importlib.util  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from tileproof.runner import outside_check, outside_worker  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("square_harness", REPO / "kernels" / "harness.py")
    h = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = h
    spec.loader.exec_module(h)
    rng = np.random.default_rng(2)
    a, b = (rng.integers(-3, 4, (256, 256)).astype(np.float32) for _ in range(2))
    found = {}
    for whole in (("b",), ()):
        folder = tmp_path / f"whole-{bool(whole)}"
        h.Handover(folder, "kernels/x.py", cap=64 * 1024).add("matmul", a @ b, h.InputSet("m", {"a": a, "b": b}, whole))
        raw, _ = outside_check.read_manifest(folder)
        (found[bool(whole)],) = outside_worker.check_plan(folder, outside_check.plan(REPO, raw))["checks"]
    del sys.modules[spec.name]
    assert (found[True]["status"], found[True]["problem"]) == ("unverified", "withheld-input")
    assert (found[False]["status"], found[False]["problem"]) == ("failed", "reference-error")


def test_the_audit_holds_a_passed_bench_record_to_tileproof_s_own_check(benched):
    """A bench record of bench_version 5 that says passed while tileproof's own check of one configuration failed
    (a hand-edited record) is an ``outside-verdict`` finding; the honest one is none."""
    from tileproof.judge.audit.rules import outside as rules  # noqa: PLC0415

    rec = bench(benched, None)
    assert rules.outside_issues(rec) == []
    forged = rec.model_copy(update={"outside": rec.outside.model_copy(update={"checks": [
        c.model_copy(update={"status": "failed", "problem": "mismatch", "why": "1 of 32768 elements"})
        if c.index == 2 else c for c in rec.outside.checks]})})
    (issue,) = rules.outside_issues(forged)
    assert issue[0] == rules.OUTSIDE and "softmax is failed: 1 of 32768 elements" in issue[1]


def test_a_block_named_by_index_lists_is_checked_as_listed(tmp_path):
    """A manifest may name a block's rows and columns as lists of indices (handover_version 3): the checker holds
    each file to the listed count and recomputes exactly those elements; a block cut at other rows than listed
    does not pass."""
    import json  # noqa: PLC0415

    from tileproof.runner import outside_check, outside_worker  # noqa: PLC0415

    rng = np.random.default_rng(4)
    a, b = (rng.integers(-3, 4, (256, 256)).astype(np.float32) for _ in range(2))
    c = a @ b
    rows, cols = [0, 5, 17, 200], [1, 2, 255]
    found = {}
    for cut in ("listed", "other"):
        folder = tmp_path / cut
        folder.mkdir()
        taken = [r + 1 for r in rows] if cut == "other" else rows
        np.save(folder / "c.npy", c[taken][:, cols])
        np.save(folder / "a.npy", a[rows])
        np.save(folder / "b.npy", b[:, cols])
        sample = {"rows": {"indices": rows}, "columns": {"indices": cols}, "whole_sha256": "0" * 64}
        entry = {"dtype": "<f4", "shape": [256, 256]}
        (folder / handover.MANIFEST).write_text(json.dumps({"handover_version": 3, "program": "kernels/x.py",
                                                            "checks": [
            {"name": "matmul", "index": 0, "output": {"file": "c.npy", **entry, "sample": sample},
             "inputs": {"a": {"file": "a.npy", **entry, "sample": {**sample, "columns": None}},
                        "b": {"file": "b.npy", **entry, "sample": {**sample, "rows": None}}}}]}))
        raw, _ = outside_check.read_manifest(folder)
        (found[cut],) = outside_worker.check_plan(folder, outside_check.plan(REPO, raw))["checks"]
    assert (found["listed"]["status"], found["listed"]["checked"]) == ("passed", 12)
    assert "(rows 4 listed, columns 3 listed)" in found["listed"]["why"]
    assert (found["other"]["status"], found["other"]["problem"]) == ("failed", "mismatch")


def test_a_version_2_row_sample_still_reads_and_version_3_holds_to_its_own_shape(tmp_path):
    """A handover_version 2 manifest's ``RowSample`` (``stride``) is read and checked as before; the same sample
    under version 3, which samples as ``Sample`` (rows, columns), is refused."""
    import json  # noqa: PLC0415

    from tileproof.runner import outside_check, outside_worker  # noqa: PLC0415

    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 16))
    y = np.exp(x - x.max(axis=1, keepdims=True))
    y /= y.sum(axis=1, keepdims=True)
    np.save(tmp_path / "y.npy", y[::4].astype(np.float32))
    np.save(tmp_path / "x.npy", x[::4].astype(np.float32))
    row = {"stride": 4, "whole_sha256": "0" * 64}
    found = {}
    for version in (2, 3):
        (tmp_path / handover.MANIFEST).write_text(json.dumps({"handover_version": version, "program": "kernels/x.py",
                                                              "checks": [
            {"name": "softmax", "index": 0,
             "output": {"file": "y.npy", "dtype": "<f4", "shape": [64, 16], "sample": row},
             "inputs": {"x": {"file": "x.npy", "dtype": "<f4", "shape": [64, 16], "sample": row}}}]}))
        raw, _ = outside_check.read_manifest(tmp_path)
        planned = outside_check.plan(REPO, raw)
        found[version] = planned if isinstance(planned, str) else outside_worker.check_plan(tmp_path, planned)
    (v2,) = found[2]["checks"]
    assert (v2["status"], v2["sampled_stride"], v2["checked"]) == ("passed", 4, 16 * 16)
    assert "handover_version 3 samples as Sample" in found[3]
