"""``tileproof diff``: the noise rule, the comparison over FIXTURE records, every exit code, and the committed
evidence between 347efc1 and e0f4b50 against a list made by hand from git (``git diff --name-status`` of runs/ and
lessons/, and the bench records read with ``jq``-like care), never from this code's output."""

import json
import math
import subprocess

import pytest
from conftest import COMMITTED, clone_at, git_commit_all
from test_perf_claims import bench_record, case

from tileproof.__main__ import main
from tileproof.gather import snapshot
from tileproof.judge import diff, noise
from tileproof.records.models import PairedRatio

HEAD_ID = "e0f4b505cadedfd0dccc347e0d4c1853df7f4dc4"
"""The commit after which the committed H200 records of 2026-12-04 and the performance note are all in."""


# --- the rule ---------------------------------------------------------------------------------------------------

RULE = [
    ("same value", (1.0, 0.0), (1.0, 0.0), True, "within-noise"),
    ("inside both bands", (1.0, 0.02), (1.03, 0.02), True, "within-noise"),
    ("bands touch: beyond", (1.0, 0.02), (1.04, 0.02), True, "improvement"),
    ("beyond, lower is better", (1.0, 0.02), (1.05, 0.02), False, "regression"),
    ("a bound has no band", (88.0, 0.0), (86.0, 1.0), True, "regression"),
    ("within the measurement's band", (88.0, 0.0), (90.2, 2.345), True, "within-noise"),
    ("not finite fails closed", (1.0, math.inf), (5.0, 0.0), True, "within-noise"),
    ("negative band fails closed", (1.0, -1.0), (5.0, 0.0), True, "within-noise"),
]


@pytest.mark.parametrize("before,after,higher,expected", [r[1:] for r in RULE], ids=[r[0] for r in RULE])
def test_the_noise_rule(before, after, higher, expected):
    assert noise.judge(noise.Measured(*before), noise.Measured(*after), higher) == expected


def test_case_noise_takes_the_largest_part():
    c = case("softmax/tile/2097152x128/8x128", spread=0.003)
    assert noise.case_noise(c, {}) == 0.003
    assert noise.case_noise(c, {c.key: 0.01}) == 0.01
    assert noise.case_noise(c, {}, control=0.015) == 0.015
    assert noise.case_noise(c, {}, across_runs=True) == noise.ACROSS_RUNS
    assert noise.case_noise(c.model_copy(update={"spread": math.nan}), {}) == math.inf
    aa = {"k": PairedRatio(reference="r", cycles=9, pct_of_reference=98.5, q1=98.0, q3=99.0, control=True),
          "x": PairedRatio(reference="r", cycles=9, pct_of_reference=80.0, q1=79.0, q3=81.0)}
    assert noise.control_noise(aa) == pytest.approx(0.015)


# --- the comparison over FIXTURE bench records -------------------------------------------------------------------

KEY = "matmul/grouped/4096x4096x4096/128x256x64+warps8"


def timed(key: str, ms: float, spread: float = 0.005):
    return case(key, spread=spread).model_copy(update={"median_ms": ms})


def side(label: str, bench: list) -> diff.Snapshot:
    return diff.Snapshot(label, {}, {r.run_id: "0" * 64 for r in bench}, {}, bench)


@pytest.mark.parametrize("after_ms,expected,code", [(0.22, "within-noise", 0), (0.2222, "within-noise", 0),
                                                    (0.30, "regression", 1), (0.15, "improvement", 0)])
def test_a_bench_case_judged_by_the_rule(after_ms, expected, code):
    before = bench_record(1, [timed(KEY, 0.22)])
    after = bench_record(2, [timed(KEY, after_ms)])
    result = diff.compare(side("a", [before]), side("b", [before, after]))
    (bench,) = result.bench
    (one, best) = bench.cases
    assert (one.key, one.judged) == (KEY, expected)
    assert best.key == "matmul/grouped/4096x4096x4096/*" and best.judged == expected
    assert one.before.band_ms == pytest.approx(0.22 * noise.ACROSS_RUNS)
    assert result.exit_code == code
    assert result.records.added == [after.run_id]


