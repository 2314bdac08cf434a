"""Performance claims: the pure rule (perf_claims.decide), publish refusing, status listing.

Every bench record here is a FIXTURE built in code (run id ``FIXTURE-...``, host
``fixture``); the end-to-end tests write them only into a temporary copy.
"""

from datetime import timedelta

import pytest
import yaml
from fixture_records import COMMIT, H200, T0, toolchain, transcript
from pydantic import ValidationError

from tileproof import lesson_text
from tileproof.__main__ import main
from tileproof.commands import status
from tileproof.judge import perf_claims
from tileproof.records import lessons, store
from tileproof.records.errors import RecordError
from tileproof.records.models import (
    BenchCase,
    BenchRecord,
    Environment,
    GitState,
    GpuFacts,
    GpuLoad,
    HostFacts,
    PerfClaim,
    Roofline,
    Step,
)
from tileproof.records.store import seal_of

LESSON = "day79-cutile"
MATMUL = "kernels/bench/matmul_bench.py"
SHAPE = "matmul/grouped/4096x4096x4096"
L4 = dict(H200, name="NVIDIA L4", uuid="GPU-f1c7ee00-0000-4000-8000-000000000089", cc="8.9")


# --- FIXTURE bench records, built in code --------------------------------------------


def case(key: str, pct: float = 93.6, spread: float = 0.04, noisy: bool | None = None, tflops: float | None = 620.0,
         gbps: float | None = None) -> BenchCase:
    name, variant, shape = key.split("/")[:3]
    tiles = key.split("/")[3].split("+")[0] if key.count("/") == 3 else None
    return BenchCase(name=name, variant=variant, shape=[int(x) for x in shape.split("x")], dtype="float16",
                     tiles=[int(x) for x in tiles.split("x")] if tiles else None, repeats=30, first_launch_ms=900.0,
                     median_ms=0.22, min_ms=0.21, max_ms=0.24, spread=spread,
                     noisy=spread > 0.10 if noisy is None else noisy, tflops=tflops, gbps=gbps,
                     pct_of_reference=pct, pct_of_ceiling=pct, max_rel_err=1e-3, checked=True, key=key)


def bench_record(n: int, cases: list[BenchCase], gpu: dict | None = H200, verdict: str = "passed",
                 program: str = MATMUL, seal: str = "intact", runtime_cc: str | None = "same",
                 bench_version: int = 1, load_unavailable: str | None = None) -> BenchRecord:
    """One FIXTURE bench record; larger n is newer. seal: intact, broken or none."""
    created = T0 + timedelta(minutes=n)
    run_id = f"FIXTURE-{created.strftime('%Y%m%dT%H%M%SZ')}-bench-{n:08x}"
    t = transcript(f"evidence/{run_id}/bench.stdout.txt", "FIXTURE\n")
    facts = None if gpu is None else GpuFacts(
        index=0, name=gpu["name"], uuid=gpu["uuid"], compute_capability=gpu["cc"],
        runtime_compute_capability=gpu["cc"] if runtime_cc == "same" else runtime_cc, driver_version=gpu["driver"],
        memory_total_mib=None, clocks_sm_mhz=None, clocks_mem_mhz=None)
    rec = BenchRecord(
        schema_version=1, kind="bench", run_id=run_id, created=created, tileproof_version="0.1.0",
        git=GitState(commit=COMMIT, dirty=False),
        host=HostFacts(system="fixture", release="fixture", machine="x86_64", python="3.11.7", cpu_count=16),
        environment=Environment(environment_version=1,
                                session_id=f"FIXTURE-bench-{n}", gpu=facts, toolchain=toolchain(),
                                toolchain_env="clean", versions={"cuda-tile": "1.7.0"}, packages={}, env={},
                                pip_freeze=t, nvidia_smi=None, nvidia_smi_query=None),
        program=program, sources=[], step=Step(step_version=1, name="bench", argv=["python", program], started=created,
                                               ended=created, duration_s=1.0, exit_code=0, stdout=t, stderr=t),
        results_file=None, gpu_before=None, gpu_after=None, cases=cases, ceilings={"tflops": 650.0},
        repeat_spread={}, bench_version=bench_version, load_unavailable=load_unavailable, verdict=verdict,
        reason="FIXTURE: hand-made test record, never produced by a GPU",
    )
    if seal == "none":
        return rec
    rec = rec.model_copy(update={"seal": seal_of(rec)})
    if seal == "broken":  # a byte changed after sealing
        rec = rec.model_copy(update={"cases": [c.model_copy(update={"pct_of_reference": 99.0}) for c in cases]})
    return rec


