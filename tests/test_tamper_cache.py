"""The tamper suite, the verified-file index (``catalog.index``): a committer without a key tries to make the
index vouch for what its records do not say, and to have tileproof read or write it outside the tree.

Each attack is built as a committer would build it, on the signed tree of tests/test_tamper.py (records signed by
the registered runner, ``policy: signed-only``, committed to a real git repository): a real index made by a real
command under the committer's own cache home, a row rewritten by hand with the check digest tileproof's own code
computes there, ``git add -f``, a commit, then a fresh ``git clone`` in which the reviewer (another cache home: another
user) runs the real commands. Each test's control is the same tree without the index: the command's output with the
index planted is that one, the index said aside in one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import test_tamper
from test_tamper import RUNNER, cli, commit, fake_h200_softmax, forge, git

from tileproof.__main__ import main
from tileproof.catalog import index as file_index
from tileproof.records import store

signed_template = test_tamper.signed_template
"""The committed signed tree (tests/test_tamper.py), written once for this module."""

signed_tree = test_tamper.signed_tree
"""A copy of it per test."""

LESSON = "02-softmax"
"""The draft lesson the attacker's H200 record would publish (its tree has only a T4 run of it)."""


def as_user(monkeypatch, home: Path) -> None:
    """Commands from here on run as a user whose cache home (and so index key) is ``home``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))


def forged_pass(root: Path) -> Path:
    """An H200 pass of softmax signed by the registered runner, then edited (a better error) and resealed: its
    signature no longer matches (``record-bad-signature``), committed."""
    path = fake_h200_softmax(root, RUNNER)

    def better(r):
        r["report"]["checks"][0]["max_abs_err"] = 1e-12
        return r
    forge(path, better)
    commit(root, "an H200 run of softmax")
    return path


def poison(root: Path, record: Path) -> Path:
    """Rewrite the index's entry of ``record`` (made by the committer's own ``status``) to say its signature was
    verified by the registered runner, with the check digest tileproof computes on the committer's machine; the
    database checkpointed into its one file, as a committer would before ``git add -f``. Returns the database."""
    db = root / file_index.FOLDER / file_index.DATABASE
    sha = store.sha256_file(record)
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        rows = con.execute("SELECT kind, scope, code, value FROM facts WHERE sha256 = ?", (sha,)).fetchall()
        assert rows, "the committer's status learned the forged record"
        for kind, scope, code, value in rows:
            fact = json.loads(value)
            if "trust" not in fact:
                continue
            assert fact["trust"] == "bad-signature"
            fact.update(trust="verified", keyid=RUNNER.keyid, reason="signature verified")
            value = json.dumps(fact, sort_keys=True)
            con.execute("UPDATE facts SET value = ?, check_ = ? WHERE sha256 = ? AND kind = ? AND scope = ?",
                        (value, file_index._check(sha, kind, scope, code, value), sha, kind, scope))
        con.execute("DELETE FROM summaries")
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("PRAGMA journal_mode = DELETE")
    return db


def clone(root: Path, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(root), str(where)], check=True, capture_output=True)
    return where


def dry_run(capsys, root: Path) -> tuple[int, str, str]:
    """``publish --dry-run``: (exit status, stdout, stderr), the index's lines being stderr's."""
    code = main(["publish", LESSON, "--root", str(root), "--dry-run"])
    out = capsys.readouterr()
    return code, out.out, out.err


def status_cmd(capsys, root: Path) -> tuple[int, str, str]:
    code = main(["status", "--root", str(root)])
    out = capsys.readouterr()
    return code, out.out, out.err


def index_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("index:")]


def test_a_committed_poisoned_index_never_vouches_for_a_bad_signature(signed_tree, capsys, tmp_path, monkeypatch):
    """(7) The committer's index says the forged record's signature was verified; committed with ``git add -f``. In a
    fresh clone ``publish`` refuses the record (its signature is bad) exactly as without the index, and says in one
    line that the tracked index is not used."""
    root, _ = signed_tree
    as_user(monkeypatch, tmp_path / "committer-cache")
    record = forged_pass(root)
    assert cli(capsys, "status", "--root", str(root))[0] == 0  # the committer's own index, made by a real command
    db = poison(root, record)
    git(root, "add", "-f", db.relative_to(root).as_posix())
    git(root, "commit", "-q", "-m", "speed up status for everyone")

    as_user(monkeypatch, tmp_path / "reviewer-cache")
    fresh = clone(root, tmp_path / "fresh")
    assert (fresh / file_index.FOLDER / file_index.DATABASE).is_file()
    code, out = cli(capsys, "publish", LESSON, "--root", str(fresh))
    assert code == 1, out
    assert "signature bad-signature" in out, out
    assert "stays draft" in out, out
    lines = index_lines(out)
    assert len(lines) == 1 and "tracked by git" in lines[0], out

    with_index = dry_run(capsys, fresh)
    shutil.rmtree(fresh / file_index.FOLDER)
    assert dry_run(capsys, fresh)[:2] == with_index[:2]  # the index changed nothing but the time taken


def test_an_index_made_with_another_key_is_not_used_even_untracked(signed_tree, capsys, tmp_path, monkeypatch):
    """(7) The same poisoned index, not committed but copied in (an archive of the tree, a shared disk): every row's
    check digest was made with the committer's key, so none is used and the record is judged by its signature."""
    root, _ = signed_tree
    as_user(monkeypatch, tmp_path / "committer-cache")
    record = forged_pass(root)
    assert cli(capsys, "status", "--root", str(root))[0] == 0
    poison(root, record)

    as_user(monkeypatch, tmp_path / "reviewer-cache")
    code, out = cli(capsys, "publish", LESSON, "--root", str(root))
    assert code == 1, out
    assert "signature bad-signature" in out, out
    assert any("did not match their check digest" in ln for ln in index_lines(out)), out