def test_the_fastest_of_a_shape_is_compared_across_tile_configurations():
    before = bench_record(1, [timed(f"matmul/grouped/4096x4096x4096/{t}", ms) for t, ms in
                              (("64x64x32", 0.6), ("128x256x64+warps8", 0.3))])
    after = bench_record(2, [timed("matmul/grouped/4096x4096x4096/256x128x64+warps8+occ2", 0.2)])
    (bench,) = diff.compare(side("a", [before]), side("b", [before, after])).bench
    (best,) = bench.cases  # no case key on both sides: only the shape's fastest
    assert (best.before.case, best.after.case, best.judged) == (
        "matmul/grouped/4096x4096x4096/128x256x64+warps8", "matmul/grouped/4096x4096x4096/256x128x64+warps8+occ2",
        "improvement")


def test_records_of_other_gpu_classes_are_not_compared():
    l4 = dict(name="NVIDIA L4", uuid="GPU-f1c7ee00-0000-4000-8000-000000000089", cc="8.9", driver="580.65.06")
    before = bench_record(1, [timed(KEY, 0.22)])
    after = bench_record(2, [timed(KEY, 0.50)], gpu=l4)
    result = diff.compare(side("a", [before]), side("b", [before, after]))
    assert result.bench == [] and result.exit_code == 0


def test_a_broken_seal_or_failed_verdict_is_never_compared():
    before = bench_record(1, [timed(KEY, 0.22)])
    broken = bench_record(2, [timed(KEY, 0.50)], seal="broken")
    failed = bench_record(3, [timed(KEY, 0.50)], verdict="failed")
    assert diff.compare(side("a", [before]), side("b", [before, broken, failed])).bench == []


def lesson(standing, rows=None, status="published", releases=()):
    return diff.LessonState(id="x", status=status, standing=standing, rows=rows or {}, releases=releases)


@pytest.mark.parametrize("before,after,false", [("holds", "false", True), ("holds", "differs", True),
                                                ("holds", "blocked", True), ("false", "false", False),
                                                ("false", "holds", False), (None, "false", True),
                                                ("not-ready", "ready", False)])
def test_a_lesson_turned_false(before, after, false):
    a = diff.Snapshot("a", {"x": lesson(before)} if before else {}, {}, {})
    b = diff.Snapshot("b", {"x": lesson(after)}, {}, {})
    result = diff.compare(a, b)
    assert [x.turned_false for x in result.lessons] == ([false] if before != after else [])
    assert result.exit_code == int(false)


def test_rows_releases_records_and_claims_changed():
    row = diff.RowState(outcome="passed", run_id="r1", result="passed: max abs err 0")
    a = diff.Snapshot("a", {"x": lesson("holds", {"p c": row}, releases=("1.6.0",))},
                      {"r1": "a" * 64, "r2": "b" * 64, "gone": "c" * 64},
                      {("doc", "c1", "13.4"): ("confirmed", "k1"), ("doc", "c2", "13.4"): ("confirmed", "k1")})
    b = diff.Snapshot("b", {"x": lesson("holds", {"p c": row.model_copy(update={"run_id": "r3"})},
                                        releases=("1.7.0",))},
                      {"r1": "a" * 64, "r2": "d" * 64, "r3": "e" * 64},
                      {("doc", "c1", "13.4"): ("confirmed", "k1"), ("doc", "c2", "13.4"): ("refuted", "k2"),
                       ("doc", "c2", "13.5"): ("refuted", "k2")})
    result = diff.compare(a, b)
    (x,) = result.lessons
    assert [(r.row, r.before.run_id, r.after.run_id) for r in x.rows] == [("p c", "r1", "r3")]
    assert (x.releases_gained, x.releases_lost) == (["1.7.0"], ["1.6.0"])
    assert (result.records.added, result.records.removed, result.records.changed) == (["r3"], ["gone"], ["r2"])
    assert [(c.claim, c.release, c.before, c.after) for c in result.claims] == [
        ("c2", "13.4", "confirmed", "refuted"), ("c2", "13.5", None, "refuted")]
    assert result.exit_code == 0


# --- the command, on the committed evidence ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    return clone_at(tmp_path_factory.mktemp("diff") / "repo", HEAD_ID)


