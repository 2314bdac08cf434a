"""The tileiras range a cuda-tile release declares, read from its metadata, and the run command's release axis:
a release installed with ``pip install --target`` on PYTHONPATH (the offline path of a GPU node), refused outside
its range unless asked, recorded as such, and the exception a program raises recorded typed.

``tests/data/cuda_tile/requires-<version>.txt``: the ``Requires-Dist`` lines of the cuda-tile 1.3.0-1.7.0 cp312
wheels from PyPI, as ``importlib.metadata.requires`` gives them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import no_gpu, run_cli, sources_tree

from tileproof.records.models import RUN_VERSION, RunRecord, SessionRecord
from tileproof.records.store import load_records
from tileproof.toolchain import cuda_tile

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "cuda_tile"


def requires(version: str) -> list[str]:
    return (DATA / f"requires-{version}.txt").read_text().splitlines()


@pytest.mark.parametrize(("version", "want"), [
    ("1.3.0", "nvidia-cuda-tileiras<13.3,>=13.2"),
    ("1.4.0", "cuda-toolkit[nvcc,nvvm,tileiras]<13.4,>=13.2"),
    ("1.5.0", "cuda-toolkit[nvcc,nvvm,tileiras]<13.4,>=13.2"),
    ("1.6.0", "cuda-toolkit[nvcc,nvvm,tileiras]<13.5,>=13.2"),
    ("1.7.0", "cuda-toolkit[nvcc,nvvm,tileiras]<13.5,>=13.2"),
])
def test_each_releases_tileiras_requirement_is_read_from_its_metadata(version, want):
    req = cuda_tile.tileiras_requirement(requires(version))
    assert req is not None
    assert cuda_tile.describe(req) == want


@pytest.mark.parametrize(("version", "tileiras", "fits"), [
    ("1.3.0", "13.2.86", True), ("1.3.0", "13.3.36", False), ("1.3.0", "13.4.92", False),
    ("1.4.0", "13.2.86", True), ("1.4.0", "13.3.36", True), ("1.4.0", "13.4.92", False),
    ("1.5.0", "13.4.92", False), ("1.6.0", "13.4.92", True), ("1.7.0", "13.4.92", True),
    ("1.7.0", "13.5.37", False), ("1.7.0", "not a version", None),
])
def test_in_range(version, tileiras, fits):
    assert cuda_tile.in_range(cuda_tile.tileiras_requirement(requires(version)), tileiras) is fits


def test_only_a_requirement_that_brings_tileiras_with_the_extra_counts():
    assert cuda_tile.tileiras_requirement(["typing-extensions", "not a requirement ;;",
                                           'nvidia-nvvm<13.3; extra == "tileiras"',
                                           'nvidia-cuda-tileiras<13.3; extra == "other"',
                                           'cuda-toolkit[nvcc]<13.4; extra == "tileiras"']) is None
    always = cuda_tile.tileiras_requirement(["nvidia-cuda-tileiras>=13.2"])  # required with or without the extra
    assert always is not None
    assert cuda_tile.describe(always) == "nvidia-cuda-tileiras>=13.2"


def test_release_outside_its_range_is_refused_in_one_line_unless_asked():
    found = ("1.5.0", requires("1.5.0"))
    with pytest.raises(cuda_tile.OutsideRange) as e:
        cuda_tile.release("13.4.92", False, found)
    assert str(e.value) == ("cuda-tile 1.5.0: it declares cuda-toolkit[nvcc,nvvm,tileiras]<13.4,>=13.2; tileiras here "
                            "is 13.4.92 (fix: install a tileiras of its range, e.g. pip install "
                            "'cuda-tile[tileiras]==1.5.0', or pass --tileiras-outside-range to run it anyway, "
                            "recorded as outside its range)")
    asked = cuda_tile.release("13.4.92", True, found)
    assert asked is not None
    assert (asked.in_range, asked.outside_range_allowed, asked.outside) == (False, True, True)
    fits = cuda_tile.release("13.3.36", False, found)
    assert fits is not None
    assert fits.in_range
    assert not fits.outside
    with pytest.raises(cuda_tile.OutsideRange, match="no tileiras was found"):
        cuda_tile.release(None, False, found)
    with pytest.raises(cuda_tile.OutsideRange, match="declares no tileiras range"):
        cuda_tile.release("13.4.92", False, ("9.0.0", ["typing-extensions"]))


# --- the offline path: a release unpacked with pip install --target, on PYTHONPATH ----------------------------


def fake_release(folder: Path, version: str, requirement: str, raises: str | None = None) -> Path:
    """What ``pip install --target folder cuda-tile==version`` leaves: its dist-info and a ``cuda.tile`` package
    (this one raises ``raises`` when imported, as a release that refuses the programs would)."""
    dist = folder / f"cuda_tile-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: cuda-tile\nVersion: {version}\n"
                                   f"Requires-Dist: typing-extensions\nRequires-Dist: {requirement}; "
                                   f'extra == "tileiras"\n')
    (folder / "cuda" / "tile").mkdir(parents=True)
    (folder / "cuda" / "tile" / "__init__.py").write_text(f"raise ImportError({raises!r})\n" if raises else "")
    return folder


def tileproof(monkeypatch, root: Path, target: Path, *args: str) -> subprocess.CompletedProcess:
    """``tileproof ARGS --root ROOT`` run from ``root`` as the command line runs it (conftest.run_cli), with the
    release at ``target`` first on this process's path (what ``PYTHONPATH`` gives a new one: the release
    ``importlib.metadata`` finds) and on the ``PYTHONPATH`` of every process it starts (the programs, pip
    freeze); the one test that the release on ``PYTHONPATH`` is the one a new process reads is below."""
    monkeypatch.syspath_prepend(str(target))
    code, out, err = run_cli(*args, "--root", str(root), cwd=root,
                             env={"PYTHONPATH": os.pathsep.join([str(target), str(REPO)])})
    return subprocess.CompletedProcess(["tileproof", *args], code, out, err)


def test_the_release_on_pythonpath_is_the_one_read(tmp_path):
    target = fake_release(tmp_path / "ct", "9.9.0", "nvidia-cuda-tileiras<13.3,>=13.2")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(REPO)]))
    code = "from tileproof.toolchain import cuda_tile; print(cuda_tile.installed())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == str(("9.9.0", ["typing-extensions", 'nvidia-cuda-tileiras<13.3,>=13.2; extra == '
                                                                       '"tileiras"']))


@pytest.fixture
def tree(tmp_path):
    """kernels/ and lessons/ in a temporary repository (conftest.sources_tree)."""
    return sources_tree(tmp_path)


def tileiras_here() -> str:
    from tileproof.runner.capture import runtime_toolchain

    found = next((t.version for t in runtime_toolchain(None).tools if t.name == "tileiras"), None)
    if found is None:
        pytest.skip("no tileiras here (the toolchain extra installs one)")
    return found


@no_gpu
@pytest.mark.slow(reason="real tileproof processes on a fake cuda-tile release installed beside the real one")
def test_a_release_outside_its_range_is_refused_then_recorded_as_asked(tree, tmp_path, monkeypatch):
    tileiras = tileiras_here()
    below = f"nvidia-cuda-tileiras<{tileiras.split('.')[0]}.0"  # a range the tileiras here is outside of
    target = fake_release(tmp_path / "ct", "9.9.0", below, raises="cuda-tile 9.9.0 refuses these kernels")
    refused = tileproof(monkeypatch, tree, target, "run", "--record-no-gpu", "--program", "vector_add")
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.startswith("tileproof run: cuda-tile 9.9.0: it declares")
    assert ("--tileiras-outside" \
           "-range" in refused.stderr)
    assert len(refused.stderr.splitlines()) == 1
    assert not (tree / "runs").exists()
    assert not (tree / "evidence").exists()

    done = tileproof(monkeypatch, tree, target, "run", "--record-no-gpu", "--tileiras-outside-range", "--python-only")
    assert done.returncode == 1, done.stderr
    records = load_records(tree)
    runs = [r for r in records if isinstance(r, RunRecord)]
    assert sorted(r.program for r in runs) == sorted(f"kernels/{p.name}" for p in (tree / "kernels").glob("*.py")
                                                     if "AOT_SIGNATURES" in p.read_text())
    for rec in runs:  # each names the release it ran with, outside its range as asked, and what it raised
        assert rec.run_version == RUN_VERSION
        assert rec.cuda_tile is not None
        assert (rec.cuda_tile.version, rec.cuda_tile.tileiras, rec.cuda_tile.in_range) == ("9.9.0", tileiras, False)
        assert rec.cuda_tile.requires == below
        assert rec.cuda_tile.outside_range_allowed
        assert rec.failure is not None
        assert ((rec.failure.type, rec.failure.message) == \
            ("ImportError", "cuda-tile 9.9.0 refuses these kernels"))
        assert rec.verdict == "error"
        assert rec.step.exit_code == 1
        assert rec.report is None
        assert rec.reason == "exit code 1; raised ImportError: cuda-tile 9.9.0 refuses these kernels before " \
                             "writing a check report"
        assert rec.environment.versions["cuda-tile"] == "9.9.0"
    assert [r for r in records if isinstance(r, SessionRecord)][0].verdict_counts == {"error": len(runs)}


@no_gpu
def test_a_release_inside_its_range_runs_without_asking(tree, tmp_path, monkeypatch):
    tileiras = tileiras_here()
    target = fake_release(tmp_path / "ct", "9.9.1", f"nvidia-cuda-tileiras=={tileiras}")
    done = tileproof(monkeypatch, tree, target, "run", "--record-no-gpu", "--program", "vector_add")
    assert done.returncode == 1, done.stderr
    (rec,) = [r for r in load_records(tree) if isinstance(r, RunRecord)]
    assert rec.cuda_tile is not None
    assert rec.cuda_tile.in_range
    assert not rec.cuda_tile.outside_range_allowed
    # the fake cuda.tile imports, so the real vector_add fails at its first cuTile call: recorded, typed
    assert rec.failure is not None
    assert rec.failure.type == "AttributeError"
    assert "kernel" in rec.failure.message


def test_compile_refuses_a_release_outside_its_range_before_importing_a_program(tree, tmp_path, monkeypatch):
    tileiras_here()
    (tree / "cpp").rmdir()
    target = fake_release(tmp_path / "ct", "9.9.0", "nvidia-cuda-tileiras<1.0", raises="imported: too late")
    done = tileproof(monkeypatch, tree, target, "compile", "--python-only", "--arch", "sm_90")
    assert done.returncode == 2
    assert done.stderr.startswith("tileproof compile: cuda-tile 9.9.0: it declares")
    assert "imported" not in done.stderr
    assert not (tree / "runs").exists()


def test_a_record_runs_outside_the_range_only_when_it_says_it_was_asked():
    from pydantic import ValidationError

    from tileproof.records.models import CudaTileRelease

    for in_range in (False, None):
        with pytest.raises(ValidationError, match="--tileiras-outside-range"):
            CudaTileRelease(version="1.5.0", requires=None, tileiras="13.4.92", in_range=in_range)
        assert CudaTileRelease(version="1.5.0", requires=None, tileiras="13.4.92", in_range=in_range,
                               outside_range_allowed=True).outside
