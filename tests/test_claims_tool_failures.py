"""A probe whose tool failed for its own reasons is an ``error``, never a finding.

Real transcripts (tests/data/nvcc/): nvcc 13.2.86 (``nvidia-cuda-nvcc==13.2.*`` and
``nvidia-cuda-crt==13.2.*`` in a fresh venv) knows no ``-enable-tile`` and has no
``crt/cuda_tile.h``; the same nvcc with another release's ptxas on PATH gives up with
``ptxas fatal`` and no error line; the 13.4 transcripts show real findings that stay findings.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from tileproof.claims import spec
from tileproof.claims.checks import judge_compile
from tileproof.records.models import Step, Transcript

DATA = Path(__file__).parent / "data" / "nvcc"


def _transcript(name: str) -> tuple[str, int]:
    """(what the tool printed, its exit code): the fixture's ``$ command`` and ``[exit N]`` lines removed."""
    lines = (DATA / name).read_text().splitlines()
    assert lines[0].startswith("$ ")
    assert lines[-1].startswith("[exit ")
    return "\n".join(lines[1:-1]) + "\n", int(lines[-1][len("[exit "):-1])


def _step(exit_code: int) -> Step:
    t = Transcript(path="evidence/x.txt", sha256="0" * 64, bytes=0)
    now = datetime.now(timezone.utc)
    return Step(step_version=1, name="doc.c.check.nvcc", argv=["nvcc"], started=now, ended=now, duration_s=1.0,
                exit_code=exit_code, stdout=t, stderr=t)


CASES = [
    # the tool's own failures: error, whatever the claim expected
    ("nvcc132_unknown_enable_tile.txt", "fails", [], "error", "Unknown option '-enable-tile'"),
    ("nvcc132_unknown_enable_tile.txt", "compiles", [], "error", "Unknown option '-enable-tile'"),
    ("nvcc132_no_crt_header.txt", "fails", [], "error", "could not open crt/cuda_tile.h"),
    ("nvcc132_no_crt_header.txt", "compiles", [], "error", "could not open crt/cuda_tile.h"),
    ("nvcc132_ptxas_fatal.txt", "fails", [], "error", "ptxas failed for its own reasons (Unsupported .version 9.5"),
    ("nvcc132_ptxas_fatal.txt", "compiles", [], "error", "ptxas failed"),
    ("no_tileiras.txt", "fails", [], "error", "tileiras: not found"),
    # the compiler judging the code: findings, as before
    ("cxx17.txt", "fails", [r'#error\s+"This file needs C\+\+20'], "as-stated", "exit 1"),
    ("cxx17.txt", "compiles", [], "contradicts", "does not compile"),
    ("no_enable_tile.txt", "fails", ["warning #20359-D"], "as-stated", "exit 2"),
    ("no_enable_tile.txt", "fails", ["warning #20360-D"], "contradicts", "not with"),
]


@pytest.mark.parametrize("fixture, outcome, pattern, want, words", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[3]}" for c in CASES])
def test_a_tool_failure_is_an_error_and_a_diagnostic_a_finding(fixture, outcome, pattern, want, words):
    text, code = _transcript(fixture)
    got, why = judge_compile(_step(code), text, spec.Expected(outcome=outcome, pattern=pattern), "cpp")
    assert (got, words in why) == (want, True), why
    assert "\n" not in why


def test_a_python_export_is_not_judged_by_nvcc_rules():
    text, code = _transcript("nvcc132_ptxas_fatal.txt")
    got, why = judge_compile(_step(code), text, spec.Expected(outcome="fails"), "python")
    assert got == "error"
    assert "outside the compiler" in why