_COMMITS_READ: dict[tuple[str, str, str | None], diff.Snapshot] = {}
"""Each commit's snapshot as ``snapshot.at_commit`` read it, by repository, commit and trust root."""


@pytest.fixture(autouse=True)
def read_once(monkeypatch):
    """``gather.snapshot.at_commit`` read once per repository and commit in this module, not once per diff that
    names the commit: it reads a fresh checkout of the commit (``runner.worktree.checkout``), which no working-tree
    file enters, so the same commit of the same repository is the same snapshot. The first diff naming a commit
    reads it for real; the working tree (``snapshot.read``) is read by every diff."""
    real = snapshot.at_commit

    def at_commit(repo, commit: str, trust_root: str | None = None) -> diff.Snapshot:
        key = (str(repo), commit, trust_root)
        if key not in _COMMITS_READ:
            _COMMITS_READ[key] = real(repo, commit, trust_root)
        return _COMMITS_READ[key]
    monkeypatch.setattr(snapshot, "at_commit", at_commit)


def git(root, *args) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def run_diff(capsys, root, *args) -> tuple[int, str, str]:
    code = main(["diff", *args, "--root", str(root)])
    out = capsys.readouterr()
    return code, out.out, out.err


# Made by hand from ``git diff 347efc1 e0f4b50 -- lessons/`` and the bench records' cases: what the diff must say.
RESULT_ROWS = {  # day79-cutile: row -> (run before, run after)
    "kernels/tile_matmul_softmax.py matmul": ("20261201T142252Z-run-3f340aa3", "20261204T195611Z-run-bc0b0606"),
    "kernels/tile_matmul_softmax.py softmax": ("20261201T142252Z-run-3f340aa3", "20261204T195611Z-run-bc0b0606"),
    "cpp/tile_matmul_softmax.cu matmul": ("20261201T142301Z-run-3ee6fa74", "20261204T195624Z-run-39638471"),
    "cpp/tile_matmul_softmax.cu softmax": ("20261201T142301Z-run-3ee6fa74", "20261204T195624Z-run-39638471"),
    "kernels/fused.py fused": ("20261201T142214Z-run-37aa63e2", "20261204T195537Z-run-9eab5b18"),
}
SPIKE_ROWS = {f"cpp/tile_spike.cu {c}": ("20261201T142301Z-run-fbc4dee0", "20261204T195626Z-run-2313e946")
              for c in ("tile_max_native", "tile_sum_via_scan", "tile_sum_native")}
PERF_CLAIMS = ["softmax-course-tile", "softmax-128-rows", "softmax-occupancy", "online-course-tile", "online-occupancy",
               "matmul-parity-4096", "matmul-parity-8192", "cublas-power-8192", "tile-power-8192", "cublas-clock-8192",
               "tile-clock-8192", "cublas-tensor-8192", "tile-tensor-8192"]
SOFTMAX = ("kernels/bench/softmax_bench.py", "20261201T092610Z-bench-55789877", "20261201T221807Z-bench-1b05ae09")
MATMUL = ("kernels/bench/matmul_bench.py", "20261201T092413Z-bench-bbc58257", "20261201T221514Z-bench-0b85aade")


