"""Shared test setup: the repository root, and the FIXTURE record builders on sys.path."""

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "tests" / "data" / "records"
sys.path.insert(0, str(RECORDS))  # fixture_records: builders for FIXTURE run records


@pytest.fixture
def repo_root() -> Path:
    return REPO


def copy_lessons_as_draft(src: Path, dst: Path) -> None:
    """Copy ``lessons/`` and put every lesson back in its draft form.

    The inverse of publish: status draft, hardware all null, every result ``?``.
    Tests that publish from FIXTURE records start from this, whatever the
    repository's lessons say today.
    """
    from tileproof import lessons
    from tileproof.models import Hardware

    shutil.copytree(src, dst)
    for lesson in lessons.load_all(dst.parent):
        rows = [r.model_copy(update={"result": "?", "run_id": None}) for r in lesson.front.results]
        front = lesson.front.model_copy(update={"status": "draft", "hardware": Hardware(), "results": rows})
        lesson.path.write_text(lessons.render(lesson, front))