def claim(**kw) -> PerfClaim:
    base = dict(id="matmul-80", statement="tile matmul reaches >= 80% of cuBLAS at 4096³ on sm_90",
                case=f"{SHAPE}/*", metric="pct_of_reference", at_least=80.0, compute_capability="9.0",
                program="kernels/bench/matmul_bench.py")
    return PerfClaim(**{**base, **kw})


SWEEP = [case(f"{SHAPE}/64x64x32", pct=30.6, spread=0.002), case(f"{SHAPE}/128x256x64+warps8", pct=93.6, spread=0.04),
         case(f"{SHAPE}/256x128x64+warps8", pct=90.1, spread=0.037), case("matmul/cublas/4096x4096x4096", pct=100.0)]


# --- the rule, as a table ----------------------------------------------------------------

TABLE = [
    # (id, claim overrides, records, outcome, words in the reason)
    ("supported-best-over-tiles", {}, [bench_record(1, SWEEP)], "supported",
     ["128x256x64+warps8", "93.6% of reference >= 80", "margin 13.6 points"]),
    ("supported-exact-key", {"case": f"{SHAPE}/256x128x64+warps8"}, [bench_record(1, SWEEP)], "supported",
     ["256x128x64+warps8 pct_of_reference 90.1%"]),
    ("supported-tflops", {"metric": "tflops", "at_least": 500}, [bench_record(1, SWEEP)], "supported",
     ["620.0 TFLOP/s >= 500"]),
    ("no-record-at-all", {}, [], "no-bench-record", ["no bench record of kernels/bench/matmul_bench.py"]),
    ("no-record-of-this-program", {}, [bench_record(1, SWEEP, program="kernels/bench/softmax_bench.py")],
     "no-bench-record", ["no bench record of"]),
    ("no-matching-case", {"case": "matmul/grouped/2048x2048x2048/*"}, [bench_record(1, SWEEP)], "no-bench-record",
     ["has a case matmul/grouped/2048x2048x2048/* with pct_of_reference"]),
    ("reference-is-not-a-tile", {"case": "matmul/cublas/4096x4096x4096/*"}, [bench_record(1, SWEEP)],
     "no-bench-record", ["has a case"]),
    ("metric-not-measured", {"metric": "gbps"}, [bench_record(1, SWEEP)], "no-bench-record", ["with gbps"]),
    ("failed-verdict", {}, [bench_record(1, SWEEP, verdict="failed")], "no-bench-record", ["with verdict passed"]),
    ("wrong-cc", {}, [bench_record(1, SWEEP, gpu=L4)], "wrong-hardware",
     ["NVIDIA L4, cc 8.9", "the claim is about cc 9.0"]),
    ("wrong-cc-claim-for-l4", {"compute_capability": "8.9"}, [bench_record(1, SWEEP)], "wrong-hardware",
     ["NVIDIA H200, cc 9.0"]),
    ("cc-disagrees-in-record", {}, [bench_record(1, SWEEP, runtime_cc="8.9")], "wrong-hardware", ["disagreeing"]),
    ("no-gpu", {}, [bench_record(1, SWEEP, gpu=None)], "wrong-hardware", ["no GPU"]),
    ("below-claim", {"at_least": 95}, [bench_record(1, SWEEP)], "below-claim",
     ["93.6% of reference, below the claimed 95 by 1.4 points"]),
    ("spread-larger-than-margin", {"at_least": 90}, [bench_record(1, SWEEP)], "spread-exceeds-margin",
     ["margin 3.6 points over 90 is smaller than its spread 4.0% of 93.6 = 3.7 points"]),
    ("noisy", {}, [bench_record(1, [case(f"{SHAPE}/128x128x64", pct=95.0, spread=0.12)])], "noisy",
     ["spread 12.0% > 10%"]),
    ("nan-spread-fails-closed", {}, [bench_record(1, [case(f"{SHAPE}/128x128x64", spread=float("nan"), noisy=False)])],
     "noisy", ["noisy"]),
    ("nan-value-is-no-value", {}, [bench_record(1, [case(f"{SHAPE}/128x128x64", pct=float("nan"))])],
     "no-bench-record", ["has a case"]),
    ("clean-case-beats-noisy-best", {}, [bench_record(1, [case(f"{SHAPE}/128x128x32", pct=99.0, spread=0.2),
                                                          case(f"{SHAPE}/128x128x64", pct=88.0, spread=0.01)])],
     "supported", [f"{SHAPE}/128x128x64 "]),
    ("broken-seal", {}, [bench_record(1, SWEEP, seal="broken")], "no-bench-record",
     ["ignored, seal broken: FIXTURE-"]),
    ("unsealed", {}, [bench_record(1, SWEEP, seal="none")], "no-bench-record", ["ignored, seal broken"]),
    ("broken-newer-seal-never-counts", {"at_least": 95},
     [bench_record(1, SWEEP), bench_record(2, SWEEP, seal="broken")], "below-claim", ["ignored, seal broken"]),
    ("newest-passed-record-decides", {},
     [bench_record(1, SWEEP), bench_record(2, [case(f"{SHAPE}/128x256x64+warps8", pct=70.0, spread=0.01)])],
     "below-claim", ["-bench-00000002", "70.0%"]),
    ("newer-failed-record-is-skipped", {},
     [bench_record(1, SWEEP), bench_record(2, [case(f"{SHAPE}/64x64x32", pct=10.0)], verdict="failed")],
     "supported", ["-bench-00000001"]),
    ("newer-record-from-other-gpu-is-skipped", {},
     [bench_record(1, SWEEP), bench_record(2, [case(f"{SHAPE}/64x64x32", pct=10.0)], gpu=L4)],
     "supported", ["-bench-00000001"]),
]