@pytest.mark.slow(reason="reads the committed tree at two commits, each from its own checkout")
def test_the_committed_evidence_between_two_commits(clone, capsys):
    code, out, err = run_diff(capsys, clone, COMMITTED[:7], "HEAD", "--format", "json")
    got = json.loads(out)
    assert (got["base"], got["head"]) == (COMMITTED, HEAD_ID)
    # records: exactly what git says was added under runs/ (95: 74 run, 17 session, 2 bench, 2 compile)
    added = sorted(line.split("/")[-1].removesuffix(".json") for line in
                   git(clone, "diff", "--name-only", "--diff-filter=A", COMMITTED, HEAD_ID, "--", "runs").split())
    assert len(added) == 95 and got["records"] == {"added": added, "removed": [], "changed": []}
    assert git(clone, "diff", "--name-only", "--diff-filter=DMR", COMMITTED, HEAD_ID, "--", "runs") == ""
    # lessons: two republished from the 2026-12-04 records, the performance note new
    lessons = {x["id"]: x for x in got["lessons"]}
    assert sorted(lessons) == ["day79-cutile", "day79-cutile-performance", "tile-reduction-spike"]
    day79 = lessons["day79-cutile"]
    assert (day79["status"], day79["standing"]) == (["published", "published"], ["holds", "holds"])
    assert {r["row"]: (r["before"]["run_id"], r["after"]["run_id"]) for r in day79["rows"]} == RESULT_ROWS
    assert (day79["releases_gained"], day79["releases_lost"]) == (["1.7.0"], [])
    spike = lessons["tile-reduction-spike"]
    assert {r["row"]: (r["before"]["run_id"], r["after"]["run_id"]) for r in spike["rows"]} == SPIKE_ROWS
    note = lessons["day79-cutile-performance"]
    assert (note["status"], note["standing"]) == ([None, "published"], [None, "holds"])
    assert [r["row"] for r in note["rows"]] == [f"perf:{c}" for c in PERF_CLAIMS]
    assert all(r["before"] is None and r["after"]["outcome"] == "supported" for r in note["rows"])
    # no claims record was added: no claim's verdict changed
    assert got["claims"] == []
    # bench: each program's newest H200 record before and after
    bench = {b["program"]: b for b in got["bench"]}
    assert {p: (b["before_run"], b["after_run"]) for p, b in bench.items()} == {
        SOFTMAX[0]: SOFTMAX[1:], MATMUL[0]: MATMUL[1:]}
    cases = {c["key"]: c for c in bench[SOFTMAX[0]]["cases"]}
    best = cases["softmax/tile/2097152x128/*"]  # the row softmax: 63% of the copy -> 99.7%
    assert (best["before"]["case"], best["after"]["case"], best["judged"]) == (
        "softmax/tile/2097152x128/128x128", "softmax/tile/2097152x128/16x128+occ8", "improvement")
    assert (round(best["before"]["median_ms"], 4), round(best["after"]["median_ms"], 4)) == (0.8113, 0.5107)
    assert (round(best["before"]["pct_of_ceiling"], 1), round(best["after"]["pct_of_ceiling"], 1)) == (63.0, 99.7)
    assert (round(best["before"]["spread"], 4), round(best["after"]["spread"], 4)) == (0.0052, 0.0033)
    assert best["before"]["band_ms"] == pytest.approx(0.8113 * 0.02, abs=1e-4)  # the 2% floor: its spread is 0.52%
    assert cases["softmax/tile/2097152x128/128x128"]["judged"] == "within-noise"  # 0.8113 -> 0.8079 ms
    # the one case beyond noise the other way: the tile matmul 128x128x32 at 8192^3, 1.9962 -> 2.1030 ms (+5.3%)
    # where the bands are 2% (floor) and 2.38% (its spread): 0.040 + 0.050 < 0.107
    regressed = [(b["program"], c["key"]) for b in got["bench"] for c in b["cases"] if c["judged"] == "regression"]
    assert regressed == [(MATMUL[0], "matmul/tile/8192x8192x8192/128x128x32")]
    # and the two beyond noise the right way: the row softmax's and the online softmax's fastest tile kernels
    # (online: 1x4096 at 2.6418 ms -> 1x4096+occ4 at 1.2496 ms); every other change is within its bands
    improved = [(b["program"], c["key"]) for b in got["bench"] for c in b["cases"] if c["judged"] == "improvement"]
    assert improved == [(SOFTMAX[0], "softmax/tile/2097152x128/*"), (SOFTMAX[0], "online_softmax/tile/4096x100000/*")]
    env = {f["name"]: (f["before"], f["after"]) for f in bench[SOFTMAX[0]]["environment"]}
    assert env["driver"] == ("580.159.04", "580.159.04") and env["cuda-tile"] == ("1.7.0", "1.7.0")
    assert env["GPU uuid"] == ("GPU-2346cf3f-a617-932e-8e34-b820710c1c16", "GPU-9be8c8f2-dc77-510d-3288-62745f30a540")
    # bench_version 1 -> 3: only the newer record read the clock and power through NVML (a 700 W limit)
    assert env["power limit"] == ("-", "700 W") and env["SM clock at start"] == ("1980 MHz", "345 MHz")
    assert (code, got["exit_code"]) == (1, 1)


