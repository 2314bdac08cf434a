"""What a program uses: the helper files it imports (Python) or includes (C++), transitively, and the
tolerance-table entries its files name.

A run record attests exactly these files whole (they are code: the harness, a shared header),
plus the tolerance entries of its checks one by one (``records.tolerances.entry_digest``), never
the tolerance table or its generated header as a whole file: an entry added for another lesson
then stales nothing. A compile record (``compile_version`` 4) attests the same files per program
and the entries its files name (``program_uses``), and the build cache is keyed on exactly these
(``build.own_inputs``): a new entry, helper or program builds only the programs that read it.

Read with ``ast`` (Python), a quoted-``#include`` scan (C++) and a word scan; nothing is executed.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable
from pathlib import Path

from tileproof.records import python_source
from tileproof.records.depends import ProgramUses
from tileproof.records.tolerances import TABLE_PATHS

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A C++ identifier, which every check name is (``tolerances._check_name``): spelled in a string literal
(``tol::get("matmul")``, ``s.check("matmul", ...)``) or as an identifier (a stringizing macro)."""


def _python_imports(path: Path) -> list[Path]:
    """Sibling modules ``path`` imports (``import harness``, ``from tolerances import X``)."""
    try:
        tree = python_source.parse(path.read_text(encoding="utf-8", errors="replace"), str(path))
    except SyntaxError:
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.split(".")[0])
    return [path.parent / f"{n}.py" for n in dict.fromkeys(names) if (path.parent / f"{n}.py").is_file()]


def _cpp_includes(path: Path) -> list[Path]:
    """Files ``path`` includes with quotes, found next to it."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return [path.parent / n for n in dict.fromkeys(_INCLUDE.findall(text)) if (path.parent / n).is_file()]


def reached(program: Path) -> list[Path]:
    """Every file ``program`` reaches through its imports/includes, in the order found, without the
    program itself (the tolerance table or its header among them when it reads them)."""
    step = _cpp_includes if program.suffix in (".cu", ".h", ".cuh") else _python_imports
    seen: dict[Path, None] = {}
    todo = [program]
    while todo:
        for dep in step(todo.pop(0)):
            dep = dep.resolve()
            if dep not in seen and dep != program.resolve():
                seen[dep] = None
                todo.append(dep)
    return list(seen)


def _table_files(root: Path) -> set[Path]:
    return {Path(root).resolve() / p for p in TABLE_PATHS}


def helpers(root: Path, program: Path) -> list[Path]:
    """The helper files ``program`` reaches through its imports/includes, in the order found,
    without the program itself and without the tolerance table files."""
    table = _table_files(root)
    return [p for p in reached(program) if p not in table]


def program_uses(root: Path, program: Path, names: Iterable[str]) -> ProgramUses:
    """What ``program`` uses in the tree at ``root``: the files it reaches (table files included, as
    repository paths) and which of ``names`` (tolerance-table check names) those files, the table
    files aside, spell out anywhere: in a string literal, an identifier or a comment. A word the scan
    finds needlessly costs one more dependency; a check name a program assembles from pieces at compile
    time would be missed, so programs name each check they read in full (AUTHORING.md)."""
    root = Path(root).resolve()
    program = Path(program).resolve()
    files = [program, *reached(program)]
    table = _table_files(root)
    words: set[str] = set()
    for path in files:
        if path not in table:
            words.update(_WORD.findall(path.read_text(encoding="utf-8", errors="replace")))
    return ProgramUses(files=tuple(Path(os.path.relpath(p, root)).as_posix() for p in files),
                       names=frozenset(words & set(names)))


def run_sources(root: Path, program: Path) -> list[Path]:
    """The files a run record of ``program`` attests whole: the program, then its helpers."""
    return [program, *helpers(root, program)]
