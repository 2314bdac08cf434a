"""The package's import contract (pyproject.toml ``[tool.importlinter]``) and "no import cycles".

The contracts are import-linter's, run the way ``lint-imports`` runs them; a broken
one fails the test with import-linter's own text (which import, from which line).
Each contract is also shown to fail on a small package that breaks it, so none of
them can pass by matching nothing.
"""

from __future__ import annotations

import graphlib
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

try:
    import tomllib
except ImportError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]

LINT_IMPORTS = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """``lint-imports`` in ``cwd``, which reads ``cwd/pyproject.toml`` (no cache: nothing written into the tree)."""
    env = None
    if pythonpath is not None:
        env = {"PYTHONPATH": str(pythonpath), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--no-cache", "--no-logo"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )


def import_cycle(package: str) -> list[str] | None:
    """One import cycle among ``package``'s modules (module by module), or None."""
    graph = grimp.build_graph(package)
    deps = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    try:
        graphlib.TopologicalSorter(deps).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return None


def test_import_contracts_hold():
    done = lint_imports(REPO)
    report = done.stdout + done.stderr
    assert done.returncode == 0, f"an import contract is broken (pyproject.toml [tool.importlinter]):\n{report}"
    assert "0 broken" in report, report


def test_no_import_cycle_among_modules():
    # The acyclic_siblings contract compares sibling packages; this compares every module.
    cycle = import_cycle("tileproof")
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _package(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _contracts_over(tmp_path: Path, files: dict[str, str]) -> str:
    """Run this repository's contracts over a made-up ``tileproof`` built from ``files``."""
    layers = ["__main__", "commands", "authoring", "bench", "claims", "fleet", "gather", "lint", "report", "runner",
              "toolchain", "judge", "records"]
    skeleton = {"tileproof/__init__.py": ""} | {
        f"tileproof/{name}.py" if name == "__main__" else f"tileproof/{name}/__init__.py": "" for name in layers
    } | {"tileproof/runner/process.py": "import subprocess\n", "tileproof/runner/forked.py": "import multiprocessing\n",
          "tileproof/commands/audit.py": ""}
    src = tmp_path / "src"
    _package(src, skeleton | files)
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (tmp_path / "pyproject.toml").write_text(_toml_section(config))
    done = lint_imports(tmp_path, pythonpath=src)
    return done.stdout + done.stderr


def _toml_section(config: dict) -> str:
    """``[tool.importlinter]`` back as TOML (strings, booleans and lists of strings are all it holds)."""
    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["[tool.importlinter]"]
    lines += [f"{k} = {value(v)}" for k, v in config.items() if k != "contracts"]
    for contract in config["contracts"]:
        lines += ["", "[[tool.importlinter.contracts]]"]
        lines += [f"{k} = {value(v)}" for k, v in contract.items()]
    return "\n".join(lines) + "\n"


def test_the_contracts_hold_for_a_clean_made_up_package(tmp_path):
    report = _contracts_over(tmp_path, {"tileproof/commands/audit.py": "import tileproof.judge\n"})
    assert "0 broken" in report, report


@pytest.mark.parametrize(
    ("files", "broken"),
    [
        ({"tileproof/judge/gate.py": "import tileproof.runner\n"}, "The judge reads records only"),
        ({"tileproof/judge/gate.py": "import tileproof.toolchain\n"}, "The judge reads records only"),
        ({"tileproof/judge/gate.py": "import subprocess\n"}, "The judge reads records only"),
        ({"tileproof/toolchain/find.py": "import subprocess\n"}, "Only the runner starts processes"),
        ({"tileproof/commands/run.py": "import subprocess\n"}, "Only the runner starts processes"),
        ({"tileproof/report/render.py": "import tileproof.commands.audit\n"}, "Nothing imports a command"),
        ({"tileproof/commands/status.py": "from tileproof.commands import publish\n",
          "tileproof/commands/publish.py": ""}, "Commands do not import one another"),
        ({"tileproof/fresh/__init__.py": "import subprocess\n"}, "Only the runner starts processes"),
        ({"tileproof/gather/audit_scan.py": "import multiprocessing\n"}, "Only the runner starts processes"),
        ({"tileproof/judge/gate.py": "from multiprocessing import Pool\n"}, "The judge reads records only"),
        ({"tileproof/records/models.py": "import tileproof.runner\n"}, "Layers: arrows point down only"),
        ({"tileproof/fresh/__init__.py": ""}, "Layers: arrows point down only"),
        (
            {"tileproof/bench/core.py": "import tileproof.claims.spec\n",
             "tileproof/claims/spec.py": "import tileproof.bench.core\n"},
            "No import cycles",
        ),
    ],
)
def test_each_contract_fails_on_a_package_that_breaks_it(tmp_path, files, broken):
    report = _contracts_over(tmp_path, files)
    verdicts = [ln for ln in report.splitlines() if ln.startswith(broken)]
    assert verdicts and verdicts[0].endswith("BROKEN"), report


def test_a_module_cycle_is_found(tmp_path, monkeypatch):
    _package(tmp_path, {
        "cyclepkg/__init__.py": "",
        "cyclepkg/a.py": "from cyclepkg import b\n",
        "cyclepkg/b.py": "from cyclepkg import c\n",
        "cyclepkg/c.py": "import cyclepkg.a\n",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    cycle = import_cycle("cyclepkg")
    assert cycle is not None and set(cycle) == {"cyclepkg.a", "cyclepkg.b", "cyclepkg.c"}
