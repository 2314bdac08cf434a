"""``tileproof history``: series across records in commit order, the steps found by binary segmentation with
the noise rule as its threshold, the command on the committed records, and the report's chart in a real browser."""

from pathlib import Path

import pytest
from conftest import clone_at
from headless import console_messages, needs_chromium, render
from test_diff import HEAD_ID
from test_perf_claims import bench_record, case

from tileproof.__main__ import main
from tileproof.judge import history, noise
from tileproof.report import history_render
from tileproof.report.page import Links


def points(*values, band=0.5):
    return [history.Point(f"r{i}", "2026-12-01 00:00", v, band, "k") for i, v in enumerate(values)]


STEPS = [
    ("flat", (63.0, 62.8, 62.9, 63.0), []),
    ("one step", (63.0, 62.8, 62.9, 99.7), [(3, "improvement")]),
    ("within bands", (63.0, 63.6), []),
    ("bands touch", (63.0, 64.0), [(1, "improvement")]),
    ("up then down", (60.0, 60.2, 80.0, 80.1, 70.0, 70.2), [(2, "improvement"), (4, "regression")]),
    ("a lone point far off inside a level is absorbed", (60.0, 60.1, 90.0, 60.0), []),
    ("a last point far off is a step", (63.0, 63.1, 62.9, 40.0), [(3, "regression")]),
    ("one point", (63.0,), []),
]


@pytest.mark.parametrize("values,expected", [s[1:] for s in STEPS], ids=[s[0] for s in STEPS])
def test_steps_by_binary_segmentation(values, expected):
    found = history.steps(points(*values))
    assert [(s.index, s.judged) for s in found] == expected


def test_a_level_with_scattered_points_has_their_spread_as_its_band():
    """Points that scatter more than their bands say: the levels' band is their pooled standard deviation."""
    scattered = points(60.0, 66.0, 60.0, 66.0, 64.0, band=0.1)
    assert history.steps(scattered) == []
    assert history.steps(points(1.0, 1.0, 2.0, 2.0, band=0.0))[0].before == noise.Measured(1.0, 0.0)
    (step,) = history.steps(points(1.0, 1.2, 1.1, 2.0, 2.2, 2.1, band=0.08))
    assert step.before.band == pytest.approx(0.1)  # sqrt((0.02 + 0.02) / 4), above the points' 0.08


def test_lower_is_better_for_an_error():
    (step,) = history.steps(points(1e-6, 1e-6, 5e-6, 5e-6, band=0.5e-6), higher_is_better=False)
    assert step.judged == "regression"


def softmax(n, tiles_pct, spread=0.004):
    cases = [case(f"softmax/tile/2097152x128/{t}", pct=pct, spread=spread, tflops=None, gbps=pct * 42.0)
             for t, pct in tiles_pct]
    cases = [c.model_copy(update={"median_ms": 51.0 / c.pct_of_ceiling}) for c in cases]
    return bench_record(n, cases, program="kernels/bench/softmax_bench.py")


LINKS = Links.of(Path("."), Path("."))
RECORDS = [softmax(1, [("8x128", 16.6), ("128x128", 63.0)]), softmax(2, [("8x128", 16.7), ("128x128", 62.8)]),
           softmax(3, [("8x128", 16.8), ("128x128", 63.0), ("16x128+occ8", 99.7)])]


def test_bench_series_and_the_fastest_of_a_shape():
    found = {s.key: s for s in history.bench_series(RECORDS, "kernels/bench/softmax_bench.py", "NVIDIA H200")}
    best = found["softmax/tile/2097152x128/* on NVIDIA H200, cc 9.0"]
    assert [(p.case.split("/")[-1], p.value) for p in best.points] == [("128x128", 63.0), ("128x128", 62.8),
                                                                        ("16x128+occ8", 99.7)]
    assert [(s.index, s.judged) for s in best.steps] == [(2, "improvement")]
    assert found["softmax/tile/2097152x128/128x128 on NVIDIA H200, cc 9.0"].steps == ()
    assert list(found)[0].startswith("softmax/tile/2097152x128/*"), "the fastest-of-shape series first"
    assert history.bench_series(RECORDS, "kernels/bench/softmax_bench.py", "NVIDIA L4") == []


