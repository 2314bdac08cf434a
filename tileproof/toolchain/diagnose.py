"""Known tile-toolchain failures, recognised from their real error text.

Each pattern was taken from a real transcript (tests/data/nvcc/ keeps them).
A diagnosis names the failure and the fix; it never changes a verdict, which
always comes from exit codes and artifact inspection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tileproof.records.models import Diagnosis


@dataclass(frozen=True)
class Pattern:
    id: str
    title: str
    fix: str
    regex: re.Pattern
    exit_codes: tuple[int, ...] = ()
    """When non-empty, the pattern applies only to these exit codes."""


PATTERNS = (
    Pattern(
        "cxx17",
        "cuda_tile.h needs C++20 (the header's own #error)",
        "compile with -std=c++20",
        re.compile(r'#error "This file needs C\+\+20 features'),
    ),
    Pattern(
        "no-enable-tile",
        "tile parsing is off: __tile_global__ was ignored and tile calls became host calls",
        "add -enable-tile to the nvcc command",
        re.compile(r"warning #\d+-D: parsing for Tile constructs is not enabled"
                   r"|calling a __tile__ function\(.*\) from a __host__ function\(.*\) is not allowed"),
    ),
    Pattern(
        "global-calls-tile",
        "a __global__ kernel calls tile code",
        "declare the entry point __tile_global__ (a tile kernel is a second entry point, not an edit)",
        re.compile(r"calling a __tile__ function\(.*\) from a __global__ function\(.*\) is not allowed"),
    ),
    Pattern(
        "nvcc-symlink",
        "nvcc was called through a symlink and lost its include paths",
        "call nvcc by its real path (tileproof resolves it; do not symlink the pip nvcc)",
        re.compile(r"cuda_runtime\.h: No such file or directory"),
    ),
    Pattern(
        "tileiras-missing",
        "tileiras (the tile IR assembler) is not installed or not on PATH",
        "pip install 'cuda-tile[tileiras]' (same major.minor as nvcc) or put tileiras on PATH",
        re.compile(r"tileiras: (?:command )?not found|'tileiras' compiler not found"),
    ),
    Pattern(
        "cuda-home-old",
        "tileiras failed to compile the Tile IR program (CUDA_HOME names another toolkit?)",
        "unset CUDA_HOME/CUDA_PATH or point them at the toolkit of tileiras's release",
        re.compile(r"failed to compile Tile IR program"),
    ),
    Pattern(
        "mixed-packages",
        "cuTile found NVIDIA pip packages of different releases",
        "install one release: pip install 'tileproof[toolchain]'",
        re.compile(r"Installed NVIDIA pip packages have mismatched versions"),
    ),
    Pattern(
        "check-not-in-table",
        "a check name the C++ program looks up is not in cpp/tolerances.h",
        "add the check to kernels/tolerances.py (TOLERANCES), then compile again: it regenerates "
        "cpp/tolerances.h first (or run nox -s schema)",
        re.compile(r"check name not in kernels/tolerances\.py"),
    ),
    Pattern(
        "tile-dims-not-pow2",
        "a tile dimension is not a compile-time power of two",
        "use a ct.Constant power of two for every tile dimension",
        re.compile(r"power of (?:two|2)", re.IGNORECASE),
        exit_codes=(1,),
    ),
)

NO_TILE_CODE = Diagnosis(
    id="no-tile-code",
    title="the build exited 0 but holds no tile code (target below sm_80, or no -arch: nvcc defaults to sm_75)",
    fix="build with -arch=sm_80 or newer (nox -s compile -- --arch sm_90)",
)


def diagnose(text: str, exit_code: int | None) -> list[Diagnosis]:
    """Every known failure whose text appears in ``text``."""
    found = []
    for p in PATTERNS:
        if p.exit_codes and exit_code not in p.exit_codes:
            continue
        if p.regex.search(text):
            found.append(Diagnosis(id=p.id, title=p.title, fix=p.fix))
    if exit_code == 127 and not any(d.id == "tileiras-missing" for d in found) and "not found" in text:
        p = next(p for p in PATTERNS if p.id == "tileiras-missing")
        found.append(Diagnosis(id=p.id, title=p.title, fix=p.fix))
    return found
