"""Shared test setup: the repository root, the FIXTURE record builders on sys.path,
the GPU markers, and ``tree``: the day-79 FIXTURE repository with the real lessons as
drafts (a test module that needs another miniature tree defines its own ``tree``)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "tests" / "data" / "records"
sys.path.insert(0, str(RECORDS))  # fixture_records: builders for FIXTURE run records




def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


HAS_GPU = _has_gpu()
gpu = pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU with a driver (nvidia-smi); CI has none")
no_gpu = pytest.mark.skipif(HAS_GPU, reason="tests the no-GPU path; this machine has a GPU")


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def tree(tmp_path, repo_root):
    """A miniature repository: the day-79 FIXTURE tree plus the real lessons/, as drafts."""
    root = tmp_path / "repo"
    shutil.copytree(repo_root / "tests" / "data" / "records" / "day79", root)
    copy_lessons_as_draft(repo_root / "lessons", root / "lessons")
    return root


def copy_lessons_as_draft(src: Path, dst: Path) -> None:
    """Copy ``lessons/`` and put every lesson back in its draft form.

    The inverse of publish: status draft, hardware all null, every result ``?``.
    Tests that publish from FIXTURE records start from this, whatever the
    repository's lessons say today.
    """
    from tileproof.records import lessons
    from tileproof.records.models import Hardware

    shutil.copytree(src, dst)
    # A tree that has not adopted signing: no runner key, no policy (FIXTURE records are unsigned).
    (dst / "runners.yaml").write_text("registry_version: 1\nrunners: []\n")
    for lesson in lessons.load_all(dst.parent):
        rows = [r.model_copy(update={"result": "?", "run_id": None}) for r in lesson.front.results]
        front = lesson.front.model_copy(update={"status": "draft", "hardware": Hardware(), "results": rows})
        lesson.path.write_text(lessons.render(lesson, front))
