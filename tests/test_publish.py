"""End to end: publish the real day-79 lesson in a temporary copy, from committed FIXTURE records."""

import json
import shutil

import pytest

from tileproof import lesson_text
from tileproof.__main__ import main
from tileproof.records import lessons, store

LESSON = "day79-cutile"
REGENERATE = "python tests/data/records/make_fixtures.py"



def cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_fixture_records_attest_todays_lesson(repo_root):
    front = lessons.load(repo_root, LESSON).front
    for rec in store.load_records(repo_root / "tests" / "data" / "records" / "day79"):
        assert rec.run_id.startswith("FIXTURE-")
        assert rec.host.system == "fixture"
        if rec.kind != "run":  # the FIXTURE claims record of the runs' release attests no program list
            continue
        assert rec.lesson_programs[LESSON] == lessons.program_list_digest(front), \
            f"the lesson's program list changed: regenerate the fixtures with {REGENERATE}"


def test_no_fixture_record_in_runs(repo_root):
    """FIXTURE records never live in runs/, where the real gate would read them."""
    for path in store.record_files(repo_root):
        raw = json.loads(path.read_text())
        assert not raw.get("run_id", "").startswith("FIXTURE-"), path
        assert raw.get("host", {}).get("system") != "fixture", path


def test_publish_end_to_end(tree, capsys):
    path = tree / "lessons" / f"{LESSON}.md"
    before = path.read_text()

    code, out, _ = cli(capsys, "publish", LESSON, "--root", str(tree), "--dry-run")
    assert code == 0
    assert "would publish from NVIDIA H200 (cc 9.0)" in out
    assert path.read_text() == before

    code, out, _ = cli(capsys, "publish", LESSON, "--root", str(tree))
    assert code == 0
    assert out.startswith(f"{LESSON}: published from NVIDIA H200 (cc 9.0), driver 580.95.05")
    after = path.read_text()
    lesson = lessons.load(tree, LESSON)
    front = lesson.front
    assert front.status == "published"
    assert front.hardware.gpu == "NVIDIA H200"
    assert front.hardware.compute_capability == "9.0"
    assert front.hardware.run_id.startswith("FIXTURE-")
    required = [r for r in front.results if not r.optional]
    assert all(r.result.startswith("passed") and r.run_id.startswith("FIXTURE-") for r in required)
    gate_row = next(r for r in front.results if r.optional)
    assert gate_row.result == "?"
    assert gate_row.run_id is None  # no T4 record: stays '?', does not block

    # The cuda-tile release the Python programs' records were made with, written after results.
    python_runs = list(dict.fromkeys(r.run_id for r in required if r.program.endswith(".py")))
    assert [(v.cuda_tile, v.tileiras_in_range, v.run_ids) for v in front.cuda_tile_verified] == \
        [("1.7.0", True, python_runs)]
    block = lesson_text.dump_key("cuda_tile_verified", lesson_text.front_values(front)["cuda_tile_verified"])
    assert after.count(block) == 1
    assert after.index(block) < after.index("\n---\n", 4)

    # Nothing else in the file changed: only status/hardware/results lines and the table.
    old_lines, new_lines = before.splitlines(), after.replace(block, "", 1).splitlines()
    assert len(old_lines) == len(new_lines)
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    table = before.index("<!-- results:begin -->"), before.index("<!-- results:end -->")
    front_end = before.index("\n---\n", 4)
    for i in changed:
        old = old_lines[i]
        offset = sum(len(ln) + 1 for ln in old_lines[:i])
        in_table = table[0] < offset < table[1]
        in_front = offset < front_end and (old.startswith(("status:", "  ")) or old.startswith("- "))
        assert in_table or in_front, f"line {i + 1} changed: {old!r}"
        if in_front:
            assert old in ("status: draft", "  result: '?'", "  run_id: null") or old.endswith(": null"), old
    assert lesson.body.split("<!-- results:begin -->")[0] == before.split("\n---\n", 1)[1].split(
        "<!-- results:begin -->")[0]

    # Publishing twice is a no-op.
    code, out, _ = cli(capsys, "publish", LESSON, "--root", str(tree))
    assert code == 0
    assert "already published" in out
    assert path.read_text() == after


def test_stale_kernel_blocks_and_changes_nothing(tree, capsys):
    (tree / "kernels" / "fused.py").write_text("# edited after its run\n")
    path = tree / "lessons" / f"{LESSON}.md"
    before = path.read_bytes()
    code, out, _ = cli(capsys, "publish", LESSON, "--root", str(tree))
    assert code == 1
    assert path.read_bytes() == before
    assert out.startswith(f"{LESSON}: stays draft; 1 of 5 required rows lack evidence; nothing changed:")
    assert "kernels/fused.py fused: stale: kernels/fused.py changed since run FIXTURE-" in out
    assert "(commit f1c7ee0)" in out
    assert "fix: nox -s run-gpu -- day79-cutile" in out


