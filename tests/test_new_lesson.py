"""The author's path, end to end in a temp copy of the repository: `new-lesson` scaffolds a lesson
with one Python and one C++ program; the skeleton passes check and lint-kernels; the author then
fills in real kernels (tests/data/authoring: a scaled vector add with a runtime float alpha, and a
row max) and their tolerance entries, and only those files and the table change; check, lint-kernels,
compile (sm_90, pip toolchain) and the discovered tests pass with no test edited."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tileproof import lesson_text
from tileproof.authoring import check
from tileproof.authoring.check import bound_text, problems
from tileproof.authoring.scaffold import ScaffoldError, scaffold, with_entries
from tileproof.records import lessons
from tileproof.records.tolerances import TABLE_FILE, load_table, parse_table

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "authoring"
COPIED = ("kernels", "cpp", "lessons", "schema", "tests", "AUTHORING.md", "pyproject.toml")


def tileproof(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tileproof", *args], cwd=root, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture
def copy(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for name in COPIED:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.is_file():
            shutil.copy(src, root / name)
    return root


def _fill_in(root: Path) -> None:
    """What the author edits: the two programs, their two table entries, the lesson's bounds."""
    shutil.copy(DATA / "scaled_add.py", root / "kernels" / "scaled_add.py")
    shutil.copy(DATA / "row_max.cu", root / "cpp" / "row_max.cu")
    table = root / TABLE_FILE
    text = table.read_text()
    start = text.index("    # scaled_add: doubling")
    last = '"row_max": Tolerance(rtol=0.0, atol=0.0),\n'
    stop = text.index(last) + len(last)
    table.write_text(text[:start] + (DATA / "entries.txt").read_text() + text[stop:])
    refs = root / "kernels" / "references.py"
    text = refs.read_text()
    start, stop = text.index("def scaled_add(x):"), text.index("REFERENCES = {")
    refs.write_text(text[:start] + (DATA / "references.txt").read_text() + "\n\n" + text[stop:])
    found = {str(p) for p in problems(root)}
    fix = f"write bound: '{bound_text(0.0, 2.384185791015625e-07)}'"
    assert any("results.0.bound" in p and fix in p for p in found), found  # the check says what to write
    lesson = lessons.load(root, "row-ops")
    entries = load_table(root)
    rows = [r.model_copy(update={"bound": bound_text(*entries[r.check])}) if not r.optional else r
            for r in lesson.front.results]
    lesson.path.write_text(lesson_text.render(lesson, lesson.front.model_copy(update={"results": rows})))


def _changed(before: dict[str, bytes], root: Path) -> set[str]:
    now = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return {p for p in set(before) | set(now) if before.get(p) != now.get(p)}


def test_scaffold_then_real_kernels_pass_check_lint_compile_and_tests(copy):
    before = {p.relative_to(copy).as_posix(): p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    made = tileproof(copy, "new-lesson", "row-ops", "--python", "scaled_add", "--cpp", "row_max")
    assert made.returncode == 0, made.stderr
    # the skeleton as written: canonical, listed, in the table, generated files current
    assert tileproof(copy, "check").returncode == 0
    assert tileproof(copy, "lint-kernels").returncode == 0
    _fill_in(copy)
    checked = tileproof(copy, "check")  # the table changed by hand: the check names the generated header
    assert checked.stdout.splitlines()[0] == "cpp/tolerances.h: generated-stale: differs from what its source " \
                                             "renders (fix: nox -s schema)", checked.stdout
    assert tileproof(copy, "schema").returncode == 0  # (compile would regenerate it as well)
    checked = tileproof(copy, "check")
    assert checked.returncode == 0, checked.stdout
    linted = tileproof(copy, "lint-kernels")
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert _changed(before, copy) == {"lessons/row-ops.md", "kernels/scaled_add.py", "cpp/row_max.cu",
                                      "kernels/tolerances.py", "kernels/references.py",
                                      "cpp/tolerances.h"}  # the header: generated
    # the discovered tests pick the new programs and lesson up; none of them was edited
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-p", "no:hypothesispytest", "-p", "no:xdist",  # unused here; 0.8 s of imports
                            "tests/test_kernels_import.py", "tests/test_lessons.py",
                            "tests/test_discovered_programs.py",
                            "-k", "scaled_add or row_max or row-ops or finds_nothing or complete"],
                           cwd=copy, capture_output=True, text=True, timeout=600, env=env)
    assert tests.returncode == 0, tests.stdout[-3000:]
    ran = tests.stdout
    assert " passed" in ran
    assert " failed" not in ran


