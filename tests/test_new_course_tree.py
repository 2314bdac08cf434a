"""Records tell the truth about the tree: in a new course (``tileproof init``, a lesson from ``new-lesson``), the
programs compiled before their first commit are sources HEAD lacks (git tracks only the registry and the pin), so
the compile record says its tree was dirty, and the audit finds nothing false ("says the tree was clean ... fix:
commit the sources")."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tileproof.authoring import init as course_init
from tileproof.records import store

GIT_ENV = {"GIT_AUTHOR_NAME": "author", "GIT_AUTHOR_EMAIL": "author@example.org", "GIT_COMMITTER_NAME": "author",
           "GIT_COMMITTER_EMAIL": "author@example.org"}


def tileproof(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tileproof", *args], cwd=root, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow(reason="compiles a new lesson's Python and C++ programs for sm_90 (nvcc, ~10 s of CPU): the "
                         "records under test are the compile's")
def test_a_compile_before_the_first_commit_records_a_dirty_tree_and_the_audit_agrees(tmp_path, monkeypatch):
    pytest.importorskip("cuda.tile", reason="compile needs the tile toolchain (nox -s toolchain)")
    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TILEPROOF_SIGNING_KEY", str(tmp_path / "keys" / "signing-key.pem"))
    root = tmp_path / "course"
    course_init.init(root, None, "author", lambda _line: None)  # commits the registry and the pin alone
    made = tileproof(root, "new-lesson", "first-lesson", "--python", "first_kernel", "--cpp", "first_host")
    assert made.returncode == 0, made.stderr
    # every other file init and new-lesson wrote is untracked: HEAD has no program, harness or table
    assert not subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                              capture_output=True, text=True, check=True).stdout
    built = tileproof(root, "compile", "--arch", "sm_90")  # before committing anything
    assert built.returncode == 0, built.stdout + built.stderr
    (record,) = (root / "runs").glob("*-compile-*.json")
    assert store.load_record(record, root).git.dirty is True
    audited = tileproof(root, "audit")
    said = audited.stdout + audited.stderr
    assert "record-commit-mismatch" not in said and "says the tree was clean" not in said
    assert audited.returncode == 0 and re.search(r"audit: 1 records, \d+ evidence files, 1 lessons: 0 findings",
                                                 said), said
