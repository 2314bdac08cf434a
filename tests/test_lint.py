"""lint-kernels: every rule fires on its wrong snippet and stays quiet on its right one.

The snippets live in tests/data/lint/ (see its README): `# expect: TPNNN` marks each line
that must be reported. Where cuda-tile and its tileiras are installed, the same snippets
are compiled for sm_90 (no GPU needed) so that the claims behind the rules are checked
against the real compiler, not against the pitfall list.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tileproof.commands import lint
from tileproof.lint import rule_table
from tileproof.lint.engine import RULES, lint_paths, lint_source
from tileproof.records.findings import Finding

REPO = Path(__file__).resolve().parents[1]
SNIPPETS = REPO / "tests" / "data" / "lint"
SNIPPET_RULES = sorted(r for r in RULES if r not in ("TP000", "TP900"))
_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)$")


def _expected(path: Path) -> set[tuple[int, str]]:
    out = set()
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        match = _EXPECT.search(text)
        if match:
            out |= {(number, rule.strip()) for rule in match.group(1).split(",")}
    return out


def _found(path: Path) -> set[tuple[int, str]]:
    return {(f.line, f.rule) for f in lint_source(path.read_text(), str(path))}


def _rule_id(rule: str) -> str:
    return f"{rule}-{RULES[rule][0]}"


# ----------------------------------------------------------------------------- rules

@pytest.mark.parametrize("rule", SNIPPET_RULES, ids=_rule_id)
def test_wrong_snippet_is_reported(rule):
    path = SNIPPETS / f"{rule.lower()}_wrong.py"
    expected = _expected(path)
    assert expected, "snippet must expect its own rule"
    assert {r for _, r in expected} == {rule}, "snippet must expect its own rule"
    assert _found(path) == expected


@pytest.mark.parametrize("rule", SNIPPET_RULES, ids=_rule_id)
def test_right_snippet_is_clean(rule):
    path = SNIPPETS / f"{rule.lower()}_right.py"
    assert [str(f) for f in lint_source(path.read_text(), str(path))] == []


def test_every_snippet_belongs_to_a_rule():
    names = {p.name for p in SNIPPETS.glob("*.py")}
    wanted = {f"{r.lower()}_{kind}.py" for r in SNIPPET_RULES for kind in ("wrong", "right")}
    assert names == wanted


def test_rules_table_has_slug_and_description():
    for rule, (slug, description) in RULES.items():
        assert re.fullmatch(r"TP\d{3}", rule)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug)
        assert description
        assert "\n" not in description


KERNEL = """\
import cuda.tile as ct

@ct.kernel
def k(x, y, tile: ct.Constant[int]):
    t = ct.load(x, index=(0,), shape=(48,)){comment}
    ct.store(y, index=(0,), tile=t)
