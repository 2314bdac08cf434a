"""The author's path, end to end in a temp copy of the repository: `new-lesson` scaffolds a lesson
with one Python and one C++ program; the skeleton passes check and lint-kernels; the author then
fills in real kernels (tests/data/authoring: a scaled vector add with a runtime float alpha, and a
row max) and their tolerance entries, and only those files and the table change; check, lint-kernels,
compile (sm_90, pip toolchain) and the discovered tests pass with no test edited.

The lesson and its programs get names the copied tree does not hold yet (``Names``): an author whose
own lesson or kernel is called ``row-ops``, ``scaled_add`` or ``row_max`` changes nothing here."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tileproof import lesson_text
from tileproof.__main__ import main
from tileproof.authoring import check
from tileproof.authoring.check import bound_text, problems
from tileproof.authoring.scaffold import ScaffoldError, scaffold, with_entries
from tileproof.records import lessons
from tileproof.records.cache_folder import FOLDER
from tileproof.records.tolerances import TABLE_FILE, load_table, parse_table

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "authoring"
COPIED = ("kernels", "cpp", "lessons", "schema", "tests", "AUTHORING.md", "pyproject.toml")


def tileproof(root: Path, *args: str) -> subprocess.CompletedProcess:
    """``tileproof ARGS`` run from ``root`` as the command line runs it (``tileproof.__main__.main``), in this
    process: what the author sees (exit code, stdout, stderr); no process boundary is in question here."""
    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["tileproof", *args], code, out.getvalue(), err.getvalue())


@dataclass(frozen=True)
class Names:
    """The new lesson's id and its two programs' names (each program's check has its name)."""

    lesson: str
    python: str
    cpp: str

    def render(self, text: str) -> str:
        """Text of tests/data/authoring with the data's names replaced by these."""
        return text.replace("scaled_add", self.python).replace("row_max", self.cpp).replace("row-ops", self.lesson)


def unused(word: str, taken: set[str]) -> str:
    """``word``, or ``word`` with the first number appended that nothing in ``taken`` is called."""
    n = 2
    name = word
    while name in taken:
        name, n = f"{word}{'-' if '-' in word else '_'}{n}", n + 1
    return name


def fresh_names(root: Path) -> Names:
    """Names no lesson, program, helper or tolerance entry of the tree at ``root`` has."""
    taken = set(load_table(root)) | {p.stem for folder in ("kernels", "cpp") for p in (root / folder).iterdir()}
    taken |= {p.stem for p in (root / "lessons").glob("*.md")}
    python = unused("scaled_add", taken)
    return Names(unused("row-ops", taken), python, unused("row_max", taken | {python}))


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


@pytest.fixture
def names(copy) -> Names:
    return fresh_names(copy)


def _fill_in(root: Path, names: Names) -> None:
    """What the author edits: the two programs, their two table entries, the lesson's bounds."""
    (root / "kernels" / f"{names.python}.py").write_text(names.render((DATA / "scaled_add.py").read_text()))
    (root / "cpp" / f"{names.cpp}.cu").write_text(names.render((DATA / "row_max.cu").read_text()))
    table = root / TABLE_FILE
    text = table.read_text()
    start = text.index(f"    # {names.python}: doubling")
    last = f'"{names.cpp}": Tolerance(rtol=0.0, atol=0.0),\n'
    stop = text.index(last) + len(last)
    table.write_text(text[:start] + names.render((DATA / "entries.txt").read_text()) + text[stop:])
    refs = root / "kernels" / "references.py"
    text = refs.read_text()
    start, stop = text.index(f"def {names.python}(x):"), text.index("REFERENCES = {")
    refs.write_text(text[:start] + names.render((DATA / "references.txt").read_text()) + "\n\n" + text[stop:])
    found = {str(p) for p in problems(root)}
    fix = f"write `  bound: {bound_text(0.0, 2.384185791015625e-07)}` at line"
    assert any("results.0.bound" in p and fix in p for p in found), found  # the check says what to write
    lesson = lessons.load(root, names.lesson)
    entries = load_table(root)
    rows = [r.model_copy(update={"bound": bound_text(*entries[r.check])}) if not r.optional else r
            for r in lesson.front.results]
    lesson.path.write_text(lesson_text.render(lesson, lesson.front.model_copy(update={"results": rows})))


def _changed(before: dict[str, bytes], root: Path) -> set[str]:
    """The files of the tree that differ from ``before``, the verified-file index that ``check`` keeps left out
    (``.tileproof-cache/``: its own ``.gitignore`` keeps it out of git)."""
    now = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return {p for p in set(before) | set(now) if before.get(p) != now.get(p) and not p.startswith(f"{FOLDER}/")}


@pytest.mark.slow(reason="the author's path end to end; the copy's own tests run by its own pytest")
def test_scaffold_then_real_kernels_pass_check_lint_compile_and_tests(copy, names):
    before = {p.relative_to(copy).as_posix(): p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    made = tileproof(copy, "new-lesson", names.lesson, "--python", names.python, "--cpp", names.cpp)
    assert made.returncode == 0, made.stderr
    # the skeleton as written: canonical, listed, in the table, generated files current
    assert tileproof(copy, "check").returncode == 0
    assert tileproof(copy, "lint-kernels").returncode == 0
    _fill_in(copy, names)
    checked = tileproof(copy, "check")  # the table changed by hand: the check names the generated header
    assert checked.stdout.splitlines()[0] == "cpp/tolerances.h: generated-stale: differs from what its source " \
                                             "renders (fix: nox -s schema)", checked.stdout
    assert tileproof(copy, "schema").returncode == 0  # (compile would regenerate it as well)
    checked = tileproof(copy, "check")
    assert checked.returncode == 0, checked.stdout
    linted = tileproof(copy, "lint-kernels")
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert _changed(before, copy) == {f"lessons/{names.lesson}.md", f"kernels/{names.python}.py",
                                      f"cpp/{names.cpp}.cu", "kernels/tolerances.py", "kernels/references.py",
                                      "cpp/tolerances.h"}  # the header: generated
    # the discovered tests pick the new programs and lesson up; none of them was edited (pytest in the copy, in a
    # process of its own: its tests/ and conftest are the copy's, which this process has imported from the checkout)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-p", "no:hypothesispytest", "-p", "no:xdist",  # unused here; 0.8 s of imports
                            "tests/test_kernels_import.py", "tests/test_lessons.py",
                            "tests/test_discovered_programs.py",
                            "-k", f"{names.python} or {names.cpp} or {names.lesson} or finds_nothing or complete"],
                           cwd=copy, capture_output=True, text=True, timeout=600, env=env)
    assert tests.returncode == 0, tests.stdout[-3000:]
    ran = tests.stdout
    assert " passed" in ran
    assert " failed" not in ran


