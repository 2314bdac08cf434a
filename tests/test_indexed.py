"""catalog.records.read_facts through the index's summary of runs/ (catalog.index ``summaries``): a warm read
takes every record's facts from one row, and gives exactly what a read without the index gives.

A real temp tree from tests/data/audit/audit_tree.py's ``synthetic_tree``; its files are aged past the racy window
(as time does) so a first read may index them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import multiprocessing
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
from tileproof.catalog import Catalog
from tileproof.catalog import index as file_index
from tileproof.catalog import records as indexed
from tileproof.records import store
from tileproof.records.trust import runner_keys


@pytest.fixture(scope="module")
def trees(request) -> AgedCopies:
    """The 60-record tree, built once; a copy per test, its records aged past the racy window together."""
    return AgedCopies(request, "tree", "t", lambda root: synthetic_tree(root, 60),
                      lambda root: list((root / "runs").iterdir()))


@pytest.fixture
def tree(trees) -> Path:
    return trees.take()


def read(root: Path) -> list:
    """``read_facts`` as a command reads it: the index opened afresh, and closed after."""
    with Catalog.open(root, runner_keys.load_registry(root)) as cat:
        return cat.facts()


def unindexed(root: Path, monkeypatch) -> list:
    with monkeypatch.context() as m:
        m.setenv(file_index.ENV, "off")
        return read(root)


def database(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / file_index.FOLDER / file_index.DATABASE)


def nothing_else_read(monkeypatch) -> None:
    """From here on, a read that opens a record file, or looks up a ``files`` or ``facts`` row, fails the test."""
    def refuse(*_a, **_k):
        raise AssertionError("read past the summary")
    monkeypatch.setattr(indexed, "read_bytes", refuse)
    monkeypatch.setattr(file_index.Index, "_load_rows", refuse)
    monkeypatch.setattr(file_index.Index, "_load_facts", refuse)


def test_a_warm_read_takes_every_record_from_the_summary_alone(tree, monkeypatch):
    clean = unindexed(tree, monkeypatch)
    assert read(tree) == clean  # cold: every record read, and summarised
    with database(tree) as con:
        assert con.execute("SELECT count(*) FROM summaries").fetchone()[0] == 1
    with monkeypatch.context() as m:
        nothing_else_read(m)
        assert read(tree) == clean


def test_a_record_whose_stat_changed_is_read_afresh(tree, monkeypatch):
    read(tree)
    path = sorted((tree / "runs").glob("*-run-*.json"))[5]
    assert '"verdict": "passed"' in path.read_text()
    path.write_text(path.read_text().replace('"verdict": "passed"', '"verdict": "failed"', 1))  # its seal breaks
    old = time.time() - 5
    os.utime(path, (old, old))  # an mtime as old as before: the size, ctime or inode still differ
    got = read(tree)
    assert got == unindexed(tree, monkeypatch)
    assert dict(got)[path.name].seal == "broken"


def test_a_record_written_within_the_racy_window_is_not_summarised(tree, monkeypatch):
    read(tree)
    path = sorted((tree / "runs").glob("*-run-*.json"))[3]
    path.write_bytes(path.read_bytes())  # the same bytes, just now
    assert read(tree) == unindexed(tree, monkeypatch)
    with monkeypatch.context() as m:  # still not summarised: read in full again, the others not
        opened = []
        real = indexed.read_bytes
        m.setattr(indexed, "read_bytes", lambda root, rel, *a: opened.append(rel) or real(root, rel, *a))
        read(tree)
    assert opened == [f"runs/{path.name}"]


@pytest.mark.parametrize("edit", ["value", "check_", "scope", "code"])
def test_an_edited_summary_is_not_used(tree, monkeypatch, capsys, edit):
    """A hand edit (its check digest left as it was, or made by other code or under another registry): the records
    are looked up in ``files`` and ``facts`` instead, with one line for a failed check, and the summary replaced."""
    clean = unindexed(tree, monkeypatch)
    read(tree)
    with database(tree) as con:
        if edit == "value":  # another verdict for every record: the JSON still parses
            con.execute("UPDATE summaries SET value = replace(value, '\"passed\"', '\"failed\"')")
        else:
            con.execute(f"UPDATE summaries SET {edit} = 'x' || {edit}")
    index = file_index.opened(tree)
    assert read(tree) == clean
    assert index.ignored == (1 if edit in ("value", "check_") else 0)
    with monkeypatch.context() as m:  # replaced: the next read takes it all from the summary again
        nothing_else_read(m)
        assert read(tree) == clean


def test_an_edited_summary_is_said_in_one_line(tree):
    def status() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["status", "--root", str(tree)])
        return code, out.getvalue(), err.getvalue()

    code, clean, _ = status()
    with database(tree) as con:
        con.execute("UPDATE summaries SET value = replace(value, '\"passed\"', '\"failed\"')")
    again, text, err = status()
    assert (again, text) == (code, clean)
    lines = [ln for ln in err.splitlines() if ln.startswith("index:")]
    assert len(lines) == 1 and "1 entries did not match their check digest" in lines[0], err


def test_a_summary_entry_this_code_cannot_read_is_looked_up_in_files_and_facts(tree, monkeypatch):
    """A summary entry this code cannot decode (its check digest right: a bug, not an edit) costs a lookup, never an
    answer; the summary is then made anew."""
    def damage(value: dict) -> None:
        value["created"][2] = "not a date"
    read_past(tree, monkeypatch, damage)


@pytest.mark.parametrize("damage", ["group", "column"])
def test_a_summary_this_code_cannot_read_changes_nothing(tree, monkeypatch, damage):
    read_past(tree, monkeypatch, lambda value: value["groups"].append(None) if damage == "group"
              else value["ino"].pop())


def read_past(tree: Path, monkeypatch, damage) -> None:
    """The summary rewritten with ``damage`` done to its value (its check digest right): the next read answers as
    without the index, and makes a summary the read after it takes every record from."""
    clean = unindexed(tree, monkeypatch)
    read(tree)
    scope = indexed.registry_scope(runner_keys.load_registry(tree))
    index = file_index.opened(tree)
    value = index.summary(indexed.FOLDER, indexed.KIND, scope)
    damage(value)
    index.summarise(indexed.FOLDER, indexed.KIND, value, scope)
    index.save()
    assert read(tree) == clean
    with monkeypatch.context() as m:
        nothing_else_read(m)
        assert read(tree) == clean


def test_a_summary_lists_what_is_there_now(tree, monkeypatch):
    """Records added and removed since the summary was made: it is used for the others, and made anew."""
    read(tree)
    names = store.record_names(tree)
    (tree / "runs" / names[10]).unlink()
    moved = tree / "runs" / names[11]
    moved.rename(tree / "runs" / f"{moved.name[:-5]}x.json")  # a new name: not the entry of the old one
    got = read(tree)
    assert got == unindexed(tree, monkeypatch)
    assert names[10] not in dict(got) and names[11] not in dict(got)
    opened = []
    real = indexed.read_bytes
    monkeypatch.setattr(indexed, "read_bytes", lambda root, rel, *a: opened.append(rel) or real(root, rel, *a))
    assert read(tree) == got
    assert opened == [f"runs/{moved.name[:-5]}x.json"]  # renamed just now (its ctime): racy, the others summarised


def test_runs_behind_a_link_is_not_taken_from_the_summary(tree, tmp_path, monkeypatch):
    read(tree)
    (tree / "runs").rename(tmp_path / "elsewhere")
    (tree / "runs").symlink_to(tmp_path / "elsewhere")

    def outcome(reader):
        try:
            return reader()
        except Exception as e:  # noqa: BLE001 - what the reader says, compared below
            return repr(e)
    opened = []
    real = indexed.read_bytes
    monkeypatch.setattr(indexed, "read_bytes", lambda root, rel, *a: opened.append(rel) or real(root, rel, *a))
    assert outcome(lambda: read(tree)) == outcome(lambda: unindexed(tree, monkeypatch))
    assert opened[:1] == [f"runs/{store.record_names(tree)[0]}"]  # the first record is read, not summarised


def shown(found: list) -> str:
    """What ``read_facts`` gave, as text (a datetime's repr names its tzinfo's class, which its value does not)."""
    return json.dumps([[name, e.record.to_row(), e.seal, dataclasses.astuple(e.verification), repr(e.policy)]
                       for name, e in found])


@pytest.mark.slow(reason="two processes making the summary at once: the process boundary is the point")
def test_concurrent_reads_leave_one_whole_summary(tree, monkeypatch):
    """Two commands making the summary at once (each writes it whole, in one transaction): both answer as without the
    index, and the summary left is one every later read takes every record from."""
    clean = unindexed(tree, monkeypatch)
    argv = [sys.executable, "-c", "import sys; from pathlib import Path; import test_indexed as t; "
            "print(t.shown(t.read(Path(sys.argv[1]))))", str(tree)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parent / "data"
                                                                                     / "audit"), *sys.path])}
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert results[0][0] == results[1][0] == shown(clean) + "\n"
    index = file_index.opened(tree)
    with monkeypatch.context() as m:
        nothing_else_read(m)
        assert read(tree) == clean
    assert index.ignored == 0


def test_a_full_audit_makes_the_summary_it_lacks(tree, monkeypatch):
    """An audit over an index without a summary of runs/ (deleted, or made by other code) leaves one, so the next
    status or ``audit --since`` takes every record from it (before, the first of them loaded every row)."""
    from tileproof.gather import audit

    clean = unindexed(tree, monkeypatch)
    assert not audit.audit(tree).findings
    with database(tree) as con:
        assert con.execute("SELECT count(*) FROM summaries").fetchone()[0] == 1
    with monkeypatch.context() as m:
        nothing_else_read(m)
        assert read(tree) == clean


def test_an_audit_of_a_tree_with_a_broken_record_makes_no_summary(tree):
    """A record that does not validate is the audit's finding; the summary, which read_facts would refuse to make
    over it, is left unmade, and the audit is as without it."""
    from tileproof.gather import audit

    (tree / "runs" / sorted(store.record_names(tree))[0]).write_text("{}")
    result = audit.audit(tree)
    assert any(f.file.startswith("runs/") for f in result.findings)
    with database(tree) as con:
        assert con.execute("SELECT count(*) FROM summaries").fetchone()[0] == 0


needs_fork = pytest.mark.skipif((os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods(),
                                reason="needs fork and 2+ CPUs (the second process of a cold read)")


@needs_fork
def test_a_cold_read_in_two_processes_gives_what_one_gives(tree, monkeypatch):
    """Past PARALLEL_MIN records to look up, the later half is read by the forked helper, with its own index: the
    facts, and the index both processes leave (a warm read from the summary alone), are those of one process."""
    clean = unindexed(tree, monkeypatch)
    monkeypatch.setattr(indexed, "PARALLEL_MIN", 4)
    assert read(tree) == clean
    with database(tree) as con:  # each half's rows saved: both processes wrote
        assert con.execute("SELECT count(*) FROM files WHERE path LIKE 'runs/%'").fetchone()[0] == len(clean)
    with monkeypatch.context() as m:
        nothing_else_read(m)
        assert read(tree) == clean


@needs_fork
@pytest.mark.parametrize("broken", [["late"], ["early", "late"]])
def test_a_cold_read_in_two_processes_raises_the_first_broken_record(tree, monkeypatch, broken):
    """A record that does not validate raises its one line as a read in order would: the first half's first, else
    the second half's (read by the helper), whichever process found it."""
    names = sorted(p.name for p in (tree / "runs").glob("*.json"))
    at = {"early": names[2], "late": names[-3]}
    for which in broken:
        path = tree / "runs" / at[which]
        path.write_text(path.read_text().replace('"kind"', '"kinds"', 1))
    monkeypatch.setattr(indexed, "PARALLEL_MIN", 4)
    with pytest.raises(store.RecordError) as err:
        read(tree)
    assert at[broken[0]] in str(err.value)


def test_records_the_rows_give_are_not_read_in_a_second_process(tree, monkeypatch):
    """A summary made anew where every record's rows are there (after a cold audit, whose process holds every
    record) forks nothing: only records read in full are worth a second process."""
    clean = read(tree)
    with database(tree) as con:
        con.execute("DELETE FROM summaries")
    monkeypatch.setattr(indexed, "PARALLEL_MIN", 4)
    wanted = []
    real = indexed.Background

    def helper(want: bool):
        wanted.append(want)
        return real(want)
    monkeypatch.setattr(indexed, "Background", helper)
    assert read(tree) == clean and wanted == [False]
