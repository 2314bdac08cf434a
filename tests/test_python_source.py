"""A committed Python file nested past what the interpreter survives is one line wherever tileproof parses it
(``records.python_source``): never a traceback, never a crash of the interpreter."""

from __future__ import annotations

import ast

import pytest
from conftest import run_cli

from tileproof.records import python_source
from tileproof.records.tolerances import ToleranceTableError, parse_table

SUM_OF = "x = 1{}\n".format
"""A sum of many terms: a left-leaning tree as deep as the terms are many."""
DEEP_FOR_A_WALK = SUM_OF("+1" * 2_000)
"""Parses on every Python; a recursive walk over it (the lint's visitors) ran out of frames."""
DEEP_FOR_THE_PARSER = SUM_OF("+1" * 200_000)
"""RecursionError while the tree is built on 3.11 and later; a segmentation fault on 3.10."""


@pytest.mark.parametrize("text", [DEEP_FOR_A_WALK, DEEP_FOR_THE_PARSER, "x = 1\0\n", "def f(:\n",
                                  "x = 1\n" * (python_source.MAX_CHARS // 6 + 1)])
def test_every_text_that_cannot_be_walked_is_a_syntax_error_naming_the_file(text):
    with pytest.raises(SyntaxError) as e:
        python_source.parse(text, "kernels/k.py")
    assert e.value.filename == "kernels/k.py" and e.value.lineno and e.value.msg


def test_a_program_as_deep_as_the_limit_parses_and_one_level_more_does_not():
    # Module > Assign > BinOp x n > Constant: n + 3 levels
    assert isinstance(python_source.parse(SUM_OF("+1" * (python_source.MAX_DEPTH - 3)), "k.py"), ast.Module)
    with pytest.raises(SyntaxError, match=f"nested {python_source.MAX_DEPTH + 1} levels deep"):
        python_source.parse(SUM_OF("+1" * (python_source.MAX_DEPTH - 2)), "k.py")


def test_the_big_stack_thread_parses_what_the_main_stack_cannot_survive_on_older_pythons():
    """How ``parse`` runs before 3.11, exercised on every Python: the same tree, or the same one line."""
    deep = python_source.parsed_in_thread(DEEP_FOR_A_WALK, "k.py", "exec")
    assert isinstance(deep, ast.Module) and python_source._depth(deep) == 2_003
    try:
        tree = python_source.parsed_in_thread(DEEP_FOR_THE_PARSER, "k.py", "exec")
    except SyntaxError as e:  # 3.11 and later: the parser's own guard
        assert e.filename == "k.py" and "nested deeper" in e.msg
    else:  # 3.10: built whole, on the thread's stack
        assert isinstance(tree, ast.Module)


def test_the_tolerance_table_nested_too_deep_is_one_line():
    with pytest.raises(ToleranceTableError) as e:
        parse_table(DEEP_FOR_A_WALK, "kernels/tolerances.py")
    assert "\n" not in str(e.value) and str(e.value).startswith("kernels/tolerances.py:1: not valid Python (nested")


@pytest.mark.parametrize("text", [DEEP_FOR_A_WALK, DEEP_FOR_THE_PARSER])
def test_lint_kernels_reports_a_program_nested_too_deep_as_tp000(tmp_path, text):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "deep.py").write_text(text)
    code, out, err = run_cli("lint-kernels", cwd=tmp_path)
    assert code == 1 and "Traceback" not in err, out + err
    assert out.startswith("kernels/deep.py:1:1: TP000 cannot parse: nested"), out
