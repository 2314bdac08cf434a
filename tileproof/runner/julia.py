"""Running a cuTile.jl program (``kernels/*.jl``) where julia with cuTile.jl exists.

Before a ``.jl`` program runs, ``julia --project=. -e 'using CuTile'`` is run as a
step of its own (its transcripts are evidence). When it fails (no ``julia`` on PATH:
exit 127; cuTile.jl not installed in the project: julia's own error), the program is
not started and its run record says ``toolchain-absent`` with that step and the fix;
it is never a pass and never skipped. Otherwise the program runs as every other
program does (``execute.run_program``: ``--report``, timeout, capture): cuTile.jl
compiles its kernels when they are first launched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tileproof.records.models import TOOLCHAIN_ABSENT_FIX, Step
from tileproof.runner.execute import Outcome, RunOptions, run_program
from tileproof.runner.outside_check import Checker
from tileproof.runner.step import Limits, run_step
from tileproof.runner.wall import Wall

JULIA = "julia"
PROBE = "using CuTile"
FIX = TOOLCHAIN_ABSENT_FIX


@dataclass(frozen=True)
class Absent:
    """The program's toolchain is not here: the probe step that showed it, and one line with the fix."""

    step: Step
    reason: str


def julia_argv(*args: str) -> list[str]:
    """``julia --project=. ARGS``: the repository's Julia project (run in the repository root)."""
    return [JULIA, "--project=.", *args]


def run_julia_program(root: Path, run_id: str, program: Path, env: dict[str, str], timeout: float,
                      cap: int | None = None, checker: Checker | None = None) -> Outcome | Absent:
    """Probe for julia + cuTile.jl, then run ``program`` (repo-relative argv) or record why not; ``checker``: the
    session's own checker of handed-over outputs (``execute.run_program``)."""
    probe = run_step(root, run_id, f"{program.stem}-julia-probe", julia_argv("-e", PROBE), env,
                     Limits(min(timeout, 300.0), cap), wall=Wall(root))
    if probe.exit_code != 0 or probe.timed_out:
        what = ("no julia on PATH" if probe.exit_code == 127 else
                f"julia cannot load cuTile.jl ('{PROBE}' exited {probe.exit_code}"
                f"{', timed out' if probe.timed_out else ''}; see {probe.stderr.path})")
        return Absent(probe, f"{what}: the program was not started (fix: {FIX})")
    rel = program.relative_to(root).as_posix() if program.is_absolute() else program.as_posix()
    return run_program(root, run_id, program.stem, julia_argv(rel), env, timeout, RunOptions(cap, checker=checker))