@pytest.mark.slow(reason="real nvcc and cuTile export of the filled-in programs: only the compilers say they build")
def test_filled_in_programs_compile_for_sm_90(copy, names):
    """compile (the one nvcc command and the AOT export) on the lesson's two programs as the author fills them in.
    The scaffold as written is built the same way (``nox -s compile -- --arch sm_90``: 3 artifacts, none reused) in
    the new course of tests/test_package.py, which runs wherever this does."""
    from tileproof.records.errors import TileproofError
    from tileproof.runner.builds import compile_programs
    from tileproof.runner.capture import tools as discover
    from tileproof.toolchain.aot import declared_kernels

    try:
        tools = discover()
    except TileproofError as e:
        pytest.skip(f"no tile toolchain here: {e}")
    scaffold(copy, names.lesson, names.python, names.cpp)
    _fill_in(copy, names)
    py = copy / "kernels" / f"{names.python}.py"
    record = compile_programs(copy, tools, ["sm_90"], [copy / "cpp" / f"{names.cpp}.cu"],
                              {py: list(declared_kernels(py))}, 2)
    assert record is not None, [b.verdict for b in record.builds]
    assert record.passed, [b.verdict for b in record.builds]
    assert {(b.program, b.artifact_kind) for b in record.builds if b.reused_from is None} == {
        (f"cpp/{names.cpp}.cu", "executable"), (f"cpp/{names.cpp}.cu", "tilefatbin"),
        (f"kernels/{names.python}.py", "cubin")}


