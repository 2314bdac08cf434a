"""A ``kernels/*.jl`` (cuTile.jl) program: recognised, run where julia with cuTile.jl exists, and
recorded ``toolchain-absent`` where it does not (here: no julia on PATH); the publish decision
blocks on that record with the fix, never a pass and never skipped."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest
from conftest import cli_args

from tileproof.commands import run as run_cmd
from tileproof.gather.tree import Tree
from tileproof.records import lessons, store
from tileproof.records.models import TOOLCHAIN_ABSENT_FIX, RunRecord
from tileproof.toolchain.build import dependencies, julia_programs

REPO = Path(__file__).resolve().parents[1]
LESSON = textwrap.dedent("""\
    ---
    lesson_version: 1
    id: jl-demo
    title: A cuTile.jl program
    status: draft
    programs:
    - path: kernels/hello.jl
      checks: [vector_add]
    hardware: {gpu: null, compute_capability: null, driver: null, cuda: null, tileiras: null, cuda_tile: null, run_id: null}
    results:
    - {program: kernels/hello.jl, check: vector_add, bound: exact, result: '?', run_id: null}
    ---
    # A cuTile.jl program

    <!-- results:begin -->
    <!-- results:end -->
    """)  # noqa: E501 (the lesson text as a lesson file has it)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    if shutil.which("julia"):
        pytest.skip("julia is on PATH here: this test is about a machine without it")
    for folder in ("kernels", "lessons"):
        shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "cpp").mkdir()
    # A tree that has not adopted signing (no runner key): the unsigned record written here counts.
    (tmp_path / "lessons" / "runners.yaml").write_text("registry_version: 1\nrunners: []\n")
    (tmp_path / "kernels" / "hello.jl").write_text("using CuTile\n# FIXTURE: never started here (no julia)\n")
    (tmp_path / "lessons" / "jl-demo.md").write_text(LESSON)
    return tmp_path


def test_a_jl_program_is_a_program_kind(tree):
    assert julia_programs(tree) == [tree / "kernels" / "hello.jl"]
    assert dependencies(tree / "kernels" / "hello.jl") == [tree / "kernels" / "hello.jl"]
    assert lessons.load(tree, "jl-demo").front.programs[0].path == "kernels/hello.jl"
    bad = LESSON.replace("path: kernels/hello.jl", "path: cpp/hello.jl")
    with pytest.raises(lessons.RecordError, match=r"not a program under kernels/ \(.py, .jl\) or cpp/ \(.cu\)"):
        lessons.parse("lessons/jl-demo.md", bad)


def test_without_julia_the_run_is_recorded_toolchain_absent_and_blocks(tree, capsys):
    args = cli_args("run", "--program", "hello", "--timeout", "60", "--root", str(tree), "--record-no-gpu")
    assert run_cmd.run(args) == 1
    assert "toolchain-absent" in capsys.readouterr().out
    (rec,) = [r for r in store.load_records(tree) if isinstance(r, RunRecord)]
    # written at today's run_version (3 since tolerance entries are attested), which holds toolchain-absent (>= 2)
    assert (rec.run_version >= 2, rec.verdict, rec.report) == (True, "toolchain-absent", None)
    assert rec.step.argv == ["julia", "--project=.", "-e", "using CuTile"]
    assert rec.step.exit_code == 127
    assert "no julia on PATH" in rec.reason
    assert TOOLCHAIN_ABSENT_FIX in rec.reason
    assert (tree / rec.step.stderr.path).is_file()
    assert {s.path for s in rec.sources} == {"kernels/hello.jl", "lessons/jl-demo.md"}

    decision = Tree.load(tree).decide(lessons.load(tree, "jl-demo"))
    (blocker,) = decision.blockers
    assert (blocker.kind, blocker.outcome) == ("row", "toolchain-absent")
    assert rec.run_id in blocker.reason
    assert blocker.command.startswith(TOOLCHAIN_ABSENT_FIX)
    assert not decision.publishable


def _fake_julia(tmp_path, monkeypatch, has_cutile: bool) -> None:
    """A stand-in ``julia`` first on PATH: ``-e 'using CuTile'`` exits 0 or 1; a program run prints its argv."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    script = bin_dir / "julia"
    script.write_text("#!/bin/sh\n"
                      'if [ "$2" = "-e" ]; then ' + ("exit 0" if has_cutile else
                                                    'echo "ERROR: ArgumentError: Package CuTile not found" >&2; exit 1')
                      + "; fi\necho \"FIXTURE julia $*\"; exit 1\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


@pytest.mark.parametrize("has_cutile", [True, False])
def test_where_julia_exists_the_program_runs_or_cutile_is_missing(tree, tmp_path, monkeypatch, has_cutile):
    _fake_julia(tmp_path, monkeypatch, has_cutile)
    args = cli_args("run", "--program", "hello", "--timeout", "60", "--root", str(tree), "--record-no-gpu")
    assert run_cmd.run(args) == 1
    (rec,) = [r for r in store.load_records(tree) if isinstance(r, RunRecord)]
    if has_cutile:  # started like any program: --report appended; no report written, so not a pass
        assert rec.step.argv[:3] == ["julia", "--project=.", "kernels/hello.jl"]
        assert "--report" in rec.step.argv
        assert rec.verdict not in ("passed", "toolchain-absent")
    else:
        assert rec.verdict == "toolchain-absent"
        assert "julia cannot load cuTile.jl" in rec.reason


def test_old_run_records_still_load(repo_root):
    old = [r for r in store.load_records(repo_root) if isinstance(r, RunRecord)]
    assert any(r.run_version == 1 and "run_version" not in r.model_fields_set for r in old)
    assert all(store.seal_status(r) == "intact" for r in old)


def test_toolchain_absent_needs_version_2():
    import fixture_records as fx
    rec = fx.run_record(n=1, program="kernels/hello.jl", front=None, sources={}, checks=[], query=None, gpu=None,
                        seal=False)
    with pytest.raises(ValueError, match="toolchain-absent needs run_version 2"):
        RunRecord.model_validate({**rec.model_dump(), "verdict": "toolchain-absent"})
    assert RunRecord.model_validate({**rec.model_dump(), "verdict": "toolchain-absent", "run_version": 2})