@pytest.mark.parametrize("filled", [False, True], ids=["skeleton", "filled-in"])
def test_scaffolded_programs_compile_for_sm_90(copy, filled):
    """compile (the one nvcc command and the AOT export) on the lesson's two programs, as the scaffold
    wrote them and as filled in."""
    from tileproof.records.errors import TileproofError
    from tileproof.runner.builds import compile_programs
    from tileproof.runner.capture import tools as discover
    from tileproof.toolchain.aot import declared_kernels

    try:
        tools = discover()
    except TileproofError as e:
        pytest.skip(f"no tile toolchain here: {e}")
    scaffold(copy, "row-ops", "scaled_add", "row_max")
    if filled:
        _fill_in(copy)
    py = copy / "kernels" / "scaled_add.py"
    record = compile_programs(copy, tools, ["sm_90"], [copy / "cpp" / "row_max.cu"],
                              {py: list(declared_kernels(py))}, 2)
    assert record is not None, [b.verdict for b in record.builds]
    assert record.passed, [b.verdict for b in record.builds]
    assert {(b.program, b.artifact_kind) for b in record.builds} == {
        ("cpp/row_max.cu", "executable"), ("cpp/row_max.cu", "tilefatbin"), ("kernels/scaled_add.py", "cubin")}


def test_scaffold_refuses_taken_names_and_writes_nothing(copy):
    with pytest.raises(ScaffoldError, match="check 'matmul' has an entry already"):
        scaffold(copy, "again", "matmul", None)
    with pytest.raises(ScaffoldError, match="kernels/vector_add.py: exists already"):
        scaffold(copy, "again", "vector_add", None)
    with pytest.raises(ScaffoldError, match="exists already"):
        scaffold(copy, "day79-cutile", "fresh_name", None)
    with pytest.raises(ScaffoldError, match="not a lower-case identifier"):
        scaffold(copy, "fine-id", "Bad-Name", None)
    assert not (copy / "kernels" / "fresh_name.py").exists()
    assert problems(copy) == []


def test_the_lesson_check_names_each_problem_with_its_fix(copy):
    scaffold(copy, "row-ops", "scaled_add", None)
    path = copy / "lessons" / "row-ops.md"
    text = path.read_text()
    path.write_text(text.replace("rtol 0, atol 0 | ?", "rtol 1, atol 0 | ?"))  # the body table drifts
    (copy / "kernels" / "scaled_add.py").unlink()
    (copy / "cpp" / "tolerances.h").write_text("// stale\n")
    table = copy / "kernels" / "tolerances.py"
    table.write_text(table.read_text().replace('"scaled_add": Tolerance(rtol=0.0, atol=0.0)',
                                               '"scaled_add": Tolerance(rtol=1e-6, atol=0.0)'))
    found = [str(p) for p in problems(copy)]
    assert {p.rule for p in problems(copy)} <= set(check.RULES)  # every finding by a rule the check lists
    assert any(p.startswith("lessons/row-ops.md: lesson-not-canonical: not in canonical form") for p in found), found
    assert any("kernels/scaled_add.py does not exist" in p for p in found)
    assert any("results.0.bound" in p and "write bound: 'float64 reference, rtol 1e-06, atol 0'" in p for p in found)
    assert any(p.startswith("cpp/tolerances.h: generated-stale: differs") and "nox -s schema" in p for p in found)


def test_a_check_without_an_entry_is_named(copy):
    scaffold(copy, "row-ops", "scaled_add", None)
    table = copy / "kernels" / "tolerances.py"
    text = table.read_text()
    table.write_text(text.replace('    "scaled_add": Tolerance(rtol=0.0, atol=0.0),\n', ""))
    found = [str(p) for p in problems(copy)]
    assert "lessons/row-ops.md: tolerance-entry-missing: check 'scaled_add' has no entry in " \
           "kernels/tolerances.py (fix: add \"scaled_add\": Tolerance(rtol=..., atol=...) with its derivation to " \
           "kernels/tolerances.py)" in found


def test_new_entries_go_into_the_table_load_table_reads_after_a_declared_annotation():
    # A bare ``TOLERANCES: ...`` declaration is not the table (load_table skips it); the scaffold
    # appends to the same assignment load_table reads, not to the declaration.
    text = ("from harness import Tolerance\n\nTOLERANCES: dict[str, Tolerance]\nTOLERANCES = {\n"
            '    "old": Tolerance(rtol=0.0, atol=0.0),\n}\n')
    assert list(parse_table(text)) == ["old"]
    assert list(parse_table(with_entries(text, ["fresh"]))) == ["old", "fresh"]
