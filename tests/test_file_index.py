"""The verified-file index (catalog.index) changes no output, and ``audit --since`` checks what a merge added.

Real temp trees from tests/data/audit/audit_tree.py's ``synthetic_tree``; every command runs as the CLI
runs it (``tileproof.__main__.main``), with the index warm, cold and deleted.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import audit_tree  # tests/data/audit, on sys.path (conftest)
import pytest
from conftest import AgedCopies, git_commit_all

from tileproof.__main__ import main
from tileproof.catalog import history as catalog_history
from tileproof.catalog import index as file_index
from tileproof.fleet.merge import Source, merge
from tileproof.runner import query

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git (the tree is a checkout)")


def run(*argv: str) -> tuple[int, str, str]:
    """``tileproof ARGV`` as the CLI runs it: exit status, stdout, stderr. Every command run here is also held to
    asking git each question once: no git command line runs twice with the same input within it (what git says of
    the checkout, its format, HEAD and where its index is, is asked once, not by each reader)."""
    out, err = io.StringIO(), io.StringIO()
    asked: list[tuple[tuple[str, ...], bytes | None]] = []
    real = subprocess.run

    def counted(args, *rest, **kwargs):
        if args and os.path.basename(str(args[0])) == "git" and \
                not any(f.filename.endswith("conftest.py") for f in traceback.extract_stack()):
            asked.append((tuple(map(str, args)), kwargs.get("input")))  # the suite's own verdict check left out
        return real(args, *rest, **kwargs)
    with pytest.MonkeyPatch.context() as m, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        m.setattr(query.subprocess, "run", counted)
        code = main(list(argv))
    twice = [" ".join(line[3:]) for (line, _input), n in Counter(asked).items() if n > 1]
    assert twice == [], (argv, twice)
    return code, out.getvalue(), err.getvalue()


def head(root: Path) -> str:
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def synthetic_checkout(root: Path) -> None:
    """The synthetic course committed, then 120 records naming that commit, committed; git's objects in one pack
    (what a clone holds: each test's copy of the tree copies one file for them, not one per object)."""
    audit_tree.synthetic_tree(root, 0)  # the course first: the records name the commit that holds it
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True, capture_output=True)
    git_commit_all(root, "course")
    audit_tree.synthetic_tree(root, 120, commit=head(root))
    git_commit_all(root, "records")
    subprocess.run(["git", "-C", str(root), "repack", "-a", "-d", "-q"], check=True, capture_output=True)


def settled_files(root: Path) -> list[Path]:
    """What ages past the index's racy window, as time does (so a first command may cache them): every file under
    runs/ and evidence/."""
    return [path for folder in ("runs", "evidence") for path in (root / folder).rglob("*") if path.is_file()]


@pytest.fixture(scope="module")
def checkouts(request) -> AgedCopies:
    """The committed 120-record tree, built once; a copy (its .git too) per test, settled together."""
    return AgedCopies(request, "checkout", "tree", synthetic_checkout, settled_files)


@pytest.fixture
def checkout(checkouts) -> Path:
    return checkouts.take()


def outputs(root: Path, *extra: str) -> dict[str, tuple[int, str]]:
    """Audit (with its JSON summary) and status, as printed; index notes (stderr) left aside."""
    out = {}
    for name, argv in (("audit", ["audit", "--root", str(root), "--json", str(root.parent / "a.json"), *extra]),
                       ("status", ["status", "--root", str(root)])):
        code, text, _err = run(*argv)
        out[name] = (code, text)
    out["json"] = (0, (root.parent / "a.json").read_text())
    return out


@pytest.mark.slow(reason="eight commands over a 120-record tree: cold, warm, deleted and without the index")
def test_warm_cold_and_deleted_index_give_identical_output(checkout):
    cold = outputs(checkout)
    assert cold["audit"][0] == 0, cold["audit"][1]
    db = checkout / file_index.FOLDER / file_index.DATABASE
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM files").fetchone()[0] > 100  # the cold run learned
    assert outputs(checkout) == cold  # warm
    shutil.rmtree(checkout / file_index.FOLDER)
    assert outputs(checkout) == cold  # deleted
    os.environ[file_index.ENV] = "off"
    try:
        assert outputs(checkout) == cold  # no index at all
    finally:
        del os.environ[file_index.ENV]
    status = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == ""  # the index is never shown as a change to commit


