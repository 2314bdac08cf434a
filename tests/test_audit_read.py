"""gather.audit_read's verified entries: a warm audit takes each unchanged plain run record from its entry, without
reading the record file, and gives exactly what an audit without the index gives; a transcript its checks read that
is no longer found as it was, an edited entry, or a changed record is read in full. (That every entry the suite's
audits make gives back what the full read kept: the autouse ``verified_entries_read_alike`` in conftest.py.)

A real temp tree from tests/data/audit/audit_tree.py's ``synthetic_tree``, its files aged past the racy window (as
time does) so the first audit may index them.
"""

from __future__ import annotations

import contextlib
import io
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from audit_tree import synthetic_tree  # tests/data/audit, on sys.path (conftest)
from conftest import AgedCopies

from tileproof.__main__ import main
from tileproof.catalog import index as file_index
from tileproof.gather import audit_read
from tileproof.records import walk as audit_scan

REPO = Path(__file__).resolve().parents[1]




@pytest.fixture(scope="module")
def trees(request) -> AgedCopies:
    """The 60-record tree, built once; a copy per test, every file aged past the racy window together."""
    return AgedCopies(request, "tree", "t", lambda root: synthetic_tree(root, 60),
                      lambda root: [Path(folder) / name for folder, _dirs, names in os.walk(root) for name in names])


@pytest.fixture
def tree(trees) -> Path:
    return trees.take()


def audit(root: Path, index: str | None = None) -> tuple[int, str, str]:
    """``tileproof audit`` as a command runs it (the index opened afresh and closed after): exit code, stdout and
    the report it wrote; ``index``: ``TILEPROOF_INDEX`` (default: the tree's own)."""
    out = io.StringIO()
    report = root.parent / "AUDIT.md"
    before = os.environ.get(file_index.ENV)
    try:
        if index is not None:
            os.environ[file_index.ENV] = index
        with contextlib.redirect_stdout(out):
            code = main(["audit", "--root", str(root), "--md", str(report)])
    finally:
        if index is not None:
            os.environ.pop(file_index.ENV) if before is None else os.environ.__setitem__(file_index.ENV, before)
    # The report says when it was written: the one line two audits of the same tree may differ in.
    text = "".join(line for line in report.read_text().splitlines(True) if not line.startswith("- audited at: "))
    return code, out.getvalue(), text


def entries(root: Path) -> int:
    with sqlite3.connect(root / file_index.FOLDER / file_index.DATABASE) as con:
        return con.execute("SELECT count(*) FROM facts WHERE kind = ?", (audit_read.KIND,)).fetchone()[0]


def runs_read(monkeypatch) -> tuple[list[str], list[str]]:
    """The record files the audit's main process reads from here on: all of them, and those read again in full once
    every record was (``audit_read.again``: the report's newest of each place, the records the verdicts choose)."""
    opened: list[str] = []
    again: list[str] = []
    read, read_again = audit_read.read_record, audit_read.again
    monkeypatch.setattr(audit_read, "read_record", lambda root, name: opened.append(name) or read(root, name))
    monkeypatch.setattr(audit_read, "again", lambda root, kept, runners: again.append(kept.name)
                        or read_again(root, kept, runners))
    return opened, again


def test_a_warm_audit_reads_no_unchanged_record_and_says_the_same(tree, monkeypatch):
    clean = audit(tree, "off")
    runs = sorted(p.name for p in (tree / "runs").glob("*-run-*.json"))
    opened, again = runs_read(monkeypatch)
    assert audit(tree) == clean  # cold: every record read in full, and its entry made
    assert entries(tree) == len(runs)
    assert set(runs) <= set(opened)
    opened.clear(), again.clear()
    assert audit(tree) == clean
    assert {name for name in opened if name in runs} == {name for name in again if name in runs}
    assert len(set(again)) < len(runs) // 2


def test_a_changed_record_is_read_in_full(tree, monkeypatch):
    audit(tree)
    path = sorted((tree / "runs").glob("*-run-*.json"))[7]
    path.write_text(path.read_text().replace('"verdict": "passed"', '"verdict": "failed"', 1))  # its seal breaks
    old = time.time() - 5
    os.utime(path, (old, old))  # an mtime as old as before: the size, ctime or inode still differ
    opened, _again = runs_read(monkeypatch)
    code, out, report = audit(tree)
    assert path.name in opened
    assert (code, out, report) == audit(tree, "off")
    assert "record-seal" in report


def test_an_entry_is_not_used_once_a_transcript_its_checks_read_changed(tree, monkeypatch):
    """A session's pip freeze edited after the audit: its records' entries were made with it trusted, so each is read
    in full and judged against what is on disk now, exactly as without the index."""
    audit(tree)
    freeze = sorted((tree / "evidence").glob("*session*/pip-freeze.txt"))[0]
    freeze.write_text(freeze.read_text() + "numpy==0.0.1\n")
    session = freeze.parent.name
    named = [p.name for p in (tree / "runs").glob("*-run-*.json") if session in p.read_text()]
    assert named
    opened, _again = runs_read(monkeypatch)
    got = audit(tree)
    assert got == audit(tree, "off")
    assert set(named) <= set(opened)


def test_an_edited_entry_is_ignored_with_one_line(tree, capsys):
    clean = audit(tree, "off")
    audit(tree)
    with sqlite3.connect(tree / file_index.FOLDER / file_index.DATABASE) as con:
        con.execute("UPDATE facts SET value = replace(value, '\"passed\"', '\"failed\"') WHERE kind = ?",
                    (audit_read.KIND,))
    capsys.readouterr()
    assert audit(tree) == clean
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("index:")]
    assert len(notes) == 1 and "did not match their check digest" in notes[0]
    assert audit(tree) == clean  # replaced: taken from the entries again, with nothing to say
    assert not [line for line in capsys.readouterr().err.splitlines() if line.startswith("index:")]


def test_no_entry_is_used_below_a_linked_runs_folder(tree, monkeypatch, tmp_path):
    audit(tree)
    runs = sorted(p.name for p in (tree / "runs").glob("*.json"))
    moved = tmp_path / "elsewhere"
    (tree / "runs").rename(moved)
    (tree / "runs").symlink_to(moved)
    assert not audit_scan.real_folders(str(tree), "runs")
    opened, _again = runs_read(monkeypatch)
    code, _out, report = audit(tree)
    assert code != 0 and "input-symlink 60" in report  # each record's read is refused: a link on its path
    assert sorted(opened) == runs


def test_a_check_may_read_no_transcript_but_its_records_pip_freeze_and_query(tmp_path):
    transcripts = audit_read.Transcripts(tmp_path)
    transcripts.trust([("evidence/s/pip-freeze.txt", "0" * 64)])

    class Other:
        path = "evidence/s/other.txt"

    with pytest.raises(AssertionError, match="not one of its record's"):
        transcripts.freeze(Other())
    with pytest.raises(AssertionError, match="not one of its record's"):
        transcripts.query_rows(Other())


@pytest.mark.slow(reason="three fresh interpreters: which module is imported first is the point")
def test_the_reports_list_rules_alike_whichever_module_is_imported_first():
    listed = set()
    for first in ("tileproof.report.render", "tileproof.commands.audit", "tileproof.gather.audit"):
        code = (f"import {first}\nfrom tileproof.judge.audit import rules\n"
                "print(list(rules.load()))")
        listed.add(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                  cwd=REPO).stdout)
    assert len(listed) == 1