@pytest.mark.parametrize("overrides, records, outcome, words", [t[1:] for t in TABLE], ids=[t[0] for t in TABLE])
def test_rule(overrides, records, outcome, words):
    c = claim(**overrides)
    (d,) = perf_claims.decide([c], records)
    assert d.outcome == outcome, d.reason
    for w in words:
        assert w in d.reason, d.reason
    assert "\n" not in d.reason
    if outcome == "supported":
        assert d.command is None
        assert d.record is not None
        assert d.margin == pytest.approx(d.value - c.at_least)
        assert d.case.spread * d.value <= d.margin
    else:
        assert "nox -s bench -- --program kernels/bench/matmul_bench.py" in d.command
        assert f"compute capability {c.compute_capability}" in d.command


# --- the metrics derived from a case's roofline and its GPU load (bench_version 3) -------------------

LOAD = GpuLoad(samples=120, window_s=1.5, sm_clock_mhz=1480.0, sm_clock_q1_mhz=1455.0, sm_clock_q3_mhz=1500.0,
               max_sm_clock_mhz=1980.0, power_w=697.0, power_q1_w=690.0, power_q3_w=700.0, power_limit_w=700.0,
               power_reading="instant", reasons={"sw_power_cap": 0.97}, pct_of_peak_at_clock=86.0)
ROOF = Roofline(bound="flops", ceiling="dense peak", ceiling_key=None, ceiling_rate=1070.5, pct_of_ceiling=58.0,
                floor_ms=0.16)


def loaded(key: str, spread: float = 0.02, load: GpuLoad | None = LOAD) -> BenchCase:
    """A FIXTURE case with a roofline (median 0.22 ms over a 0.16 ms floor) and, unless None, its GPU load."""
    return case(key, spread=spread).model_copy(update={"roofline": ROOF, "load": load})


