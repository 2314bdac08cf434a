"""Every program and lesson found in the tree, checked without a GPU: the checks a program's source
runs have tolerance entries, a lesson names only checks its programs run, C++ programs go through
the harness (gate, seed, report) and the lesson check finds nothing. New ones join with no edit here."""

import discovered
import pytest

from tileproof.authoring.check import problems
from tileproof.records import lessons
from tileproof.records.tolerances import load_table

CHECKS = discovered.program_checks()


@pytest.mark.parametrize("program", sorted(CHECKS))
def test_program_checks_have_tolerance_entries(program):
    table = load_table(discovered.REPO)
    assert CHECKS[program], f"{program} runs no check the tests can see (s.check(\"x\") / tol::get(\"x\"))"
    assert [c for c in CHECKS[program] if c not in table] == []


@pytest.mark.parametrize("name", discovered.cpp_programs())
def test_cpp_program_uses_the_harness(name):
    text = (discovered.REPO / "cpp" / name).read_text()
    assert '#include "harness.h"' in text
    assert "tp::start(argc, argv," in text
    assert "tp::done()" in text  # the gate + seed, then the report's exit


@pytest.mark.parametrize("lesson_id", discovered.lesson_ids())
def test_lesson_checks_are_run_by_their_programs(lesson_id):
    for program in lessons.load(discovered.REPO, lesson_id).front.programs:
        assert set(program.checks) <= set(CHECKS.get(program.path, ())), program.path


def test_the_lesson_check_finds_nothing_in_the_repository():
    assert [str(p) for p in problems(discovered.REPO)] == []
