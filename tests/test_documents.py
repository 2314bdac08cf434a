"""Every checked document lives in the repository: no claims file or lesson points outside it,
every claims document exists in a fresh clone (nothing git ignores), and every summary under
lessons/docs/ is a document some claims file checks or cites."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tileproof.claims import quotes, spec

REPO = Path(__file__).resolve().parents[1]
LESSONS = REPO / "lessons"
DOCS = LESSONS / "docs"

OUTSIDE = re.compile(r"\.\./|(?:^|[\s\"'(=:,\[])(/[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+)")
"""A relative path climbing out (``../``) or an absolute path (``/srv/docs/x``); URLs and
``//`` comments do not match."""


def _lesson_files() -> list[Path]:
    return sorted(p for p in LESSONS.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _ignored(path: Path) -> bool:
    """Whether git would leave this file out of a commit (so a fresh clone would lack it)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: cannot ask git what a clone holds")
    return subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", str(path)], check=False).returncode == 0


def test_the_outside_pattern_matches_what_it_must():
    assert OUTSIDE.search("path: ../elsewhere/docs/001.txt")
    assert OUTSIDE.search("section: Pitfalls (/srv/docs/000.txt)")
    assert not OUTSIDE.search("see https://docs.nvidia.com/cuda/x.html and // a comment, a/b/c.py")


@pytest.mark.parametrize("path", _lesson_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_nothing_in_lessons_points_outside_the_repository(path):
    text = path.read_text(errors="replace")
    # a plausibility note's subject is a value a record holds (a PATH entry such as /tmp/x), quoted, not a pointer
    text = re.sub(r"(?m)^  subject: .*$", "  subject: (a recorded value)", text)
    hits = [(text.count("\n", 0, m.start()) + 1, m.group(0).strip()) for m in OUTSIDE.finditer(text)]
    assert hits == [], f"{path.relative_to(REPO)}: paths outside the repository at lines {hits}"


@pytest.mark.parametrize("loaded", spec.load_all(REPO), ids=lambda f: f.spec.document)
def test_every_claims_document_is_in_the_repository(loaded):
    doc = (REPO / loaded.spec.path).resolve()
    assert doc.is_relative_to(REPO), f"{loaded.spec.document}: path {loaded.spec.path} is outside the repository"
    assert doc.is_file(), f"{loaded.spec.document}: document {loaded.spec.path} does not exist"
    assert not _ignored(doc), f"{loaded.spec.path} is git-ignored: a fresh clone would not have it"
    for snippet in loaded.files():
        assert snippet.resolve().is_relative_to(REPO), snippet
        assert not _ignored(snippet), snippet
    assert quotes.quote_problems(REPO, loaded) == []


def test_every_summary_is_a_checked_or_cited_document():
    claims_text = "\n".join(p.read_text() for p in spec.claims_files(REPO))
    summaries = sorted(DOCS.glob("*.md"))
    assert summaries, "lessons/docs/ holds the in-repository summaries of the source documents"
    for summary in summaries:
        shown = summary.relative_to(REPO).as_posix()
        assert shown in claims_text, f"{shown}: no claims file checks or cites it"
