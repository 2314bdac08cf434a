"""Lesson files: parsing, one-line errors, canonical rendering, the program-list digest."""

import hashlib
import json
import math
import re

import discovered
import pytest

from tileproof import lesson_text
from tileproof.records import lessons, store
from tileproof.records.errors import RecordError
from tileproof.records.models import Hardware, ResUsage
from tileproof.records.tolerances import load_table

LESSON_IDS = discovered.lesson_ids()


def test_repo_lessons_load_and_drafts_claim_nothing(repo_root):
    loaded = lessons.load_all(repo_root)
    assert [lesson.id for lesson in loaded] == sorted(LESSON_IDS)
    for lesson in loaded:
        if lesson.front.status == "draft":  # published only by `nox -s publish`, from records
            assert lesson.front.hardware == Hardware()
            assert all(r.result == "?" and r.run_id is None for r in lesson.front.results)
        elif lesson.front.programs:  # a published lesson names the run behind every filled row
            assert lesson.front.hardware.run_id
            assert all(r.run_id for r in lesson.front.results if r.result != "?")
        else:  # a published note without programs stands on its performance claims alone (bench records)
            assert lesson.front.performance
            assert lesson.front.hardware == Hardware()
            assert lesson.front.results == []


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
def test_repo_lessons_are_in_canonical_form(repo_root, lesson_id):
    """Rendering a lesson from its own front matter gives back the same bytes."""
    lesson = lessons.load(repo_root, lesson_id)
    assert lesson_text.render(lesson, lesson.front) == lesson.text


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
def test_repo_lesson_programs_exist(repo_root, lesson_id):
    assert lessons.missing_programs(repo_root, lessons.load(repo_root, lesson_id)) == []


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
def test_repo_lesson_bounds_match_the_tolerance_table(repo_root, lesson_id):
    table = load_table(repo_root)
    for row in lessons.load(repo_root, lesson_id).front.results:
        if row.optional:
            continue
        m = re.search(r"rtol ([0-9.e+-]+).*atol ([0-9.e+-]+)", row.bound)
        assert m, f"{row.check}: bound {row.bound!r} names no rtol/atol"
        rtol, atol = table[row.check]
        assert math.isclose(float(m.group(1)), rtol, rel_tol=0.02), row
        assert math.isclose(float(m.group(2)), atol, rel_tol=0.02), row


def test_day79_lesson_content(repo_root):
    lesson = lessons.load(repo_root, "day79-cutile")
    paths = [p.path for p in lesson.front.programs]
    assert paths == ["kernels/tile_matmul_softmax.py", "cpp/tile_matmul_softmax.cu", "kernels/fused.py"]
    gate_rows = [r for r in lesson.front.results if r.optional]
    assert len(gate_rows) == 1
    assert gate_rows[0].check == "gate"
    for heading in ("## Exercise", "Hint 1", "Hint 2", "## Pitfalls", "## The C++ mirror", "## Results"):
        assert heading in lesson.body
    # no performance claim: no timings, throughputs or speed-ups
    assert not re.search(r"\d\s*(%|percent|GFLOP|TFLOP|GB/s|ms\b|us\b|µs|x faster)", lesson.body, re.I)


def test_spike_note_keeps_its_headline_a_claim(repo_root):
    lesson = lessons.load(repo_root, "tile-reduction-spike")
    assert "declares `sum`" in lesson.body
    assert "claim" in lesson.body
    table = lessons.block_text(lesson.shown, lesson.body, lessons.RES_USAGE)
    # Published: the REG/SHARED table is filled from compile records (one pair of columns per release), no '?'.
    assert lesson.front.status == "published"
    assert "?" not in table
    cited = re.findall(r"compile record `([0-9TZ]+-compile-[0-9a-f]{8})`", table)
    assert cited and all((repo_root / "runs" / f"{run_id}.json").is_file() for run_id in cited), table
    assert "| `tile_sum_native` |" in table


def test_program_list_digest_is_the_documented_formula(repo_root):
    front = lessons.load(repo_root, "day79-cutile").front
    data = json.dumps([p.model_dump(mode="json") for p in front.programs], sort_keys=True, separators=(",", ":"))
    assert lessons.program_list_digest(front) == hashlib.sha256(data.encode()).hexdigest()
    changed = front.model_copy(update={"programs": front.programs[:2]})
    assert lessons.program_list_digest(changed) != lessons.program_list_digest(front)


