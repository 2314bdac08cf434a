"""What a program uses: the helper files it imports (Python) or includes (C++), transitively.

A run record attests exactly these files whole (they are code: the harness, a shared header),
plus the tolerance entries of its checks one by one (``records.tolerances.entry_digest``), never
the tolerance table or its generated header as a whole file: an entry added for another lesson
then stales nothing. Builds keep depending on every helper of the folder
(``build.dependencies``): a compiler sees the whole header.

Read with ``ast`` (Python) and a quoted-``#include`` scan (C++); nothing is executed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tileproof.records.tolerances import TABLE_PATHS

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def _python_imports(path: Path) -> list[Path]:
    """Sibling modules ``path`` imports (``import harness``, ``from tolerances import X``)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
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


def helpers(root: Path, program: Path) -> list[Path]:
    """The helper files ``program`` reaches through its imports/includes, in the order found,
    without the program itself and without the tolerance table files."""
    step = _cpp_includes if program.suffix in (".cu", ".h", ".cuh") else _python_imports
    seen: dict[Path, None] = {}
    todo = [program]
    while todo:
        for dep in step(todo.pop(0)):
            dep = dep.resolve()
            if dep not in seen and dep != program.resolve():
                seen[dep] = None
                todo.append(dep)
    table = {Path(root).resolve() / p for p in TABLE_PATHS}
    return [p for p in seen if p not in table]


def run_sources(root: Path, program: Path) -> list[Path]:
    """The files a run record of ``program`` attests whole: the program, then its helpers."""
    return [program, *helpers(root, program)]
