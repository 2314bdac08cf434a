"""``tileproof status``: lesson x program x newest evidence, from FIXTURE records in a temp copy."""

import shutil

from tileproof.__main__ import main
from tileproof.commands import status

LESSON = "day79-cutile"



def rows_of(lines, lesson=LESSON):
    return [ln.split() for ln in lines if ln.startswith(lesson + " ")]


def test_status_table(tree, capsys):
    assert main(["status", LESSON, "--root", str(tree)]) == 0
    out = capsys.readouterr().out
    lessons_part, _, claims_part = out.partition("\nDOCUMENT ")
    lines = lessons_part.rstrip("\n").splitlines()
    assert lines[0].split() == ["LESSON", "STATUS", "PROGRAM", "CHECK", "EVIDENCE", "RUN", "GPU"]
    assert claims_part.split()[:5] == ["CLAIM", "VERDICT", "ASSERTED", "TOOLCHAIN", "RUN"]
    rows = rows_of(lines)
    assert len(rows) == 6
    for row in rows[:5]:
        assert row[1] == "draft"
        assert row[4] == "passed"
        assert row[5].startswith("FIXTURE-")
        assert row[6:] == ["NVIDIA", "H200", "cc", "9.0"]
    assert rows[5][3:6] == ["gate", "missing", "(optional)"]
    assert lines[-1] == (f"{LESSON}: draft, 5/5 required rows have evidence; ready to publish: "
                         f"nox -s publish -- {LESSON}")


def test_status_shows_stale_and_missing(tree):
    (tree / "kernels" / "fused.py").write_text("# edited\n")
    (tree / "runs" / sorted(p.name for p in (tree / "runs").iterdir())[0]).unlink()
    lines = status.status(tree, [LESSON])
    evidence = {(r[2], r[3]): r[4] for r in rows_of(lines)}
    assert evidence[("kernels/tile_matmul_softmax.py", "matmul")] == "missing"
    assert evidence[("kernels/fused.py", "fused")] == "stale"
    assert evidence[("cpp/tile_matmul_softmax.cu", "softmax")] == "passed"
    assert "2/5 required rows have evidence; stays draft; next: " in lines[-1]


def test_status_flags_hand_published_lesson(tree):
    path = tree / "lessons" / f"{LESSON}.md"
    path.write_text(path.read_text().replace("status: draft", "status: published", 1))
    shutil.rmtree(tree / "runs")
    lines = status.status(tree, [LESSON])
    assert lines[-1].endswith("published, but its evidence no longer holds (nox -s audit fails)")


def test_status_flags_hand_edited_table(tree):
    path = tree / "lessons" / f"{LESSON}.md"
    path.write_text(path.read_text().replace("| ? | - |", "| passed | - |", 1))
    assert status.status(tree, [LESSON])[-1] == \
        f"{LESSON}: the body's results table differs from the front matter (edited by hand?)"


def test_status_all_lessons_and_missing_program(tree):
    lines = status.status(tree, [])
    spike = rows_of(lines, "tile-reduction-spike")
    assert [r[4:7] for r in spike] == [["no", "such", "file"]] * 3  # cpp/tile_spike.cu is not in the copy


def test_status_unknown_lesson_is_one_line(tree, capsys):
    assert main(["status", "day79", "--root", str(tree)]) == 2
    err = capsys.readouterr().err
    assert err == "tileproof status: lessons/day79.md: no such lesson; did you mean 'day79-cutile'? " \
                  "(fix: use 'day79-cutile')\n"
