"""Finding the C++ executable a run should use: built from today's source.

A compile record attests each artifact (path under build/, digest, the
digests of the sources it was built from, the tolerance entries its program
names). The newest record that still attests today's inputs of the program
(``records.depends``, the rule the judge uses too) and whose artifact is still
on disk wins; failing that, the program is built on demand when a tile
toolchain is installed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tileproof.records import depends
from tileproof.records.errors import TileproofError
from tileproof.records.models import CompileRecord
from tileproof.records.store import load_records, sha256_file
from tileproof.records.tolerances import TABLE_FILE, load_table
from tileproof.runner.builds import compile_programs
from tileproof.runner.capture import tools as find_tools
from tileproof.toolchain.find import require_coherent
from tileproof.toolchain.uses import program_uses


@dataclass(frozen=True)
class Binary:
    path: Path
    compile_run_id: str
    nvcc_version: str | None


def compile_records(root: Path) -> list[CompileRecord]:
    """Every compile record under runs/, read once per command."""
    return [r for r in load_records(root) if isinstance(r, CompileRecord)]


def _attested(root: Path, program: Path, target: str, records: list[CompileRecord]) -> Binary | None:
    rel = program.relative_to(root).as_posix()
    table = load_table(root) if (root / TABLE_FILE).is_file() else {}
    uses = program_uses(root, program, table)
    today: dict[str, str | None] = {}
    for record in sorted(records, key=lambda r: r.created, reverse=True):
        dep = depends.of_compile(record, rel, uses)
        if isinstance(dep, str):
            continue
        for path in dep.files:
            if path not in today:
                today[path] = sha256_file(root / path) if (root / path).is_file() else None
        if depends.changed(dep, today, table) is not None:  # no history read here: an older record's table stays whole
            continue
        for b in record.builds:
            if (b.program, b.target, b.artifact_kind, b.verdict) != (rel, target, "executable", "built"):
                continue
            if b.artifact and (built := root / b.artifact.path).is_file() and sha256_file(built) == b.artifact.sha256:
                nvcc = next((t.version for t in record.toolchain.tools if t.name == "nvcc"), None)
                return Binary(root / b.artifact.path, b.reused_from or record.run_id, nvcc)
    return None


def find_binary(root: Path, program: Path, target: str, records: list[CompileRecord]) -> Binary | None:
    """The attested executable for ``target``, building it here if possible.

    ``records``: the compile records already read (``compile_records``). A build
    on demand holds build/'s lock (``builds.compile_programs``); when another
    tileproof built it meanwhile, nothing is built and its record, read again
    from runs/, attests the binary.
    """
    found = _attested(root, program, target, records)
    if found is not None:
        return found
    try:
        tools = find_tools()
        require_coherent(tools)
    except TileproofError:
        return None
    print(f"run: building {program.relative_to(root)} for {target} (no attested binary)")
    compile_programs(root, tools, [target], [program], {}, 1)
    return _attested(root, program, target, compile_records(root))
