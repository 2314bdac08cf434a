"""What a new author meets first, in a course ``tileproof init`` wrote: each error names the line, the expected
text and the fix, and following the fix clears it; a program importing a module that is not there is one line from
``check``, before any compile; ``new-lesson`` points only at sessions every course has."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
from pathlib import Path

import pytest

from tileproof import sessions
from tileproof.__main__ import main
from tileproof.authoring import check
from tileproof.authoring.init import write_files
from tileproof.records.tolerances import load_table


def tileproof(root: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def course(tmp_path):
    """A course as ``tileproof init`` writes its files (no key: nothing here signs), with one new lesson."""
    root = tmp_path / "course"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write_files(root, lambda _line: None)
    code, out, err = tileproof(root, "new-lesson", "first", "--python", "first_kernel")
    assert code == 0, err
    assert check.problems(root) == []
    return root


def quoted(fix: str) -> list[str]:
    """The lines a fix says to write, in order (each between backticks, joined by ``⏎``)."""
    return re.findall(r"`((?:[^`]|`[^`]*`)*?)`(?= ⏎| at | before |;|\)|$)", fix)


def test_a_quoted_bound_names_its_line_and_the_text_to_write(course):
    lesson = course / "lessons" / "first.md"
    text = lesson.read_text()
    lesson.write_text(text.replace("  bound: float64 reference, rtol 0, atol 0\n",
                                   "  bound: 'float64 reference, rtol 0, atol 0'\n"))
    (problem,) = check.problems(course)
    assert problem.rule == "lesson-not-canonical"
    line = text.splitlines().index("  bound: float64 reference, rtol 0, atol 0") + 1
    assert problem.line == line
    assert "`  bound: 'float64 reference, rtol 0, atol 0'`" in problem.reason
    assert f"write `  bound: float64 reference, rtol 0, atol 0` at line {line}" in problem.fix
    # following the fix as written clears it
    lines = lesson.read_text().splitlines(keepends=True)
    lines[line - 1] = quoted(problem.fix)[0] + "\n"
    lesson.write_text("".join(lines))
    assert check.problems(course) == []


def test_a_wrong_bound_says_the_line_to_write(course):
    lesson = course / "lessons" / "first.md"
    text = lesson.read_text()
    lesson.write_text(text.replace("  bound: float64 reference, rtol 0, atol 0\n",
                                   "  bound: float64 reference, rtol 1e-5, atol 0\n"))
    found = {p.rule: p for p in check.problems(course)}
    assert "`  bound: float64 reference, rtol 0, atol 0` at line" in found["bound-mismatch"].fix


def test_a_new_program_gets_its_results_rows_and_table_row_written_out(course):
    lesson = course / "lessons" / "first.md"
    table = course / "kernels" / "tolerances.py"
    table.write_text(table.read_text().replace(
        "}\n", '    # second: exact, as first_kernel.\n    "second": Tolerance(rtol=0.0, atol=0.0),\n}\n'))
    assert tileproof(course, "schema")[0] == 0  # cpp/tolerances.h from the table, as new-lesson leaves it
    (course / "kernels" / "second.py").write_text((course / "kernels" / "first_kernel.py").read_text())
    text = lesson.read_text()
    lesson.write_text(text.replace("  - first_kernel\nhardware:",
                                   "  - first_kernel\n- path: kernels/second.py\n  checks:\n  - second\nhardware:"))
    problem = next(p for p in check.problems(course) if p.rule == "lesson-front")
    assert "no row for kernels/second.py second" in problem.reason
    assert problem.fix.count("(fix:") == 0 and "fix the front matter" not in problem.fix
    rows, table_row = problem.fix.split("; and to the table")
    written = quoted(rows)
    assert written == ["- program: kernels/second.py", "  check: second",
                       "  bound: float64 reference, rtol 0, atol 0", "  result: '?'", "  run_id: null"]
    assert quoted(table_row) == ["| `kernels/second.py` | second | float64 reference, rtol 0, atol 0 | ? | - |"]
    # written where they go (after the first program's row, its table row after the first), the lesson checks clean
    now = lesson.read_text()
    first_row = "  result: '?'\n  run_id: null\n"
    at = now.index(first_row) + len(first_row)
    now = now[:at] + "".join(w + "\n" for w in written) + now[at:]
    first_table = "| `kernels/first_kernel.py` | first_kernel | float64 reference, rtol 0, atol 0 | ? | - |\n"
    at = now.index(first_table) + len(first_table)
    lesson.write_text(now[:at] + quoted(table_row)[0] + "\n" + now[at:])
    assert check.problems(course) == []


def test_a_program_importing_a_missing_module_is_one_line_from_check(course):
    program = course / "kernels" / "first_kernel.py"
    text = program.read_text()
    program.write_text(text.replace("\nimport harness  ", "\nimport harnes  "))
    (problem,) = check.problems(course)
    assert problem.rule == "program-import-missing" and problem.file == "kernels/first_kernel.py"
    assert problem.line == text.splitlines().index(next(ln for ln in text.splitlines()
                                                        if ln.startswith("import harness"))) + 1
    assert "imports 'harnes'" in problem.reason and "did you mean 'harness'?" in problem.fix
    code, out, _err = tileproof(course, "check")
    assert code == 1 and out.splitlines()[1:] == ["check: 1 lesson(s), 1 problem(s)"]  # one line, then the summary
    # a helper the program imports is checked too, and a module beside it is no finding
    program.write_text(text.replace("\nimport harness  ", "\nimport helper\nimport harness  "))
    (course / "kernels" / "helper.py").write_text("import cupy\nimport numpy\nimport json\nimport nowhere_at_all\n")
    (problem,) = check.problems(course)
    assert (problem.file, problem.line) == ("kernels/helper.py", 4)


def test_an_empty_tolerance_table_is_a_courses_first(course):
    """``init`` writes an empty table and ``new-lesson`` its first entry: ``TOLERANCES = {}`` reads as no
    entries, never as a broken table."""
    table = course / "kernels" / "tolerances.py"
    text = table.read_text()
    start = text.index("TOLERANCES = {")
    table.write_text(text[:start] + "TOLERANCES = {}\n")
    assert load_table(course) == {}
    rules = {p.rule for p in check.problems(course)}
    assert "tolerance-table" not in rules and "tolerance-entry-missing" in rules


def test_new_lesson_points_at_sessions_every_course_has(course):
    code, out, _err = tileproof(course, "new-lesson", "second-lesson", "--python", "second_kernel")
    assert code == 0
    (nxt,) = [ln for ln in out.splitlines() if ln.startswith("next: ")]
    commands = [c.strip() for c in re.split(r";|then on a GPU:", nxt.removeprefix("next: ")) if c.strip()]
    names = {name for name, *_ in sessions.every_session(course)}
    for command in commands:
        assert command.startswith("nox -s "), command
        assert command.split()[2] in names, command