def test_the_report_section(tmp_path):
    html = "\n".join(history_render.html(history_render.fastest_series(RECORDS), LINKS))
    assert html.startswith('<p class="muted">The fastest tile kernel')
    assert html.count("<svg") == 1  # one series of more than one record: the row softmax's fastest
    assert "62.9 ± 1.3% -&gt; 99.7 ± 2.0% (+58.5%), improvement" in html  # the mean of 63.0 and 62.8


@needs_chromium
@pytest.mark.slow(reason="one headless Chromium run")
def test_the_steps_chart_in_headless_chromium(tmp_path):
    """The section as a reviewer's browser draws it: no console message, the chart's dots and its step in the DOM,
    a screenshot kept (``history-steps.png``)."""
    page = tmp_path / "steps.html"
    page.write_text("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>steps</title></head><body>"
                    + "\n".join(history_render.html(history_render.fastest_series(RECORDS), LINKS))
                    + "</body></html>")
    got = render(page.as_uri(), png=tmp_path / "steps.png", size="900,400", min_png_bytes=5_000,
                 keep_as="history-steps.png")
    assert console_messages(got.stderr) == []
    assert got.stdout.count("<circle") == 3 and "<polyline" in got.stdout
    assert "improvement" in got.stdout


# --- the command, on the committed records ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    return clone_at(tmp_path_factory.mktemp("history") / "repo", HEAD_ID)


def run_history(capsys, root, *args):
    code = main(["history", *args, "--root", str(root)])
    out = capsys.readouterr()
    return code, out.out, out.err


# Read by hand from the two counted H200 softmax bench records (the 2026-11-29 ones are unsigned, from before the
# first key, and count toward nothing): the fastest row softmax was 128x128 at 63.0% of the device copy, then
# 16x128+occ8 at 99.7%.
SOFTMAX_STEP = ["kernels/bench/softmax_bench.py softmax/tile/2097152x128/* on NVIDIA H200, cc 9.0: % of ceiling over "
                "2 record(s), 1 step(s)",
                "  20261201T092610Z-bench-55789877  2026-12-01 09:26  63.0 ± 1.3%  level 1  "
                "softmax/tile/2097152x128/128x128",
                "  20261201T221807Z-bench-1b05ae09  2026-12-01 22:19  99.7 ± 2.0%  level 2  "
                "softmax/tile/2097152x128/16x128+occ8",
                "  step at 20261201T221807Z-bench-1b05ae09 (2026-12-01 22:19): 63.0 ± 1.3% -> 99.7 ± 2.0% (+58.3%), "
                "improvement"]


@pytest.mark.slow(reason="reads every committed record, three times")
def test_the_committed_softmax_history(clone, capsys):
    code, out, _err = run_history(capsys, clone, "kernels/bench/softmax_bench.py", "--gpu", "NVIDIA H200")
    assert code == 0
    lines = out.splitlines()
    start = lines.index(SOFTMAX_STEP[0])
    assert lines[start:start + 4] == SOFTMAX_STEP
    # every case key of the newest record has its series
    for key in ("softmax/tile/2097152x128/8x128", "softmax/tile/2097152x128/16x128+occ8", "softmax/cupy/2097152x128",
                "online_softmax/tile/4096x100000/1x4096+occ4", "copy/memcpy/268435456"):
        assert any(line.startswith(f"kernels/bench/softmax_bench.py {key} on NVIDIA H200, cc 9.0: ") for line in lines)
    code, out, _err = run_history(capsys, clone, "kernels/bench/softmax_bench.py:softmax/tile/2097152x128/*")
    assert code == 0 and out.splitlines()[:4] == SOFTMAX_STEP
    code, out, err = run_history(capsys, clone, "kernels/bench/softmax_bench.py:softmax/tile/9x9/*")
    assert code == 2 and out == "" and err.count("\n") == 1 and "no counted record" in err


@pytest.mark.slow(reason="reads every committed record, twice")
def test_a_check_error_history(clone, capsys):
    code, out, _err = run_history(capsys, clone, "kernels/tile_matmul_softmax.py:matmul")
    assert code == 0
    head = out.splitlines()[0]
    assert head.startswith("kernels/tile_matmul_softmax.py matmul on NVIDIA H200, cc 9.0: max abs error over ")
    assert head.endswith("0 step(s)")  # 4.4e-06 .. 5.2e-06: one level
    assert "  20261201T142252Z-run-3f340aa3  2026-12-01 14:22  4.5e-06 ± 2.2e-06  level 1" in out
    code, _out, err = run_history(capsys, clone, "kernels/nope.py")
    assert code == 2 and "kernels/nope.py: no counted record" in err