def test_missing_records_list_every_row(tree, capsys):
    shutil.rmtree(tree / "runs")
    code, out, _ = cli(capsys, "publish", LESSON, "--root", str(tree), "--dry-run")
    assert code == 1
    assert out.count(": no-record: no run record for ") == 5  # the optional gate row is not missing
    assert "5 of 5 required rows lack evidence" in out


def test_forged_transcript_blocks(tree, capsys):
    query = next((tree / "evidence").rglob("nvidia-smi-query.csv"))
    query.write_text(query.read_text().replace(", 9.0, ", ", 7.5, "))
    code, out, _ = cli(capsys, "publish", LESSON, "--root", str(tree))
    assert code == 1
    assert out.count("forged-cc") == 5
    assert "does not match its sha256" in out


def test_published_without_evidence_is_reported(tree, capsys):
    code, _, _ = cli(capsys, "publish", LESSON, "--root", str(tree))
    assert code == 0
    (tree / "kernels" / "harness.py").write_text("# changed\n")
    path = tree / "lessons" / f"{LESSON}.md"
    before = path.read_bytes()
    code, out, _ = cli(capsys, "publish", LESSON, "--root", str(tree))
    assert code == 1
    assert "no longer holds" in out
    assert path.read_bytes() == before


@pytest.mark.parametrize("setup, argv_lesson, message", [
    (None, "day97-cutlie", "tileproof publish: lessons/day97-cutlie.md: no such lesson; did you mean 'day79-cutile'?"),
    ("yaml", LESSON, "tileproof publish: lessons/day79-cutile.md: line 8: front matter is not valid YAML "
              "(while parsing a flow sequence from line 4: expected ',' or ']'"),
    ("field", LESSON, "tileproof publish: lessons/day79-cutile.md: status: Input should be 'draft' or 'published'"),
    ("program", LESSON, "tileproof publish: lessons/day79-cutile.md: programs.2.path: kernels/fused.py does not exist"),
    ("record", LESSON, "tileproof publish: "),
])
def test_bad_input_is_one_line(tree, capsys, setup, argv_lesson, message):
    path = tree / "lessons" / f"{LESSON}.md"
    if setup == "yaml":
        path.write_text(path.read_text().replace("title: Tile", "title: [Tile", 1))
    elif setup == "field":
        path.write_text(path.read_text().replace("status: draft", "status: done", 1))
    elif setup == "program":
        (tree / "kernels" / "fused.py").unlink()
    elif setup == "record":
        rec = sorted((tree / "runs").glob("*.json"))[0]
        rec.write_text(rec.read_text().replace('"verdict": "passed"', '"verdict": "great"'))
    before = path.read_bytes()
    code, out, err = cli(capsys, "publish", argv_lesson, "--root", str(tree))
    assert code == 2
    assert out == ""
    assert err.startswith(message), err
    assert err.count("\n") == 1, err
    assert path.read_bytes() == before
    if setup == "record":
        assert "/runs/FIXTURE-20260901T120100Z-run-00000001.json: run.verdict: " in err


def test_republish_rewrites_a_published_lesson_from_its_records(tree, capsys):
    """Evidence that moved on (or a hand edit): plain publish refuses and names --republish; --republish
    writes exactly what the records give, and only while the decision holds."""
    assert cli(capsys, "publish", LESSON, "--root", str(tree))[0] == 0
    path = tree / "lessons" / f"{LESSON}.md"
    published = path.read_text()
    edited = published.replace("compute_capability: '9.0'", "compute_capability: '10.0'", 1)
    assert edited != published
    path.write_text(edited)

    code, out, _ = cli(capsys, "publish", LESSON, "--root", str(tree))
    assert code == 1
    assert "lesson-rederive: hardware.compute_capability" in out
    assert "--republish" in out
    assert path.read_text() == edited

    code, out, _ = cli(capsys, "publish", LESSON, "--root", str(tree), "--republish", "--dry-run")
    assert code == 0
    assert "would republish from NVIDIA H200 (cc 9.0)" in out
    assert path.read_text() == edited

    code, out, _ = cli(capsys, "publish", LESSON, "--root", str(tree), "--republish")
    assert code == 0
    assert out.startswith(f"{LESSON}: republished from NVIDIA H200 (cc 9.0)")
    assert path.read_text() == published
    assert cli(capsys, "publish", LESSON, "--root", str(tree))[1].startswith(f"{LESSON}: already published")


def test_republish_is_refused_when_the_evidence_no_longer_holds(tree, capsys):
    assert cli(capsys, "publish", LESSON, "--root", str(tree))[0] == 0
    path = tree / "lessons" / f"{LESSON}.md"
    path.write_text(path.read_text().replace("compute_capability: '9.0'", "compute_capability: '10.0'", 1))
    edited = path.read_text()
    for record in (tree / "runs").glob("*-run-*.json"):
        record.unlink()
    code, out, _ = cli(capsys, "publish", LESSON, "--root", str(tree), "--republish")
    assert code == 1
    assert path.read_text() == edited