@pytest.mark.parametrize("metric, at_least, want, words", [
    ("pct_of_power_limit", 90, "supported", ["pct_of_power_limit 98.6% of the power limit >= 90"]),
    ("pct_below_max_clock", 20, "supported", ["pct_below_max_clock 24.2% below the maximum SM clock"]),
    ("pct_below_max_clock", 25, "below-claim", ["below the claimed 25 by 0.8 points"]),
    ("pct_of_peak_at_clock", 80, "supported", ["86.0% of the dense peak at its clock"]),
    ("times_floor", 1.3, "supported", ["times_floor 1.38x its roofline floor >= 1.3: margin 0.07x"]),
    ("times_floor", 1.36, "spread-exceeds-margin", ["over 1.36 is smaller than its spread 2.0% of 1.38 = 0.03x"]),
], ids=lambda v: str(v) if not isinstance(v, list) else "")
def test_load_and_roofline_metrics(metric, at_least, want, words):
    """What the GPU did (quartiles of the NVML readings against the card's limits) and how far the case is
    from its floor are claimable like any rate: with the same margin rule."""
    rec = bench_record(1, [loaded(f"{SHAPE}/256x256x64+ctas2")], bench_version=3)
    (d,) = perf_claims.decide([claim(metric=metric, at_least=at_least, case=f"{SHAPE}/*")], [rec])
    assert d.outcome == want, d.reason
    for w in words:
        assert w in d.reason, d.reason


def test_a_case_without_load_gives_no_value_for_the_load_metrics():
    rec = bench_record(1, [loaded(f"{SHAPE}/256x256x64+ctas2", load=None)], bench_version=3,
                       load_unavailable="FIXTURE: pynvml is not installed")
    for metric in ("pct_of_power_limit", "pct_below_max_clock", "pct_of_peak_at_clock"):
        (d,) = perf_claims.decide([claim(metric=metric, at_least=1)], [rec])
        assert d.outcome == "no-bench-record"
        assert f"with {metric}" in d.reason
    (d,) = perf_claims.decide([claim(metric="times_floor", at_least=1)], [bench_record(1, SWEEP)])
    assert d.outcome == "no-bench-record", "a record before rooflines has no floor"


def test_outcomes_are_closed_and_covered():
    assert set(perf_claims.OUTCOMES) == {t[3] for t in TABLE}
    assert set(perf_claims.OUTCOMES) == set(status.PERF_WORDS)


def test_margin_equal_to_spread_is_enough():
    """value (1 - spread) >= at_least: exactly at the boundary the claim holds, just above it fails."""
    rec = bench_record(1, [case(f"{SHAPE}/128x128x64", pct=100.0, spread=0.05)])
    assert perf_claims.decide([claim(at_least=95.0)], [rec])[0].outcome == "supported"
    assert perf_claims.decide([claim(at_least=95.01)], [rec])[0].outcome == "spread-exceeds-margin"


def test_fix_suggests_what_the_record_supports():
    (d,) = perf_claims.decide([claim(at_least=95)], [bench_record(1, SWEEP)])
    # best over clean cases of value * (1 - spread), rounded down: 93.6 * 0.96 = 89.856 -> 89.8
    assert "lower at_least to 89.8 (what the record supports)" in d.command
    (again,) = perf_claims.decide([claim(at_least=89.8)], [bench_record(1, SWEEP)])
    assert again.supported


def test_decide_is_pure_and_ordered():
    claims = [claim(id="a"), claim(id="b", at_least=99), claim(id="c", compute_capability="8.0")]
    records = [bench_record(1, SWEEP)]
    first = perf_claims.decide(claims, records)
    assert [d.claim.id for d in first] == ["a", "b", "c"]
    assert [d.outcome for d in first] == ["supported", "below-claim", "wrong-hardware"]
    assert perf_claims.decide(claims, records) == first
    assert perf_claims.decide([], records) == []


@pytest.mark.parametrize("pattern, key, hit", [
    (f"{SHAPE}/*", f"{SHAPE}/128x256x64+warps8", True),
    (f"{SHAPE}/*", "matmul/grouped/4096x4096x40960/128x256x64", False),
    (f"{SHAPE}/*", "matmul/cublas/4096x4096x4096", False),
    (f"{SHAPE}/*", SHAPE, False),
    (f"{SHAPE}/128x256x64+warps8", f"{SHAPE}/128x256x64+warps8", True),
    (f"{SHAPE}/128x256x64", f"{SHAPE}/128x256x64+warps8", False),
])
def test_matches(pattern, key, hit):
    assert perf_claims.matches(pattern, key) is hit


