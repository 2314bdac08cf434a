"""``tileproof badge``: the evidence coverage as a shields.io endpoint JSON, read from the lessons' verdicts (the
FIXTURE day-79 tree): counted rows out of required rows, the deciding records' GPU classes and cuda-tile releases,
never a speed."""

import json
import re
import shutil

from tileproof.__main__ import main
from tileproof.commands.badge import Endpoint

LESSON = "day79-cutile"


def badge(tree, capsys, *args) -> dict:
    assert main(["badge", *args, "--root", str(tree)]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_row_with_evidence_is_green_and_names_the_hardware_and_release(tree, capsys):
    got = badge(tree, capsys, LESSON)
    assert set(got) == {"schemaVersion", "label", "message", "color"} and got["schemaVersion"] == 1
    assert got["label"] == "evidence" and got["color"] == "brightgreen"
    rows, gpu, *release = got["message"].split(" · ")
    assert rows == "5/5 rows" and gpu == "H200 cc 9.0"
    assert all(re.fullmatch(r"cuda-tile \d+\.\d+\.\d+(, \d+\.\d+\.\d+)*", r) for r in release)
    assert not re.search(r"\b(ms|TFLOP|GB/s|%)", got["message"])  # coverage, never a speed


def test_stale_and_missing_rows_do_not_count(tree, capsys):
    (tree / "kernels" / "fused.py").write_text("# edited\n")
    (tree / "runs" / sorted(p.name for p in (tree / "runs").iterdir())[0]).unlink()
    got = badge(tree, capsys, LESSON)
    assert got["message"].startswith("2/5 rows · ") and got["color"] == "yellow"


def test_a_lesson_published_without_evidence_is_red(tree, capsys):
    path = tree / "lessons" / f"{LESSON}.md"
    path.write_text(path.read_text().replace("status: draft", "status: published", 1))
    shutil.rmtree(tree / "runs")
    assert badge(tree, capsys, LESSON) == {"schemaVersion": 1, "label": "evidence", "message": "0/5 rows",
                                           "color": "red"}


def test_every_lesson_by_default_and_written_to_a_file(tree, capsys):
    out = tree / "build" / "badge" / "evidence.json"
    assert main(["badge", "--root", str(tree), "--out", str(out)]) == 0
    got = Endpoint.model_validate_json(out.read_text())
    one = badge(tree, capsys, LESSON)
    # the spike's programs are not in the copy: its rows count as rows, none with evidence
    assert got.message.startswith("5/8 rows · ") and got.color == "yellow" and one["message"] != got.message


def test_no_lessons_is_grey(tmp_path, capsys):
    (tmp_path / "lessons").mkdir()
    assert badge(tmp_path, capsys) == {"schemaVersion": 1, "label": "evidence", "message": "no rows",
                                       "color": "lightgrey"}