def _tamper(root: Path) -> tuple[str, str]:
    record = sorted((root / "runs").glob("*-run-*.json"))[7]
    text = record.read_text()
    assert '"duration_s": 2.0' in text
    record.write_text(text.replace('"duration_s": 2.0', '"duration_s": 2.5', 1))
    transcript = [t for t in sorted((root / "evidence").glob("*-run-*/run.stdout.txt")) if b"ok" in t.read_bytes()][3]
    transcript.write_bytes(transcript.read_bytes().replace(b"ok", b"OK", 1))
    return f"runs/{record.name}", transcript.relative_to(root).as_posix()


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_changed_record_byte_and_transcript_byte_are_caught(checkout, warm):
    if warm:
        assert run("audit", "--root", str(checkout))[0] == 0
    record, transcript = _tamper(checkout)
    code, text, _ = run("audit", "--root", str(checkout))
    assert code == 1
    assert any(record in ln and "record-seal" in ln for ln in text.splitlines()), text
    assert any(transcript in ln and "evidence-digest" in ln for ln in text.splitlines()), text
    assert any(transcript in ln and "history-changed" in ln for ln in text.splitlines()), text


def test_a_record_rewritten_with_its_size_and_mtime_kept_is_read_again(checkout):
    """A warm audit takes a record's digest from the index only for the stat its row was made from: the same size
    and mtime (set back by hand) with a new ctime is another file, read, hashed and caught, by both processes."""
    assert run("audit", "--root", str(checkout))[0] == 0
    record = sorted((checkout / "runs").glob("*-run-*.json"))[7]
    before = os.lstat(record)
    text = record.read_text()
    record.write_text(text.replace('"duration_s": 2.0', '"duration_s": 2.5', 1))
    os.utime(record, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.lstat(record)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    code, out, _ = run("audit", "--root", str(checkout))
    assert code == 1
    assert any(f"runs/{record.name}" in ln and "record-seal" in ln for ln in out.splitlines()), out


@pytest.mark.parametrize("table", ["files", "facts"])
def test_an_edited_entry_is_ignored_with_one_line(checkout, table):
    clean = outputs(checkout)
    db = checkout / file_index.FOLDER / file_index.DATABASE
    with sqlite3.connect(db) as con:  # a hand edit: another digest, its check digest left as it was
        column = "sha256" if table == "files" else "value"
        value = "'0000'" if table == "files" else "'{\"seal\": \"intact\"}'"
        key = "path" if table == "files" else "code, scope, kind, sha256"  # the table's key: one row edited
        con.execute(f"UPDATE {table} SET {column} = {value} WHERE ({key}) = (SELECT {key} FROM {table} LIMIT 1)")
    code, text, err = run("audit", "--root", str(checkout), "--json", str(checkout.parent / "a.json"))
    assert (code, text) == clean["audit"]
    lines = [ln for ln in err.splitlines() if ln.startswith("index:")]
    assert len(lines) == 1, err
    assert "1 entries did not match their check digest" in lines[0], err


LAYOUT_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files (path TEXT PRIMARY KEY, dev INTEGER, ino INTEGER, size INTEGER,
    mtime_ns INTEGER, ctime_ns INTEGER, sha256 TEXT, blob TEXT, check_ TEXT);
CREATE TABLE facts (sha256 TEXT, kind TEXT, scope TEXT, code TEXT, value TEXT, check_ TEXT,
    PRIMARY KEY (sha256, kind, scope, code));
CREATE INDEX facts_of_code ON facts (code, scope);
CREATE TABLE summaries (folder TEXT, kind TEXT, scope TEXT, code TEXT, value TEXT, check_ TEXT,
    PRIMARY KEY (folder, kind));
INSERT INTO meta VALUES ('schema', '1');
INSERT INTO files VALUES ('runs/x.json', 1, 2, 3, 4, 5, 'ab', 'cd', 'ef');
"""
"""The index as the previous layout made it (tileproof before layout 2), with one row of its own."""


def test_an_index_of_the_older_layout_is_made_anew(checkout):
    clean = outputs(checkout)
    db = checkout / file_index.FOLDER / file_index.DATABASE
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with sqlite3.connect(db) as con:
        con.executescript(LAYOUT_1)
    code, text, err = run("audit", "--root", str(checkout), "--json", str(checkout.parent / "a.json"))
    assert (code, text, [ln for ln in err.splitlines() if ln.startswith("index:")]) == (*clean["audit"], [])
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchall() == [(str(file_index.SCHEMA),)]
        assert con.execute("SELECT count(*) FROM files WHERE path = 'runs/x.json'").fetchall() == [(0,)]
        assert con.execute("SELECT count(*) FROM facts").fetchall()[0][0] > 100
        assert con.execute("SELECT name FROM sqlite_master WHERE name = 'facts_of_code'").fetchall() == []
    assert outputs(checkout) == clean


def test_an_index_of_a_newer_layout_is_left_alone_with_one_line(checkout):
    """A newer tileproof's index is not this one's to remake: not used, and said."""
    clean = outputs(checkout)
    db = checkout / file_index.FOLDER / file_index.DATABASE
    with sqlite3.connect(db) as con:
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(file_index.SCHEMA + 1),))
        rows = con.execute("SELECT count(*) FROM facts").fetchall()
    code, text, err = run("audit", "--root", str(checkout), "--json", str(checkout.parent / "a.json"))
    assert (code, text) == clean["audit"]
    assert f"has layout {file_index.SCHEMA + 1}; this tileproof writes {file_index.SCHEMA}" in err, err
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM facts").fetchall() == rows


def test_a_row_whose_digest_is_not_lowercase_hex_is_not_used(checkout):
    """An entry held packed (its digests as bytes) is exactly the row: one whose digest does not pack back to the
    same text (upper case, here with its check digest made to match) is not used; its file is read afresh."""
    clean = outputs(checkout)
    db = checkout / file_index.FOLDER / file_index.DATABASE
    with sqlite3.connect(db) as con:
        rel, *k, sha, blob, _check = con.execute("SELECT * FROM files WHERE path LIKE 'evidence/%' LIMIT 1").fetchone()
        upper = sha.upper()
        con.execute("UPDATE files SET sha256 = ?, check_ = ? WHERE path = ?",
                    (upper, file_index._check(rel, *k, upper, blob), rel))
    index = file_index.open_index(checkout)
    index.load_files()
    assert rel not in index.files and len(index.files) > 100 and index.ignored == 0
    index.close()
    code, text, err = run("audit", "--root", str(checkout), "--json", str(checkout.parent / "a.json"))
    assert (code, text) == clean["audit"]
    assert "index:" not in err


def test_a_fact_is_parsed_when_asked_for_each_time_afresh(tmp_path):
    """Facts are held as their checked JSON text: each ask parses it anew (a caller's edit of one answer is not
    the next one's), and a text that is not a JSON object, its check digest matching, is ignored and counted."""
    index = file_index.open_index(tmp_path)
    index.remember("a" * 64, "raw-record", {"seal": "s", "report": None})
    index.save()
    code = file_index.code_key()
    bad = "[not json"
    with index.db:
        row = ("b" * 64, "raw-record", "", code, bad)
        index.db.execute("INSERT INTO facts VALUES (?,?,?,?,?,?)", (*row, file_index._check(*row)))
    index.close()
    again = file_index.open_index(tmp_path)
    got = again.fact("a" * 64, "raw-record")
    assert got == {"seal": "s", "report": None}
    got["seal"] = "edited"
    assert again.fact("a" * 64, "raw-record") == {"seal": "s", "report": None}
    assert again.ignored == 0
    assert again.fact("b" * 64, "raw-record") is None and again.ignored == 1
    again.close()


def test_a_corrupted_database_is_not_used_and_changes_nothing(checkout):
    clean = outputs(checkout)
    db = checkout / file_index.FOLDER / file_index.DATABASE
    for extra in ("-wal", "-shm"):
        Path(f"{db}{extra}").unlink(missing_ok=True)
    db.write_bytes(b"not a database" * 100)
    code, text, err = run("audit", "--root", str(checkout), "--json", str(checkout.parent / "a.json"))
    assert (code, text) == clean["audit"]
    assert "index:" in err
    assert "not used" in err


@pytest.mark.slow(reason="two real audit processes writing one index at once: the process boundary is the point")
def test_concurrent_audits_leave_a_consistent_index(checkout):
    argv = [sys.executable, "-m", "tileproof", "audit", "--root", str(checkout)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert all("index:" not in err for _out, err in results), results
    index = file_index.open_index(checkout)
    index.load_files()
    assert index.problem is None
    assert index.ignored == 0
    assert len(index.files) > 100
    with sqlite3.connect(index.where) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    index.close()


def _session(tmp_path: Path, root: Path) -> list[str]:
    """One more host's 8-record session (a compile record, 6 runs, the session record), merged into ``root``."""
    host = tmp_path / "host"
    audit_tree.synthetic_tree(host, 8, commit=audit_tree.COMMIT)
    done = merge(root, [Source(base=host)])
    return sorted(p for p in done.writes if p.startswith("runs/"))


def test_audit_since_finds_a_planted_problem_in_what_the_merge_added(checkout, tmp_path):
    rev = head(checkout)
    added = _session(tmp_path, checkout)
    assert len(added) == 8
    code, text, _ = run("audit", "--root", str(checkout), "--since", rev)
    assert code == 0, text
    assert "audit scope: since" in text
    assert ": 8 records" in text
    # a planted problem in what the merge added: one transcript byte of a new run
    transcript = next(t for p in added if "-run-" in p
                      if b"ok" in (t := checkout / "evidence" / Path(p).stem / "run.stdout.txt").read_bytes())
    transcript.write_bytes(transcript.read_bytes().replace(b"ok", b"OK", 1))
    code, text, _ = run("audit", "--root", str(checkout), "--since", rev)
    assert code == 1
    assert any("evidence-digest" in ln and transcript.name in ln for ln in text.splitlines()), text
    # the same finding as the full audit gives (nothing it should check is ignored)
    full_code, full_text, _ = run("audit", "--root", str(checkout))
    assert full_code == 1
    assert [ln for ln in full_text.splitlines() if "evidence-digest" in ln] == \
        [ln for ln in text.splitlines() if "evidence-digest" in ln]


def test_audit_since_still_checks_history_and_lessons(checkout, tmp_path):
    rev = head(checkout)
    _session(tmp_path, checkout)
    committed = subprocess.run(["git", "-C", str(checkout), "ls-files", "evidence"], capture_output=True, text=True,
                               check=True).stdout.split()  # before REV (the merged session shares its run times)
    old = next(t for t in (checkout / p for p in sorted(committed) if p.endswith("/run.stdout.txt"))
               if b"ok" in t.read_bytes())
    old.write_bytes(old.read_bytes().replace(b"ok", b"OK", 1))
    code, text, _ = run("audit", "--root", str(checkout), "--since", rev)
    assert code == 1
    rel = old.relative_to(checkout).as_posix()
    # changed since REV, so in scope: its record's digest check and the history check both catch it
    assert any(rel in ln and "history-changed" in ln for ln in text.splitlines()), text
    assert any(rel in ln and "evidence-digest" in ln for ln in text.splitlines()), text


@pytest.mark.parametrize("plant", ["orphan", "link"])
def test_audit_since_audits_the_whole_tree_when_a_file_directly_under_evidence_changed(checkout, tmp_path, plant):
    """Any record may reference a file in no run's folder: --since cannot tell an orphan (or a link in its place)
    from its scope, so it audits everything and finds what the full audit finds."""
    rev = head(checkout)
    _session(tmp_path, checkout)
    loose = checkout / "evidence" / "loose.txt"
    if plant == "orphan":
        loose.write_text("nobody references this\n")
    else:
        (tmp_path / "outside.txt").write_text("outside the repository\n")
        loose.symlink_to(tmp_path / "outside.txt")
    code, text, _ = run("audit", "--root", str(checkout), "--since", rev)
    assert code == 1, text
    assert "evidence/loose.txt changed, directly under evidence/" in text and "the whole tree audited" in text
    full_code, full_text, _ = run("audit", "--root", str(checkout))
    assert full_code == 1
    found = [ln for ln in full_text.splitlines() if "evidence/loose.txt" in ln]
    assert found and found == [ln for ln in text.splitlines() if "evidence/loose.txt" in ln and "scope" not in ln]


def test_the_index_made_by_audit_since_is_no_change_since_rev(checkout, monkeypatch):
    """A tree's first command makes the index folder while git lists the untracked files for ``--since``: the folder
    must not be listed half made (its ``.gitignore`` not written yet) as a change since REV, which would re-judge every
    lesson of a pull request that changed nothing. Here git's listing waits for the folder to appear, and its
    ``.gitignore`` takes a while to be written, as on a busy machine."""
    folder = checkout / file_index.FOLDER
    real_folder, real_git = file_index.ignored_folder, catalog_history.git

    def slowly(made: Path) -> Path:
        made.mkdir(parents=True, exist_ok=True)
        (made / ".gitignore").touch()  # made, its line not written yet
        time.sleep(0.3)
        (made / ".gitignore").unlink()
        return real_folder(made)

    def git(root: Path, *args: str, **kwargs):
        deadline = time.monotonic() + 2
        while "--others" in args and not folder.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return real_git(root, *args, **kwargs)
    monkeypatch.setattr(file_index, "ignored_folder", slowly)
    monkeypatch.setattr(catalog_history, "git", git)
    assert not folder.exists()
    code, text, _ = run("audit", "--root", str(checkout), "--since", head(checkout))
    assert (folder / ".gitignore").is_file()  # this audit made the index
    assert code == 1 and "since-judged-nothing" in text, text
    assert "0 records and their evidence, 0 lessons judged (0 paths changed)" in text, text


def test_audit_since_a_commit_that_is_not_there_is_one_line(checkout):
    code, _text, err = run("audit", "--root", str(checkout), "--since", "no-such-rev")
    assert code == 2
    assert "--since no-such-rev: neither a full commit id nor file:PATH" in err


def test_a_moved_evidence_folder_behind_a_link_is_refused_warm_as_cold(checkout, tmp_path):
    """The files keep their inode and ctime when their folder is moved: the index must not vouch for them
    through a link (safe_read refuses a link in evidence/; so must a warm audit)."""
    assert run("audit", "--root", str(checkout))[0] == 0  # warm: every transcript indexed
    folder = checkout / "evidence"
    moved = tmp_path / "elsewhere"
    folder.rename(moved)
    folder.symlink_to(moved, target_is_directory=True)
    warm = run("audit", "--root", str(checkout))
    shutil.rmtree(checkout / file_index.FOLDER)
    cold = run("audit", "--root", str(checkout))
    assert warm[:2] == cold[:2]
    assert warm[0] == 1
    assert "input-" in warm[1]


def test_the_key_is_this_users_own_and_outside_the_tree(tmp_path, monkeypatch):
    """Every row's check is keyed with 32 random bytes made once under the cache home, mode 0600. A key others may
    read, or one that lies inside the tree (where a committer could write it), is refused: the index is not used,
    one line. Rows made with another key (another user's, a committed index's) are ignored, each counted."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "mine"))
    index = file_index.open_index(tmp_path / "tree")
    assert index.problem is None, index.problem
    index.remember("a" * 64, "raw-record", {"seal": "s"})
    index.save()
    index.close()
    kept = tmp_path / "mine" / file_index.KEY_FILE
    assert kept.stat().st_mode & 0o777 == 0o600 and len(kept.read_bytes()) == file_index.KEY_BYTES
    assert file_index.open_index(tmp_path / "tree").fact("a" * 64, "raw-record") == {"seal": "s"}

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "another user"))
    other = file_index.open_index(tmp_path / "tree")
    assert other.fact("a" * 64, "raw-record") is None and other.ignored == 1
    other.close()

    kept.chmod(0o644)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "mine"))
    file_index._key_at.cache_clear()
    refused = file_index.open_index(tmp_path / "tree")
    assert refused.db is None and "mode 0600" in refused.notes()[0], refused.notes()
    kept.chmod(0o600)

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "tree" / "cache"))
    inside = file_index.open_index(tmp_path / "tree")
    assert inside.db is None and "inside the tree" in inside.notes()[0], inside.notes()
    file_index._key_at.cache_clear()