def test_a_committed_link_in_the_index_folders_place_is_never_followed(signed_tree, capsys, tmp_path, monkeypatch):
    """(7) ``.tileproof-cache`` committed as a link to a folder outside the repository: the index is neither read
    there nor written there (the folder stays as it was), one line says why, and the output is the one without it."""
    root, _ = signed_tree
    as_user(monkeypatch, tmp_path / "cache")
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(root / file_index.FOLDER, ignore_errors=True)  # the template's own, made by its commands
    (root / file_index.FOLDER).symlink_to(outside)
    git(root, "add", "-f", file_index.FOLDER)
    git(root, "commit", "-q", "-m", "share the cache")
    fresh = clone(root, tmp_path / "fresh")
    assert (fresh / file_index.FOLDER).is_symlink()

    code, out, err = dry_run(capsys, fresh)
    assert list(outside.iterdir()) == [], "nothing is written through the link"
    lines = index_lines(err)
    assert len(lines) == 1 and "is a link" in lines[0], err
    status = status_cmd(capsys, fresh)
    assert list(outside.iterdir()) == []
    assert len(index_lines(status[2])) == 1

    (fresh / file_index.FOLDER).unlink()
    git(fresh, "rm", "-q", "--cached", file_index.FOLDER)
    assert dry_run(capsys, fresh)[:2] == (code, out)
    assert status_cmd(capsys, fresh)[:2] == status[:2]


def test_a_tracked_index_folder_is_refused_and_left_alone(signed_tree, capsys, tmp_path, monkeypatch):
    """(7) A reviewer's own index, committed (any path under the folder tracked: here its ``.gitignore``): not used,
    not written (git sees no change after the command), one line; output as without it."""
    root, _ = signed_tree
    as_user(monkeypatch, tmp_path / "cache")
    assert cli(capsys, "status", "--root", str(root))[0] == 0
    git(root, "add", "-f", f"{file_index.FOLDER}/.gitignore")
    git(root, "commit", "-q", "-m", "track the cache folder")
    db = root / file_index.FOLDER / file_index.DATABASE
    before = db.stat().st_mtime_ns, db.stat().st_size

    code, out, err = dry_run(capsys, root)
    lines = index_lines(err)
    assert len(lines) == 1 and f"{file_index.FOLDER}/.gitignore: tracked by git" in lines[0], err
    assert (db.stat().st_mtime_ns, db.stat().st_size) == before, "a tracked index is not written"
    status = subprocess.run(["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == "", status.stdout
    monkeypatch.setenv(file_index.ENV, "off")
    assert dry_run(capsys, root)[:2] == (code, out)


BOUND_S = 30
"""A command's whole time with the lock held (the waits are 2 s to read, 10 s to write; 60 s each used to be)."""

SHORT_WAITS_MS = {"READ_WAIT_MS": 200, "WRITE_WAIT_MS": 500}
"""The index's waits while :func:`test_a_held_lock_costs_a_bounded_wait` holds a lock: the same code waits, gives
up and goes on, in a tenth of a second instead of the real seconds (:func:`test_the_waits_are_the_documented_ones`
holds those)."""


def test_the_waits_are_the_documented_ones():
    """The real waits are the ones docs/records-and-staleness.md and docs/threat-model.md state: 2 s to read, 10 s to
    write, then the command goes on without the index."""
    assert (file_index.READ_WAIT_MS, file_index.WRITE_WAIT_MS) == (2_000, 10_000)
    staleness = " ".join((test_tamper.REPO / "docs" / "records-and-staleness.md").read_text().split())
    assert "waited for at most 2 s to read" in staleness and "and 10 s to write what it learned" in staleness
    assert "reads wait 2 s, writes 10 s" in (test_tamper.REPO / "docs" / "threat-model.md").read_text()
    assert BOUND_S > (file_index.READ_WAIT_MS + file_index.WRITE_WAIT_MS) / 1000

HOLD = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
for statement in sys.argv[2:]:
    con.execute(statement).fetchall()
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("hold, said", [
    (["PRAGMA locking_mode = EXCLUSIVE", "BEGIN EXCLUSIVE", "SELECT count(*) FROM files"],
     "locked by another command"),
    (["BEGIN IMMEDIATE", "DELETE FROM summaries WHERE 0"], "not updated"),
], ids=["readers-kept-out", "writers-kept-out"])
def test_a_held_lock_costs_a_bounded_wait(signed_tree, capsys, tmp_path, monkeypatch, hold, said):
    """A real process holds a lock on the index (one that keeps readers out, or the write lock): a command waits a
    bounded time, goes on (without the index, or without saving), says so in one line, and prints what it prints
    without the index. The waits are shortened (:data:`SHORT_WAITS_MS`): what the command does at their end is the
    same."""
    root, _ = signed_tree
    for name, ms in SHORT_WAITS_MS.items():
        monkeypatch.setattr(file_index, name, ms)
    as_user(monkeypatch, tmp_path / "cache")
    forged_pass(root)  # something to learn, so the command writes
    monkeypatch.setenv(file_index.ENV, "off")
    want = dry_run(capsys, root)
    monkeypatch.delenv(file_index.ENV)
    file_index.open_index(root).close()  # made, empty
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(root / file_index.FOLDER / file_index.DATABASE),
                               *hold], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        began = time.monotonic()
        got = dry_run(capsys, root)
        took = time.monotonic() - began
    finally:
        holder.kill()
        holder.wait()
    assert took < BOUND_S, took
    assert got[:2] == want[:2]
    lines = index_lines(got[2])
    assert len(lines) == 1 and said in lines[0], got[2]
    assert os.environ.get(file_index.ENV) is None