@pytest.mark.slow(reason="reads the committed tree at two commits (once per module: read_once)")
def test_text_and_markdown_say_the_same(clone, capsys):
    code, out, _err = run_diff(capsys, clone, COMMITTED, HEAD_ID)
    assert code == 1
    assert "softmax/tile/2097152x128/* (fastest: softmax/tile/2097152x128/128x128 -> " \
           "softmax/tile/2097152x128/16x128+occ8): improvement, -37.0%" in out
    assert "63.0% of ceiling" in out and "99.7% of ceiling" in out
    code, md, _err = run_diff(capsys, clone, COMMITTED, HEAD_ID, "--format", "markdown")
    assert code == 1 and md.startswith("<!-- tileproof-diff -->\n")
    assert "| softmax/tile/2097152x128/* (fastest: " in md and "REGRESSION" in md


@pytest.mark.slow(reason="a clone of the committed tree, and seven diffs of it: three of its working tree, two "
                          "commits each read from a checkout of its own")
def test_exit_codes_on_a_repository(clone, tmp_path, capsys):
    repo = clone_at(tmp_path / "repo", HEAD_ID, clone)
    assert run_diff(capsys, repo, "HEAD")[0] == 0  # the working tree as committed: nothing changed
    # a hand edit makes the published lesson differ from its records: it turned false
    path = repo / "lessons" / "tile-reduction-spike.md"
    path.write_text(path.read_text().replace("max abs err 9.1e-05", "max abs err 1e-09", 1))
    code, out, _err = run_diff(capsys, repo, "HEAD")
    assert code == 1 and "tile-reduction-spike: status published, standing holds -> differs (TURNED FALSE)" in out
    git_commit_all(repo, "hand edit")
    assert run_diff(capsys, repo, "HEAD~1", "HEAD")[0] == 1
    assert run_diff(capsys, repo, "HEAD", "HEAD~1")[0] == 0  # the other way it turned true
    # bad input: one line, exit 2
    code, _out, err = run_diff(capsys, repo, "no-such-commit")
    assert code == 2 and err.count("\n") == 1 and "names no commit" in err
    with pytest.raises(SystemExit) as exited:
        run_diff(capsys, repo, "HEAD", "--format", "yaml")
    assert exited.value.code == 2 and "invalid choice: 'yaml'" in capsys.readouterr().err
    (repo / "runs" / "20261205T000000Z-run-00000000.json").write_text("{not json")
    code, _out, err = run_diff(capsys, repo, "HEAD")
    assert code == 2 and err.count("\n") == 1 and "20261205T000000Z-run-00000000.json" in err


def test_abbreviations_and_refs(clone):
    """diff decides no trust: it takes an abbreviation of one commit, a ref, HEAD; never one of two commits."""
    assert snapshot.resolve(clone, COMMITTED[:7]) == COMMITTED
    assert snapshot.resolve(clone, "HEAD") == HEAD_ID
    ids = git(clone, "rev-list", HEAD_ID).split()
    prefixes: dict[str, list[str]] = {}
    for full in ids:
        prefixes.setdefault(full[:4], []).append(full)
    shared = next((p for p, found in prefixes.items() if len(found) > 1), None)
    if shared is None:
        pytest.skip("no two commits of this history share four leading digits")
    with pytest.raises(snapshot.BadRevision, match="abbreviates"):
        snapshot.resolve(clone, shared)


def test_json_never_writes_a_bare_infinity():
    """A case whose spread is not finite has an unbounded band: JSON null, never the invalid ``Infinity``."""
    before = bench_record(1, [timed(KEY, 0.22)])
    after = bench_record(2, [timed(KEY, 0.30).model_copy(update={"spread": math.inf})])
    result = diff.compare(side("a", [before]), side("b", [before, after]))
    from tileproof.commands import diff as diff_cmd
    text = diff_cmd.render(result, "json")
    assert "Infinity" not in text and json.loads(text)["bench"][0]["cases"][0]["after"]["band_ms"] is None
    assert result.bench[0].cases[0].judged == "within-noise"