# --- finding -------------------------------------------------------------------------


def test_find_suggests_the_closest_id(repo_root):
    with pytest.raises(RecordError) as e:
        lessons.find(repo_root, "day97-cutlie")
    assert str(e.value).startswith("lessons/day97-cutlie.md: no such lesson; did you mean 'day79-cutile'?")
    assert "\n" not in str(e.value)


def test_find_accepts_a_path(repo_root):
    assert lessons.find(repo_root, "lessons/day79-cutile.md").name == "day79-cutile.md"


# --- bad front matter: one line naming file and field --------------------------------

GOOD = """---
lesson_version: 1
id: demo
title: Demo
status: draft
programs:
- path: kernels/a.py
  checks:
  - matmul
hardware:
  gpu: null
  compute_capability: null
  driver: null
  cuda: null
  tileiras: null
  cuda_tile: null
  run_id: null
results:
- program: kernels/a.py
  check: matmul
  bound: rtol 1e-4, atol 1e-3
  result: '?'
  run_id: null
---
Body text.

<!-- results:begin -->
old table
<!-- results:end -->

Tail text.
"""


def parse(text):
    return lessons.parse("lessons/demo.md", text)


def test_good_parses():
    assert parse(GOOD).front.programs[0].checks == ["matmul"]


@pytest.mark.parametrize("old, new, where", [
    ("---\nlesson_version", "lesson_version", "lessons/demo.md: line 1: no front matter"),
    ("---\nBody", "Body", "lessons/demo.md: line 1: front matter is never closed"),
    ("title: Demo", "title: [Demo", "lessons/demo.md: line 5: front matter is not valid YAML"),
    ("status: draft", "status: done", "lessons/demo.md: status: Input should be 'draft' or 'published'"),
    ("id: demo", "id: other", "lessons/demo.md: id: is 'other' but the file is demo.md"),
    ("lesson_version: 1", "lesson_version: 2", "lessons/demo.md: lesson_version:"),
    ("title: Demo\n", "title: Demo\ncolour: red\n", "lessons/demo.md: colour: Extra inputs are not permitted"),
    ("- path: kernels/a.py", "- path: src/a.py", "lessons/demo.md: programs.0.path: 'src/a.py' is not a program"),
    ("- path: kernels/a.py", "- path: kernels/../a.py", "programs.0.path:"),
    ("- program: kernels/a.py", "- program: kernels/b.py", "results.0.program: 'kernels/b.py' is not in programs"),
    ("  check: matmul\n  bound", "  check: softmax\n  bound", "results.0.check: 'softmax' is not a check"),
    ("  gpu: null", "  gpu: NVIDIA H200", "hardware.gpu: must be null while the lesson is draft"),
    ("  result: '?'", "  result: passed", "results.0.result: must be '?'"),
    ("  check: matmul\n  bound: rtol 1e-4, atol 1e-3\n", "  check: gate\n  bound: x\n  optional: true\n",
     "results.0: an optional row must be a 'gate' row that names its hardware"),
])
def test_bad_front_matter_is_one_line(old, new, where):
    assert old in GOOD
    with pytest.raises(RecordError) as e:
        parse(GOOD.replace(old, new, 1))
    message = str(e.value)
    assert where in message
    assert "\n" not in message
    assert "(fix: " in message


def test_missing_row_for_a_check():
    text = GOOD.replace("  - matmul\n", "  - matmul\n  - softmax\n", 1)
    with pytest.raises(RecordError, match="results: no row for kernels/a.py softmax"):
        parse(text)


def test_load_names_the_file_relative(tmp_path):
    (tmp_path / "lessons").mkdir()
    (tmp_path / "lessons" / "demo.md").write_text(GOOD.replace("status: draft", "status: nope"))
    with pytest.raises(RecordError, match=r"^lessons/demo.md: status: "):
        lessons.load(tmp_path, "demo")


# --- rendering -----------------------------------------------------------------------


