"""``audit --since``'s listing of untracked files (``runner.git_history.untracked``) is git's own, whatever the full
audit kept of evidence/'s folders (``seed_untracked``): a folder is left out of git's walk only while its stat is the
one taken before it was listed, every entry of it tracked by this very git index.

Each test seeds what the full audit's byte pass seeds (``gather.audit_scan.byte_pass`` over the whole of evidence/),
changes the tree the way a cache could miss, and compares with git's walk of the whole tree.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from array import array
from pathlib import Path

import pytest
from conftest import git_commit_all

from tileproof.gather import audit_scan
from tileproof.records import file_index
from tileproof.runner import git_history

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git (the tree is a checkout)")


@pytest.fixture(autouse=True)
def own_index(tmp_path, monkeypatch):
    monkeypatch.setenv(file_index.ENV, str(tmp_path / "index"))
    yield
    file_index.release()


@pytest.fixture
def checkout(tmp_path, monkeypatch) -> Path:
    """A checkout with run folders under evidence/ (one with a folder inside it), a file directly under evidence/,
    runs/ and lessons/, all committed; the folders' stat older than the racy window by the time it is seeded."""
    root = tmp_path / "tree"
    for rel in ("evidence/r1/a.txt", "evidence/r1/b.txt", "evidence/r2/a.txt", "evidence/r3/sub/deep.txt",
                "evidence/r3/top.txt", "evidence/.gitkeep", "runs/r1.json", "lessons/one.md", "README.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"{rel}\n")
    (root / ".gitignore").write_text("*.tmp\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True, capture_output=True)
    git_commit_all(root, "tree")
    monkeypatch.setattr(file_index, "RACY_NS", 50_000_000)  # 50 ms, so a test need not wait 2 s
    time.sleep(0.1)
    return root


def seed(root: Path) -> None:
    """What a full audit's byte pass keeps of evidence/ (its walk of every folder), saved."""
    audit_scan.byte_pass(str(root), [], None)
    file_index.release()


def kept(root: Path) -> list[str]:
    index = file_index.open_index(root)
    try:
        key = git_history._untracked_key(root)
        found = index.summary(git_history.UNTRACKED_FOLDER, git_history.UNTRACKED_KIND, key)
    finally:
        index.close()
    return sorted(name.removeprefix("evidence/") for name in found["names"]) if found else []


def listed(root: Path) -> list[str]:
    return sorted(p.decode(errors="surrogateescape") for p in git_history.untracked(root)().stdout.split(b"\0") if p)


def gits(root: Path) -> list[str]:
    """git's own walk of the whole tree."""
    out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--others", "--exclude-standard"],
                         capture_output=True, check=True).stdout
    return sorted(p.decode(errors="surrogateescape") for p in out.split(b"\0") if p)


def test_the_folders_whose_entries_are_all_tracked_are_kept_and_not_asked(checkout):
    (checkout / "evidence" / "r2" / "ignored.tmp").write_text("ignored\n")  # untracked, ignored: r2 not kept
    time.sleep(0.1)
    seed(checkout)
    assert kept(checkout) == ["r1", "r3", "r3/sub"]
    asked = git_history._asked(checkout)
    assert asked is not None
    assert sorted(asked) == ["evidence/.gitkeep", "evidence/r2"]
    # new files everywhere a kept folder is not: the answer is git's walk of the whole tree
    for rel in ("evidence/r9/new.txt", "evidence/loose.txt", "runs/new.json", "lessons/new/x.md", "top.txt"):
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (checkout / rel).write_text("new\n")
    assert listed(checkout) == gits(checkout)
    assert {"evidence/r9/new.txt", "evidence/loose.txt", "runs/new.json", "lessons/new/x.md", "top.txt"} <= \
        set(listed(checkout))


@pytest.mark.parametrize("rel", ["evidence/r1/new.txt", "evidence/r3/sub/new.txt", "evidence/r3/sub/more/new.txt"])
def test_a_file_added_in_or_below_a_kept_folder_is_found(checkout, rel):
    seed(checkout)
    assert "r1" in kept(checkout) and "r3/sub" in kept(checkout)
    (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
    (checkout / rel).write_text("new\n")
    assert rel in listed(checkout)
    assert listed(checkout) == gits(checkout)


def test_a_file_added_within_the_folders_clock_tick_is_found(checkout, monkeypatch):
    """A folder changed within the racy window of the seeding is not kept: a file added to it in the same clock tick
    leaves its stat as it was (simulated here: its lstat answers what it was), and only git's listing finds it."""
    time.sleep(2)
    (checkout / "evidence" / "r4").mkdir()
    (checkout / "evidence" / "r4" / "a.txt").write_text("a\n")
    git_commit_all(checkout, "r4")

    def changed(rel: str) -> int:
        st = os.lstat(checkout / rel)
        return max(st.st_mtime_ns, st.st_ctime_ns)
    older = max(changed(f"evidence/{r}") for r in ("r1", "r2", "r3", "r3/sub"))
    # the racy window ends halfway between the other folders' last change and r4's, a second from each
    monkeypatch.setattr(file_index, "RACY_NS", time.time_ns() - (older + changed("evidence/r4")) // 2)
    seed(checkout)  # at once: r4 changed within the racy window
    assert "r1" in kept(checkout) and "r4" not in kept(checkout)
    before = os.lstat(checkout / "evidence" / "r4")
    (checkout / "evidence" / "r4" / "new.txt").write_text("new\n")
    real = os.lstat

    def same_tick(path, *args, **kwargs):
        return before if os.fspath(path) == "r4" else real(path, *args, **kwargs)
    monkeypatch.setattr(os, "lstat", same_tick)
    assert "evidence/r4/new.txt" in listed(checkout)


def test_a_changed_gitignore_shows_what_it_no_longer_ignores(checkout):
    (checkout / "evidence" / "r1" / "scratch.tmp").write_text("ignored at first\n")
    time.sleep(0.1)
    seed(checkout)
    assert "evidence/r1/scratch.tmp" not in listed(checkout)
    (checkout / ".gitignore").write_text("# nothing ignored\n")  # r1's stat is unchanged
    assert "evidence/r1/scratch.tmp" in listed(checkout)
    assert listed(checkout) == gits(checkout)


def test_a_file_the_index_no_longer_tracks_is_found(checkout):
    seed(checkout)
    assert "r1" in kept(checkout)
    subprocess.run(["git", "-C", str(checkout), "rm", "-q", "--cached", "evidence/r1/a.txt"], check=True)
    assert "evidence/r1/a.txt" in listed(checkout)  # r1's stat is unchanged; git's index is not
    assert listed(checkout) == gits(checkout)


def test_a_folder_replaced_by_another_with_the_same_names_is_asked(checkout):
    seed(checkout)
    shutil.move(checkout / "evidence" / "r2", checkout / "r2.old")
    (checkout / "evidence" / "r2").mkdir()
    (checkout / "evidence" / "r2" / "a.txt").write_text("evidence/r2/a.txt\n")
    (checkout / "evidence" / "r2" / "b.txt").write_text("new\n")
    assert "evidence/r2/b.txt" in listed(checkout)
    assert listed(checkout) == gits(checkout)


def test_evidence_behind_a_link_or_too_many_changes_is_gits_whole_walk(checkout, monkeypatch):
    seed(checkout)
    assert git_history._asked(checkout) is not None
    monkeypatch.setattr(git_history, "UNTRACKED_ASKED_MAX", 0)
    assert git_history._asked(checkout) is None
    monkeypatch.undo()
    shutil.move(checkout / "evidence", checkout / "elsewhere")
    (checkout / "evidence").symlink_to("elsewhere")
    assert git_history._asked(checkout) is None
    assert listed(checkout) == gits(checkout)


def test_nothing_is_kept_without_an_index_or_outside_a_checkout(checkout, tmp_path, monkeypatch):
    monkeypatch.setenv(file_index.ENV, "off")
    seed(checkout)
    assert git_history._asked(checkout) is None
    plain = tmp_path / "plain"
    shutil.copytree(checkout, plain)
    shutil.rmtree(plain / ".git")
    monkeypatch.setenv(file_index.ENV, str(tmp_path / "index2"))
    seed(plain)
    assert git_history._asked(plain) is None


def test_an_edited_kept_row_is_not_used_and_is_counted(checkout):
    seed(checkout)
    assert "r1" in kept(checkout)
    (checkout / "evidence" / "r1" / "new.txt").write_text("new\n")
    db = sqlite3.connect(Path(os.environ[file_index.ENV]) / file_index.DATABASE)
    with db:  # r1 "unchanged": its stat as it is now, without the check digest made anew
        value = json.loads(db.execute("SELECT value FROM summaries WHERE kind = ?",
                                      (git_history.UNTRACKED_KIND,)).fetchone()[0])
        st = os.lstat(checkout / "evidence" / "r1")
        i = 3 * value["names"].index("evidence/r1")
        stats = array("q", bytes.fromhex(value["stats"]))
        stats[i:i + 3] = array("q", [st.st_ino, st.st_mtime_ns, st.st_ctime_ns])
        value["stats"] = stats.tobytes().hex()
        db.execute("UPDATE summaries SET value = ? WHERE kind = ?", (json.dumps(value), git_history.UNTRACKED_KIND))
    db.close()
    assert "evidence/r1/new.txt" in listed(checkout)
    assert file_index.shared(checkout).ignored == 1


def test_a_folder_is_not_kept_when_one_below_it_holds_an_untracked_file(checkout):
    (checkout / "evidence" / "r3" / "sub" / "untracked.txt").write_text("there at the seeding\n")
    time.sleep(0.1)
    seed(checkout)
    assert "r3" not in kept(checkout) and "r1" in kept(checkout)
    assert "evidence/r3/sub/untracked.txt" in listed(checkout)


def test_a_tracked_file_gone_does_not_vouch_for_an_untracked_one(checkout):
    """As many entries as the index tracks in the folder, but not the same ones: the folder is not kept."""
    (checkout / "evidence" / "r1" / "a.txt").unlink()
    (checkout / "evidence" / "r1" / "c.txt").write_text("untracked, in a.txt's place\n")
    time.sleep(0.1)
    seed(checkout)
    assert "r1" not in kept(checkout) and "r2" in kept(checkout)
    assert "evidence/r1/c.txt" in listed(checkout)


def test_nothing_is_kept_when_the_index_changes_while_git_lists(checkout, monkeypatch):
    real = git_history._git

    def racing(root, *args, **kwargs):
        out = real(root, *args, **kwargs)
        if "--others" in args:  # the seeding's listing, and a change to git's index meanwhile
            subprocess.run(["git", "-C", str(root), "rm", "-q", "--cached", "evidence/r1/a.txt"], check=True)
        return out
    monkeypatch.setattr(git_history, "_git", racing)
    seed(checkout)
    db = sqlite3.connect(Path(os.environ[file_index.ENV]) / file_index.DATABASE)
    rows = db.execute("SELECT count(*) FROM summaries WHERE kind = ?", (git_history.UNTRACKED_KIND,)).fetchone()[0]
    db.close()
    assert rows == 0