@pytest.mark.parametrize("field, value", [
    ("case", "matmul/*"), ("case", "matmul/grouped/*/128x128x64"), ("case", "matmul/grouped/4096/12*"),
    ("compute_capability", "sm_90"), ("metric", "speedup"), ("statement", ""), ("at_least", float("nan")),
])
def test_claim_fields_are_validated(field, value):
    with pytest.raises(ValidationError):
        claim(**{field: value})


# --- lessons: the front matter, rendering ------------------------------------------------


PERF_NOTES = {"day79-cutile-performance"}
"""The repository's notes whose numbers are performance claims; every other lesson makes none."""


def test_repo_lessons_declare_no_claims_and_stay_canonical(repo_root):
    for lesson in lessons.load_all(repo_root):
        assert lesson_text.render(lesson, lesson.front) == lesson.text
        if lesson.id in PERF_NOTES:
            continue
        assert lesson.front.performance == [], lesson.id  # day-79 makes no performance claim
        assert "performance:" not in lesson.front_text


def bench_plan_keys(program: str) -> set[str]:
    """Every case key the bench plan of ``program`` times at its full sizes (the keys its records hold)."""
    from test_bench import load as load_program

    m = load_program(program.rsplit("/", 1)[1])
    if program.endswith("matmul_bench.py"):
        return {f"matmul/{c.variant}/{m.shape_tag(z)}/{c.tag}" for c in m.configs(m.TILES) for z in m.SIZES} | \
            {f"matmul/cublas/{m.shape_tag(z)}" for z in m.SIZES}
    shapes = {"softmax": m.ROW_SHAPE, "online_softmax": m.ONLINE_SHAPE}
    return {m.case_key(c, c.name, shapes[c.name]) for c in m.configs("bench")} | \
        {m.case_key(None, name, shape) for name, shape in shapes.items()}


def test_the_performance_notes_claim_what_the_bench_plans_time(repo_root):
    """Each claim of a performance note names a case its bench program's plan times (a key that no
    plan times could never be supported), and the note's body cites every claim by its id."""
    notes = [lesson for lesson in lessons.load_all(repo_root) if lesson.id in PERF_NOTES]
    assert {n.id for n in notes} == PERF_NOTES
    for note in notes:
        assert note.front.programs == []
        assert note.front.results == []
        assert note.front.performance
        body = note.text.split("\n---\n", 1)[1]
        for c in note.front.performance:
            keys = bench_plan_keys(c.program)
            assert any(perf_claims.matches(c.case, k) for k in keys), (c.id, c.case)
            assert f"`{c.id}`" in body, f"the body cites claim {c.id}"


def perf_yaml(*claims: dict) -> str:
    return yaml.safe_dump({"performance": list(claims)}, sort_keys=False, allow_unicode=True, width=4096)


CLAIM = dict(id="matmul-80", statement="tile matmul reaches >= 80% of cuBLAS at 4096³ on sm_90", case=f"{SHAPE}/*",
             metric="pct_of_reference", at_least=80, compute_capability="9.0", program="kernels/bench/matmul_bench.py")


def with_claims(path, *claims):
    text = path.read_text()
    path.write_text(text.replace("\nhardware:\n", "\n" + perf_yaml(*claims) + "hardware:\n", 1))



def test_lesson_with_claims_parses_and_renders_canonically(tree):
    path = tree / "lessons" / f"{LESSON}.md"
    with_claims(path, CLAIM, dict(CLAIM, id="matmul-tflops", metric="tflops", at_least=500, program=MATMUL))
    lesson = lessons.load(tree, LESSON)
    assert [c.id for c in lesson.front.performance] == ["matmul-80", "matmul-tflops"]
    assert lesson.front.performance[0].program == MATMUL  # the default
    assert lesson_text.render(lesson, lesson.front) == lesson.text


