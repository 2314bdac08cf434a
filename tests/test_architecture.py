"""The package's import contract (pyproject.toml ``[tool.importlinter]``), "no import cycles", and
"only the runner's starters start a process".

The contracts are import-linter's, run the way ``lint-imports`` runs them; a broken
one fails the test with import-linter's own text (which import, from which line).
Each contract is also shown to fail on a small package that breaks it, so none of
them can pass by matching nothing. The process check reads every module's AST (an
import contract cannot see ``os.system`` or ``os.execv``) and is shown to fail on
made-up modules the same way.
"""

from __future__ import annotations

import ast
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
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["id"] == "layers"]
    layers = [name.strip() for layer in contract["layers"] for name in layer.replace("|", ":").split(":")]
    skeleton = {"tileproof/__init__.py": ""} | {  # each layer a module or a package, as in this tree
        f"tileproof/{name}.py" if (REPO / "tileproof" / f"{name}.py").is_file() else f"tileproof/{name}/__init__.py": ""
        for name in layers
    } | {"tileproof/runner/process.py": "import subprocess\n", "tileproof/runner/query.py": "import subprocess\n",
          "tileproof/runner/forked.py": "import multiprocessing\n", "tileproof/commands/audit.py": "",
          "tileproof/catalog/index.py": ""} | {
        "/".join(room.split(".")) + "/__init__.py": ""  # the rooms other layers contracts name (records.trust...)
        for c in config["contracts"] if c["type"] == "layers" for room in c["containers"] if room != "tileproof"
    }
    src = tmp_path / "src"
    _package(src, skeleton | files)
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
        ({"tileproof/commands/status.py": "import tileproof.catalog\n"}, "Only gather opens the catalog"),
        ({"tileproof/report/render.py": "import tileproof.catalog\n"}, "Only gather opens the catalog"),
        ({"tileproof/gather/tree.py": "import tileproof.catalog.index\n"},
         "The catalog's index is imported only inside"),
        ({"tileproof/runner/forked.py": "import multiprocessing\nimport tileproof.catalog\n"},
         "Layers: arrows point down only"),
        ({"tileproof/judge/gate.py": "import tileproof.toolchain\n"}, "The judge reads records only"),
        ({"tileproof/judge/gate.py": "import subprocess\n"}, "The judge reads records only"),
        ({"tileproof/toolchain/find.py": "import subprocess\n"}, "Only the runner starts processes"),
        ({"tileproof/commands/run.py": "import subprocess\n"}, "Only the runner starts processes"),
        ({"tileproof/report/render.py": "import tileproof.commands.audit\n"}, "Nothing imports a command"),
        ({"tileproof/commands/status.py": "from tileproof.commands import publish\n",
          "tileproof/commands/publish.py": ""}, "Commands do not import one another"),
        ({"tileproof/fresh/__init__.py": "import subprocess\n"}, "Only the runner starts processes"),
        ({"tileproof/gather/audit_scan.py": "import multiprocessing\n"}, "Only the runner starts processes"),
        ({"tileproof/runner/worktree.py": "import subprocess\n"}, "Only the runner starts processes"),
        ({"tileproof/judge/gate.py": "from multiprocessing import Pool\n"}, "The judge reads records only"),
        ({"tileproof/records/models/__init__.py": "", "tileproof/records/models/run.py": "import tileproof.runner\n"},
         "Layers: arrows point down only"),
        ({"tileproof/lesson_text.py": "import tileproof.judge\n"}, "Layers: arrows point down only"),
        ({"tileproof/records/trust/signing.py": "import tileproof.records.trust.runner_keys\n",
          "tileproof/records/trust/runner_keys.py": ""}, "Records' trust room"),
        ({"tileproof/judge/trust/trust_root.py": "from tileproof.judge.trust import standing\n",
          "tileproof/judge/trust/standing.py": ""}, "Judge's trust room"),
        ({"tileproof/records/lessons.py": "import tileproof.lesson_text\n"}, "Layers: arrows point down only"),
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
    assert verdicts, report
    assert verdicts[0].endswith("BROKEN"), report


