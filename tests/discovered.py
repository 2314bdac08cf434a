"""What the tests run over, discovered from the tree (never listed by hand): a new program, lesson
or claims document gets its import, AOT, gate, bounds and lesson tests with no test edit."""

from __future__ import annotations

import re
from pathlib import Path

from tileproof.claims import spec as claims_spec
from tileproof.records import lessons
from tileproof.toolchain.build import programs

REPO = Path(__file__).resolve().parents[1]

PY_CHECK = re.compile(r"""\.check\(\s*["'](\w+)["']""")
CPP_CHECK = re.compile(r"""tol::get\(\s*"(\w+)"\s*\)""")


def python_programs(root: Path = REPO) -> list[str]:
    """File names of the Python programs in kernels/ (``build.programs``: those declaring AOT_SIGNATURES)."""
    return [p.name for p in programs(root, "kernels")]


def cpp_programs(root: Path = REPO) -> list[str]:
    return [p.name for p in programs(root, "cpp")]


def lesson_ids(root: Path = REPO) -> list[str]:
    return lessons.lesson_ids(root)


def claims_documents(root: Path = REPO) -> list[str]:
    """Document ids of the claims files, in file order."""
    return [p.name[: -len(claims_spec.SUFFIX)] for p in claims_spec.claims_files(root)]


def program_checks(root: Path = REPO) -> dict[str, list[str]]:
    """Program path → the check names its source uses (``s.check("x")`` / ``tol::get("x")``)."""
    out = {}
    for folder, pattern in (("kernels", PY_CHECK), ("cpp", CPP_CHECK)):
        for p in programs(root, folder):
            out[f"{folder}/{p.name}"] = list(dict.fromkeys(pattern.findall(p.read_text())))
    return out