"""


@pytest.mark.parametrize("source, rules", [
    pytest.param("from cuda.tile import kernel, load\n\n@kernel\ndef k(x):\n"
                 "    t = load(x, (0,), shape=(3,))\n", {(5, "TP003")}, id="from-import"),
    pytest.param("import cuda.tile as cutile\n\n@cutile.kernel(occupancy=2)\ndef k(x):\n"
                 "    t = cutile.load(x, (0,), shape=(3,))\n", {(5, "TP003")}, id="other-alias"),
    pytest.param("import cuda.tile as ct\n\ndef k(x):\n    t = ct.load(x, (0,), shape=(3,))\n",
                 set(), id="undecorated-is-host-code"),
    pytest.param("import cuda.tile as ct\nimport math\n\ndef helper(n):\n"
                 "    return math.ceil(n)\n\n@ct.kernel\ndef k(x):\n    helper(2)\n",
                 {(5, "TP002")}, id="helper-called-from-kernel"),
    pytest.param("import cuda.tile as ct\nimport math\n\ndef helper(n):\n"
                 "    return math.ceil(n)\n\n@ct.kernel\ndef k(x):\n"
                 "    ct.static_eval(helper(2))\n", set(), id="helper-only-in-static-eval"),
    pytest.param("import cuda.lang as cl\nimport math\n\n@cl.kernel\ndef k(x):\n"
                 "    n = math.ceil(2.5)\n", set(), id="not-cuda-tile"),
    pytest.param("import cuda.tile as ct\n\n@ct.kernel\ndef k(x):\n    def sum(t):\n"
                 "        return t\n    return sum(x)\n", set(), id="shadowed-builtin"),
])
def test_device_code_detection(source, rules):
    assert {(f.line, f.rule) for f in lint_source(source, "k.py")} == rules


# ----------------------------------------------------------------------------- ignores

def test_ignore_with_reason_silences_that_rule_on_that_line():
    src = KERNEL.format(comment="  # tileproof: ignore[TP003] 48-wide rows, checked on GPU")
    assert lint_source(src, "k.py") == []


def test_ignore_names_the_rule_it_silences():
    src = KERNEL.format(comment="  # tileproof: ignore[TP001] wrong rule")
    assert [(f.line, f.rule) for f in lint_source(src, "k.py")] == [(5, "TP003")]


def test_ignore_without_reason_is_a_finding_and_silences_nothing():
    src = KERNEL.format(comment="  # tileproof: ignore[TP003]")
    found = lint_source(src, "k.py")
    assert [(f.line, f.rule) for f in found] == [(5, "TP003"), (5, "TP900")]
    assert "no reason" in found[1].reason


def test_ignore_with_unknown_rule_is_a_finding():
    src = KERNEL.format(comment="  # tileproof: ignore[TP777] typo")
    assert [(f.line, f.rule) for f in lint_source(src, "k.py")] == [(5, "TP003"), (5, "TP900")]


def test_ignore_inside_a_string_is_not_an_ignore():
    src = KERNEL.format(comment="; s = '# tileproof: ignore[TP003] nope'")
    assert [(f.line, f.rule) for f in lint_source(src, "k.py")] == [(5, "TP003")]


# ----------------------------------------------------------------------------- output

def test_format_is_path_line_col_rule_message_fix():
    finding = Finding("kernels/a.py", "TP003", "bad shape", "use 64", line=3, col=7)
    assert str(finding) == "kernels/a.py:3:7: TP003 bad shape (fix: use 64)"


def test_findings_are_sorted_and_columns_are_one_based():
    src = KERNEL.format(comment="") + "    t[0] = 1\n"
    found = lint_source(src, "k.py")
    assert [(f.line, f.col, f.rule) for f in found] == [(5, 39, "TP003"), (7, 5, "TP006")]
    assert found == sorted(found)


def test_syntax_error_is_one_tp000_line():
    found = lint_source("def f(:\n    pass\n", "bad.py")
    assert len(found) == 1
    assert re.fullmatch(r"bad\.py:1:\d+: TP000 cannot parse: .+", str(found[0]))


def _cli(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    lint.add_arguments(parser)
    return parser.parse_args(argv)


def test_cli_default_path_is_kernels():
    assert _cli().paths == [Path("kernels")]


def test_cli_exit_codes_and_output(tmp_path, capsys):
    (tmp_path / "clean.py").write_text("x = 1\n")
    assert lint.run(_cli(str(tmp_path))) == 0
    assert capsys.readouterr().out == ""
    (tmp_path / "bad.py").write_text(KERNEL.format(comment=""))
    (tmp_path / "broken.py").write_text("def f(:\n")
    assert lint.run(_cli(str(tmp_path))) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[1].split()[0] for line in lines] == ["TP003", "TP000"]
    assert lines[0].startswith(f"{tmp_path / 'bad.py'}:5:")
    assert lint.run(_cli(str(tmp_path / "missing"))) == 2


def test_cli_lists_rules(capsys):
    assert lint.run(_cli("--list-rules")) == 0
    out = capsys.readouterr().out
    for rule, (slug, _) in RULES.items():
        assert re.search(rf"^{rule}\s+{slug}\s", out, re.M)


def test_lint_paths_walks_folders(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "k.py").write_text(KERNEL.format(comment=""))
    (tmp_path / "notes.txt").write_text("not python")
    assert [(Path(f.file).name, f.rule) for f in lint_paths([tmp_path])] == [("k.py", "TP003")]


# ----------------------------------------------------------------------------- the repo

def test_repo_kernels_are_clean():
    if not any((REPO / "kernels").rglob("*.py")):
        pytest.skip("kernels/ has no .py files yet")
    assert [str(f) for f in lint_paths([REPO / "kernels"])] == []


# ----------------------------------------------------------------------------- the compiler

def _oracle_cases():
    for path in sorted(SNIPPETS.glob("tp*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "ORACLE":
                for case in ast.literal_eval(node.value):
                    yield pytest.param(path, case, id=f"{path.stem}-{case['kernel']}")


@pytest.mark.parametrize("path, case", list(_oracle_cases()))
def test_snippet_agrees_with_compiler(path, case):
    """cuda-tile 1.7.0 accepts each right snippet and rejects the wrong ones said to fail."""
    ct = pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    compilation = pytest.importorskip("cuda.tile.compilation")
    dtypes = {"f16": ct.float16, "f32": ct.float32, "i32": ct.int32}

    def param(spec):
        if isinstance(spec, int):
            return spec
        if ":" in spec:
            dtype, ndim = spec.split(":")
            return compilation.ArrayConstraint(
                dtypes[dtype], int(ndim), index_dtype=ct.int32, stride_lower_bound_incl=0,
                alias_groups=(), may_alias_internally=False)
        return compilation.ScalarConstraint(dtypes[spec])

    spec = importlib.util.spec_from_file_location(f"lint_snippet_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    signature = compilation.KernelSignature(
        [param(a) for a in case["args"]], compilation.CallingConvention.cutile_python_v1())
    try:
        compilation.export_kernel(getattr(module, case["kernel"]), [signature], io.BytesIO(),
                                  gpu_code="sm_90", output_format="cubin")
        compiled, error = True, None
    except FileNotFoundError as e:
        pytest.skip(f"tileiras is not installed: {e}")
    except Exception as e:  # the compiler's own error types vary by stage
        if "tileiras" in str(e) and "not found" in str(e).lower():
            pytest.skip(f"tileiras is not installed: {e}")
        compiled, error = False, e
    assert compiled == case["compiles"], f"cuda-tile {ct.__version__} said: {error!r}"


# ----------------------------------------------------------------------------- the registry

def test_each_rule_module_registers_its_own_id_only():
    """A rule is one file: rules/tpNNN.py registers TPNNN and nothing else."""
    modules = {p.stem.upper() for p in (REPO / "tileproof" / "lint" / "rules").glob("tp*.py")}
    registered = {r for r in RULES if r not in rule_table.ENGINE_RULES}
    assert modules == registered == set(SNIPPET_RULES)
    for rule in registered:
        owner = rule_table._REGISTRY[rule]
        assert owner.fn.__module__ == f"tileproof.lint.rules.{rule.lower()}"


def test_registering_an_id_twice_is_refused():
    with pytest.raises(rule_table.DuplicateRuleError, match="TP003"):
        rule_table.rule("TP003", "again", "a second TP003", on=(ast.Call,))(lambda d, n, e: ())


def test_cli_summary_line_also_when_clean(tmp_path, capsys):
    (tmp_path / "clean.py").write_text("x = 1\n")
    (tmp_path / "other.py").write_text("y = 2\n")
    assert lint.run(_cli(str(tmp_path))) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[-1] == "lint-kernels: 2 files, 0 findings"
    (tmp_path / "bad.py").write_text(KERNEL.format(comment=""))
    assert lint.run(_cli(str(tmp_path))) == 1
    assert capsys.readouterr().err.splitlines()[-1] == "lint-kernels: 3 files, 1 findings in 1 files"


def test_list_rules_survives_a_closed_pipe():
    """`lint-kernels --list-rules | head -0`: the reader is gone before the first line; no traceback, exit 0."""
    read, write = os.pipe()
    os.close(read)   # every write now fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "tileproof", "lint-kernels", "--list-rules"],
                              stdout=write, stderr=subprocess.PIPE, cwd=REPO, timeout=60)
    finally:
        os.close(write)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "BrokenPipe" not in err
    assert "Exception ignored" not in err