def test_a_module_cycle_is_found(tmp_path, monkeypatch):
    _package(tmp_path, {
        "cyclepkg/__init__.py": "",
        "cyclepkg/a.py": "from cyclepkg import b\n",
        "cyclepkg/b.py": "from cyclepkg import c\n",
        "cyclepkg/c.py": "import cyclepkg.a\n",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    cycle = import_cycle("cyclepkg")
    assert cycle is not None
    assert set(cycle) == {"cyclepkg.a", "cyclepkg.b", "cyclepkg.c"}


# --- only the starters start a process ---------------------------------------------------------

STARTERS = {
    "tileproof/runner/process.py": "the contained starter: every program tileproof runs as work, with a deadline",
    "tileproof/runner/query.py": "short questions to a tool (git, Slurm's clients), each with a deadline",
    "tileproof/runner/forked.py": "the one forked copy of tileproof for pure byte work (hashing, sealing)",
    "tileproof/runner/stepinit.py": "a contained step's first process (PID 1 of its namespace, or its cgroup's "
                                    "starter): forks and execs the one program process.py gives it",
}
"""The only modules of tileproof/ that may start a process, and what each is for."""

PROCESS_MODULES = ("subprocess", "multiprocessing", "pty", "asyncio.subprocess", "concurrent.futures.process")
STARTING_NAMES = {"ProcessPoolExecutor", "create_subprocess_exec", "create_subprocess_shell"}
"""Names that start a process wherever they come from (concurrent.futures, asyncio)."""
UNTIMED = {"run", "call", "check_call", "check_output"}
"""``subprocess`` helpers that wait for the process: each call must pass ``timeout=``."""


def _os_start(name: str) -> bool:
    return name in {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp"} or \
        name.startswith(("exec", "spawn"))


def _process_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in PROCESS_MODULES)


def process_starts(text: str) -> list[str]:
    """Every place the module ``text`` could start a process, as ``line: what``; a ``subprocess`` wait
    without ``timeout=`` is one too, even in a starter."""
    tree = ast.parse(text)
    os_names = {a.asname or "os" for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
                if a.name == "os"}
    subprocess_names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
                        if a.name == "subprocess"}
    found = []
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Import):
            what = next((a.name for a in node.names if _process_module(a.name)), None)
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            if _process_module(node.module or ""):
                what = f"from {node.module} import"
            elif node.module == "os" and any(_os_start(n) for n in names):
                what = f"os.{next(n for n in names if _os_start(n))}"
            elif STARTING_NAMES & set(names):
                what = min(STARTING_NAMES & set(names))
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in os_names and _os_start(node.attr):
                what = f"os.{node.attr}"
            elif node.attr in STARTING_NAMES:
                what = node.attr
        elif isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Name) and func.id == "__import__") or (
                    isinstance(func, ast.Attribute) and func.attr == "import_module"):
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _process_module(arg.value):
                    what = f"imports {arg.value}"
            elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                  and func.value.id in subprocess_names and func.attr in UNTIMED
                  and not any(k.arg == "timeout" for k in node.keywords)):
                found.append(f"{node.lineno}: subprocess.{func.attr} without timeout=")
        if what is not None:
            found.append(f"{node.lineno}: {what}")
    return found


def test_only_the_starters_start_a_process():
    """Every other module of tileproof/ asks the runner's starters; each starter is still one (the list is
    not stale), and every wait on a process in them has a deadline."""
    offenders, used = [], set()
    for path in sorted((REPO / "tileproof").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        starts = process_starts(path.read_text(encoding="utf-8"))
        if rel in STARTERS:
            used.add(rel)
            offenders += [f"{rel}:{s}" for s in starts if "without timeout=" in s]
        else:
            offenders += [f"{rel}:{s}" for s in starts]
    assert not offenders, "a process started outside the starters (STARTERS): " + ", ".join(offenders)
    starting = {rel for rel in STARTERS if process_starts((REPO / rel).read_text(encoding="utf-8"))}
    assert used == starting == set(STARTERS)


@pytest.mark.parametrize("text", [
    "import subprocess\n",
    "import subprocess as sp\nsp.Popen(['x'])\n",
    "from subprocess import run\nrun(['git'])\n",
    "import os\nos.system('make')\n",
    "import os as o\no.popen('ls')\n",
    "import os\nos.execv('/bin/sh', ['sh'])\n",
    "from os import execvp\n",
    "import os\nos.spawnlp(os.P_WAIT, 'ls', 'ls')\n",
    "import os\npid = os.fork()\n",
    "import os\nos.posix_spawn('/bin/true', ['true'], {})\n",
    "import pty\npty.spawn('sh')\n",
    "from multiprocessing import Process\n",
    "import multiprocessing.pool\n",
    "from concurrent.futures import ProcessPoolExecutor\n",
    "import concurrent.futures\nconcurrent.futures.ProcessPoolExecutor(2)\n",
    "import asyncio\nasyncio.create_subprocess_exec('ls')\n",
    "import importlib\nimportlib.import_module('subprocess')\n",
    "__import__('subprocess')\n",
], ids=lambda text: text.splitlines()[-1][:40])
def test_a_made_up_module_that_starts_a_process_is_found(text):
    assert process_starts(text), text


def test_a_wait_without_a_deadline_is_found_even_in_a_starter():
    assert process_starts("import subprocess\nsubprocess.run(['git'], timeout=5)\n") == ["1: subprocess"]
    assert "2: subprocess.run without timeout=" in process_starts("import subprocess\nsubprocess.run(['git'])\n")


@pytest.mark.parametrize("text", [
    "import os\nos.path.join('a', 'b')\nos.environ.get('X')\nos.kill(1, 9)\n",
    "from concurrent.futures import ThreadPoolExecutor\n",
    "import shutil\nshutil.which('git')\n",
    "text = 'subprocess'\n",
])
def test_a_module_that_starts_nothing_is_not_flagged(text):
    assert process_starts(text) == []