def test_render_changes_only_the_owned_parts():
    lesson = parse(GOOD.replace("status: draft\n", "# a comment the author keeps\nstatus: draft\n"))
    rows = [lesson.front.results[0].model_copy(update={"result": "passed", "run_id": "R1"})]
    front = lesson.front.model_copy(update={"status": "published", "results": rows,
                                            "hardware": Hardware(gpu="G", run_id="R1")})
    text = lesson_text.render(lesson, front)
    assert parse(text).front == front
    assert "# a comment the author keeps\nstatus: published\n" in text
    assert text.startswith("---\nlesson_version: 1\nid: demo\ntitle: Demo\n")
    assert "programs:\n- path: kernels/a.py\n  checks:\n  - matmul\n" in text
    body = text.split("\n---\n", 1)[1]
    assert body.startswith("Body text.\n\n<!-- results:begin -->\n| Program |")
    assert "| `kernels/a.py` | matmul | rtol 1e-4, atol 1e-3 | passed | `R1` |\n<!-- results:end -->" in body
    assert body.endswith("<!-- results:end -->\n\nTail text.\n")


def test_render_adds_the_verified_releases_before_an_author_key_that_follows_results():
    """The list publish adds after ``results`` the first time it lists a release, with a key of the author's
    after ``results`` (a plausibility note): that key is kept whole and the lesson reads back."""
    from tileproof.records.models import VerifiedRelease

    note = ("plausibility:\n- signal: shim-path\n  subject: PATH=/tmp/x\n  explanation: a scratch folder, two\n"
            "    lines long\n")
    lesson = parse(GOOD.replace("  run_id: null\n---\n", "  run_id: null\n" + note + "---\n"))
    rows = [lesson.front.results[0].model_copy(update={"result": "passed", "run_id": "R1"})]
    verified = [VerifiedRelease(cuda_tile="1.7.0", tileiras=["13.4.92"], tileiras_in_range=True, run_ids=["R1"])]
    front = lesson.front.model_copy(update={"status": "published", "results": rows, "cuda_tile_verified": verified,
                                            "hardware": Hardware(gpu="G", run_id="R1")})
    text = lesson_text.render(lesson, front)
    assert parse(text).front == front
    assert note in text
    assert text.index("cuda_tile_verified:") < text.index("plausibility:")


def test_render_refuses_to_touch_other_fields():
    lesson = parse(GOOD)
    with pytest.raises(ValueError, match="not title"):
        lesson_text.render(lesson, lesson.front.model_copy(update={"title": "New"}))


@pytest.mark.parametrize("body", ["no markers\n", "<!-- results:end -->\n<!-- results:begin -->\n",
                                  "<!-- results:begin -->\n<!-- results:begin -->\n<!-- results:end -->\n"])
def test_render_needs_one_marker_pair(body):
    lesson = parse(GOOD.split("Body text.")[0] + body)
    with pytest.raises(RecordError, match="lessons/demo.md: body: needs exactly one"):
        lesson_text.render(lesson, lesson.front)


def test_results_table_escapes_and_marks_optional():
    row = parse(GOOD).front.results[0].model_copy(update={"bound": "a|b"})
    gate_row = row.model_copy(update={"check": "gate", "optional": True, "hardware": "cc < 8.0"})
    table = lesson_text.render_results_table([row, gate_row])
    assert "| a\\|b | ? | - |" in table
    assert "| gate (optional: needs cc < 8.0) |" in table


def test_res_usage_table_from_mangled_names():
    usage = [
        ResUsage(function="_Z15tile_max_nativePKfPfm", registers=24, shared_bytes=0, stack_bytes=0, local_bytes=0,
                 constant_bytes=0),
        ResUsage(function="_Z15tile_sum_nativePKfPfm", registers=30, shared_bytes=0, stack_bytes=0, local_bytes=0,
                 constant_bytes=0),
    ]
    kernels = ["tile_max_native", "tile_sum_via_scan", "tile_sum_native"]
    found = lessons.res_usage_from(usage, kernels)
    assert found == {"tile_max_native": (24, 0), "tile_sum_native": (30, 0)}
    table = lesson_text.render_res_usage([(k, "r", "m") for k in kernels], [(None, found, "compile record X, sm_89")])
    assert "| `tile_max_native` | r | 24 | 0 B | m |" in table
    assert "| `tile_sum_via_scan` | r | ? | ? | m |" in table
    assert table.endswith("Source: compile record X, sm_89.\n")


def test_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "demo.md"
    path.write_text("old")

    def fail(*_):
        raise OSError("disk full")

    monkeypatch.setattr(store.os, "replace", fail)  # lessons.write goes through store.write_atomic
    with pytest.raises(OSError):
        lessons.write(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["demo.md"]
    monkeypatch.undo()
    lessons.write(path, "new")
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["demo.md"]