def test_scaffold_refuses_taken_names_and_writes_nothing(copy, names):
    # whatever the tree's table, programs and lessons are called: an entry no program file is named after
    entry = next(n for n in load_table(copy) if not any((copy / d / f"{n}{x}").exists()
                                                        for d, x in (("kernels", ".py"), ("cpp", ".cu"))))
    program = next(p.stem for p in sorted((copy / "kernels").glob("*.py")) if p.stem != "tolerances")
    lesson = next(iter(sorted((copy / "lessons").glob("*.md")))).stem
    free = names.python
    with pytest.raises(ScaffoldError, match=f"check '{entry}' has an entry already"):
        scaffold(copy, names.lesson, entry, None)
    with pytest.raises(ScaffoldError, match=f"kernels/{program}.py: exists already"):
        scaffold(copy, names.lesson, program, None)
    with pytest.raises(ScaffoldError, match="exists already"):
        scaffold(copy, lesson, free, None)
    with pytest.raises(ScaffoldError, match="not a lower-case identifier"):
        scaffold(copy, names.lesson, "Bad-Name", None)
    assert not (copy / "kernels" / f"{free}.py").exists()
    assert not (copy / "lessons" / f"{names.lesson}.md").exists()
    assert problems(copy) == []


def test_fresh_names_avoid_every_name_the_tree_holds(copy):
    """A tree whose author took the names this suite would use (a lesson, a program, an entry) gets others: on
    the course as it is, ``row-ops-2``, ``scaled_add_2`` and ``row_max_2``."""
    first = fresh_names(copy)
    scaffold(copy, first.lesson, first.python, first.cpp)
    names = fresh_names(copy)
    assert not {names.lesson, names.python, names.cpp} & {first.lesson, first.python, first.cpp}
    held = set(load_table(copy)) | {p.stem for d in ("kernels", "cpp", "lessons") for p in (copy / d).iterdir()}
    assert not {names.lesson, names.python, names.cpp} & held
    assert (names.lesson[:7], names.python[:10], names.cpp[:7]) == ("row-ops", "scaled_add", "row_max")
    assert names.render('tol::get("row_max") scaled_add row-ops') == (f'tol::get("{names.cpp}") {names.python} '
                                                                      f'{names.lesson}')


def test_the_lesson_check_names_each_problem_with_its_fix(copy, names):
    scaffold(copy, names.lesson, names.python, None)
    path = copy / "lessons" / f"{names.lesson}.md"
    text = path.read_text()
    path.write_text(text.replace("rtol 0, atol 0 | ?", "rtol 1, atol 0 | ?"))  # the body table drifts
    (copy / "kernels" / f"{names.python}.py").unlink()
    (copy / "cpp" / "tolerances.h").write_text("// stale\n")
    table = copy / "kernels" / "tolerances.py"
    table.write_text(table.read_text().replace(f'"{names.python}": Tolerance(rtol=0.0, atol=0.0)',
                                               f'"{names.python}": Tolerance(rtol=1e-6, atol=0.0)'))
    found = [str(p) for p in problems(copy)]
    assert {p.rule for p in problems(copy)} <= set(check.RULES)  # every finding by a rule the check lists
    assert any(re.match(rf"lessons/{names.lesson}\.md:\d+:1: lesson-not-canonical not in canonical form: publish "
                        r"would rewrite line \d+, which reads `\| `kernels/.*rtol 1, atol 0 \| \? \| - \|`", p)
               for p in found), found
    assert any(f"kernels/{names.python}.py does not exist" in p for p in found)
    assert any("results.0.bound" in p and "write `  bound: float64 reference, rtol 1e-06, atol 0` at line" in p
               for p in found), found
    assert any(p.startswith("cpp/tolerances.h: generated-stale: differs") and "nox -s schema" in p for p in found)


def test_a_check_without_an_entry_is_named(copy, names):
    scaffold(copy, names.lesson, names.python, None)
    table = copy / "kernels" / "tolerances.py"
    text = table.read_text()
    table.write_text(text.replace(f'    "{names.python}": Tolerance(rtol=0.0, atol=0.0),\n', ""))
    found = [str(p) for p in problems(copy)]
    assert f"lessons/{names.lesson}.md: tolerance-entry-missing: check '{names.python}' has no entry in " \
           f"kernels/tolerances.py (fix: add \"{names.python}\": Tolerance(rtol=..., atol=...) with its derivation " \
           "to kernels/tolerances.py)" in found


def test_new_entries_go_into_the_table_load_table_reads_after_a_declared_annotation():
    # A bare ``TOLERANCES: ...`` declaration is not the table (load_table skips it); the scaffold
    # appends to the same assignment load_table reads, not to the declaration.
    text = ("from harness import Tolerance\n\nTOLERANCES: dict[str, Tolerance]\nTOLERANCES = {\n"
            '    "old": Tolerance(rtol=0.0, atol=0.0),\n}\n')
    assert list(parse_table(text)) == ["old"]
    assert list(parse_table(with_entries(text, ["fresh"]))) == ["old", "fresh"]