@pytest.mark.parametrize("change, field", [
    (dict(id="matmul-80"), "performance.1.id"),
    (dict(id="x", program="kernels/tile_matmul_softmax.py"), "performance.1.program"),
    (dict(id="y", program="../kernels/bench/matmul_bench.py"), "performance.1.program"),
])
def test_bad_claims_are_one_line(tree, change, field):
    path = tree / "lessons" / f"{LESSON}.md"
    with_claims(path, CLAIM, dict(CLAIM, **change))
    with pytest.raises(RecordError) as e:
        lessons.load(tree, LESSON)
    assert f": {field}: " in str(e.value)
    assert "\n" not in str(e.value)


# --- publish and status, end to end -------------------------------------------------------


def cli(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_publish_refuses_unsupported_claims_then_publishes(tree, capsys):
    path = tree / "lessons" / f"{LESSON}.md"
    with_claims(path, CLAIM, dict(CLAIM, id="matmul-95", at_least=95))
    before = path.read_bytes()

    # Every results row has its run record, but no bench record backs the claims.
    code, out = cli(capsys, "publish", LESSON, "--root", str(tree))
    assert code == 1
    assert path.read_bytes() == before
    assert out.startswith(f"{LESSON}: stays draft; 2 of 2 performance claims lack a supporting bench record; "
                          "nothing changed:")
    assert "  perf claim matmul-80 (tile matmul reaches >= 80% of cuBLAS at 4096³ on sm_90): no-bench-record: " in out
    assert "fix: on a GPU of compute capability 9.0: nox -s bench -- --program kernels/bench/matmul_bench.py" in out

    # A record from other hardware does not count.
    store.write_record(tree, bench_record(10, SWEEP, gpu=L4))
    code, out = cli(capsys, "publish", LESSON, "--root", str(tree))
    assert code == 1
    assert out.count(": wrong-hardware: ") == 2
    assert path.read_bytes() == before

    # An H200 record supports one claim, not the other: still draft, and only the other is listed.
    store.write_record(tree, bench_record(11, SWEEP))
    code, out = cli(capsys, "publish", LESSON, "--root", str(tree))
    assert code == 1
    assert path.read_bytes() == before
    assert "1 of 2 performance claims lack" in out
    assert "matmul-80" not in out
    assert "perf claim matmul-95 (" in out
    assert ": below-claim: bench FIXTURE-" in out

    lines = status.status(tree, [LESSON])
    perf = {ln.split()[3]: ln for ln in lines if ln.startswith(LESSON + " ") and " perf:" in ln}
    assert "supported: 93.6% of reference >= 80%" in perf["perf:matmul-80"]
    assert "below claim: 93.6% of reference < 95%" in perf["perf:matmul-95"]
    assert all("-bench-0000000b" in ln and "NVIDIA H200 cc 9.0" in ln for ln in perf.values())
    assert lines[-1].startswith(f"{LESSON}: draft, 5/5 required rows have evidence, 1/2 performance claims "
                                "supported; stays draft; next: make the kernel faster")

    # Withdraw the unsupported claim: publish, and the claim block stays as written.
    path.write_text(before.decode().replace(perf_yaml(CLAIM, dict(CLAIM, id="matmul-95", at_least=95)),
                                            perf_yaml(CLAIM)))
    written = path.read_text()
    code, out = cli(capsys, "publish", LESSON, "--root", str(tree))
    assert code == 0
    assert out.startswith(f"{LESSON}: published from NVIDIA H200")
    assert "  perf claim matmul-80 (" in out
    assert ": supported: bench FIXTURE-" in out
    assert perf_yaml(CLAIM) in path.read_text()
    assert lessons.load(tree, LESSON).front.status == "published"
    assert lessons.load(tree, LESSON).front.performance == lessons.parse(path, written).front.performance

    # The bench record goes: the published lesson's claim no longer holds, and publish says so.
    (tree / "runs" / f"{bench_record(11, SWEEP).run_id}.json").unlink()
    published = path.read_bytes()
    code, out = cli(capsys, "publish", LESSON, "--root", str(tree))
    assert code == 1
    assert path.read_bytes() == published
    assert "published, but its evidence no longer holds" in out
    assert "perf claim matmul-80 (" in out
    assert ": wrong-hardware: " in out  # only the L4 record is left


def test_rows_and_claims_missing_are_both_listed(tree, capsys):
    path = tree / "lessons" / f"{LESSON}.md"
    with_claims(path, CLAIM)
    (tree / "kernels" / "fused.py").write_text("# edited after its run\n")
    code, out = cli(capsys, "publish", LESSON, "--root", str(tree), "--dry-run")
    assert code == 1
    assert ("stays draft; 1 of 5 required rows lack evidence and 1 of 1 performance claims lack a supporting "
            "bench record; nothing changed:") in out
    assert "kernels/fused.py fused: stale: " in out
    assert "perf claim matmul-80 (" in out


def test_lessons_without_claims_read_no_bench_records(tree, capsys, monkeypatch):
    """A lesson with no claims is decided exactly as before: the bench records (loaded once, with
    every record, by type) are never judged for it."""
    from tileproof.gather.tree import Tree
    from tileproof.judge import gate

    def refuse(claims, records):
        raise AssertionError("bench records judged for a lesson without claims")

    monkeypatch.setattr(gate, "decide_perf", refuse)
    code, out = cli(capsys, "publish", LESSON, "--root", str(tree), "--dry-run")
    assert code == 0
    assert "perf claim" not in out
    assert Tree.load(tree).decide(lessons.load(tree, LESSON)).perf == ()


NOTE = """---
lesson_version: 1
id: perf-note
title: A note whose numbers are performance claims
status: draft
programs: []
hardware:
  gpu: null
  compute_capability: null
  driver: null
  cuda: null
  tileiras: null
  cuda_tile: null
  run_id: null
results: []
{claims}---
# A note

The cluster kernel draws 90% or more of the power limit (`power`).

<!-- results:begin -->
| Program | Check | Bound | Result | Run |
|---|---|---|---|---|
<!-- results:end -->
"""


def test_a_note_of_claims_alone_publishes_once_a_bench_record_supports_them(tree, capsys):
    """A lesson with no programs of its own (a performance note) is decided by its claims alone: draft
    while no bench record supports them, published once one does, and it reads back and audits clean."""
    power = dict(id="power", statement="the cluster kernel draws 90% or more of the power limit",
                 case=f"{SHAPE}/256x256x64+ctas2", metric="pct_of_power_limit", at_least=90,
                 compute_capability="9.0", program="kernels/bench/matmul_bench.py")
    path = tree / "lessons" / "perf-note.md"
    path.write_text(NOTE.replace("{claims}", perf_yaml(power)))
    note = lessons.load(tree, "perf-note")
    assert lesson_text.render(note, note.front) == path.read_text()
    code, out = cli(capsys, "publish", "perf-note", "--root", str(tree))
    assert code == 1
    assert "1 of 1 performance claims lack a supporting bench record" in out
    store.write_record(tree, bench_record(12, [loaded(f"{SHAPE}/256x256x64+ctas2")], bench_version=3))
    code, out = cli(capsys, "publish", "perf-note", "--root", str(tree))
    assert code == 0, out
    assert out.startswith("perf-note: published from the bench record FIXTURE-")
    assert "behind its performance" in out
    note = lessons.load(tree, "perf-note")
    assert note.front.status == "published"
    assert note.front.performance[0].id == "power"
    assert note.front.results == [], "no program: no hardware block to fill"
    assert note.front.hardware.gpu is None, "no program: no hardware block to fill"
    code, out = cli(capsys, "publish", "perf-note", "--root", str(tree), "--dry-run")
    assert code == 0
    assert "already published" in out
    from tileproof.gather.tree import Tree

    verdict = Tree.load(tree).verdict(note)
    assert verdict.valid, "it shows what its records give"
    assert verdict.rederived == (), "it shows what its records give"
    assert verdict.findings() == [], "it shows what its records give"
    # A newer bench record that supports the claim too is no finding: the note stays valid as written.
    store.write_record(tree, bench_record(13, [loaded(f"{SHAPE}/256x256x64+ctas2")], bench_version=3))
    assert Tree.load(tree).verdict(lessons.load(tree, "perf-note")).findings() == []
