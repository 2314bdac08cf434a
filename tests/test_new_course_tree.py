"""Records tell the truth about the tree: in a new course (``tileproof init``, a lesson from ``new-lesson``), the
programs compiled before their first commit are sources HEAD lacks (git tracks only the registry and the pin), so
the compile record says its tree was dirty, and the audit finds nothing false ("says the tree was clean ... fix:
commit the sources").

The commands run in this process (``run_cli``: the command line's ``main``, from the course's folder): what is under
test is what they record, not the process; the compile's own compilers (nvcc, the cuTile export) run as ever."""

from __future__ import annotations

import re
import signal
import subprocess

import pytest
from conftest import run_cli

from tileproof.authoring import init as course_init
from tileproof.records import store

GIT_ENV = {"GIT_AUTHOR_NAME": "author", "GIT_AUTHOR_EMAIL": "author@example.org", "GIT_COMMITTER_NAME": "author",
           "GIT_COMMITTER_EMAIL": "author@example.org"}


@pytest.fixture
def own_signal_handlers():
    """``compile`` installs its signal handlers (stop, kill its processes) in the process it runs in: here, the
    test's. They are put back afterwards."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    saved = {s: signal.getsignal(s) for s in sigs}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


@pytest.mark.slow(reason="compiles a new lesson's Python and C++ programs for sm_90 (nvcc, ~10 s of CPU): the "
                         "records under test are the compile's")
def test_a_compile_before_the_first_commit_records_a_dirty_tree_and_the_audit_agrees(tmp_path, monkeypatch,
                                                                                       own_signal_handlers):
    pytest.importorskip("cuda.tile", reason="compile needs the tile toolchain (nox -s toolchain)")
    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TILEPROOF_SIGNING_KEY", str(tmp_path / "keys" / "signing-key.pem"))
    root = tmp_path / "course"
    course_init.init(root, None, "author", lambda _line: None)  # commits the registry and the pin alone
    code, out, err = run_cli("new-lesson", "first-lesson", "--python", "first_kernel", "--cpp", "first_host",
                             cwd=root)
    assert code == 0, out + err
    # every other file init and new-lesson wrote is untracked: HEAD has no program, harness or table
    assert not subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                              capture_output=True, text=True, check=True).stdout
    code, out, err = run_cli("compile", "--arch", "sm_90", cwd=root)  # before committing anything
    assert code == 0, out + err
    (record,) = (root / "runs").glob("*-compile-*.json")
    assert store.load_record(record, root).git.dirty is True
    code, out, err = run_cli("audit", cwd=root)
    said = out + err
    assert "record-commit-mismatch" not in said and "says the tree was clean" not in said
    assert code == 0 and re.search(r"audit: 1 records, \d+ evidence files, 1 lessons: 0 findings", said), said
