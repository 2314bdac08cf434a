"""``gather.inputs.refused`` answers, for every entry under evidence/, exactly what ``safe_read.check_file``
answers for it, while opening each plain file once instead of checking every component of its path.

Each hostile entry below is one case the quick look must hand to ``check_file``: dropping any of
its checks (the folder being real, the entry's listed type, the open, the inode, the cap) makes
one of these tests fail.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from tileproof.gather import inputs
from tileproof.gather.audit_scan import walk
from tileproof.judge.audit.rules import inputs as input_rules
from tileproof.records import safe_read
from tileproof.records.errors import InputRefused

CAP = 1024


def modes_bind(folder: Path) -> bool:
    """Whether a file's mode bits can keep this process out (not so for root, with CAP_DAC_OVERRIDE)."""
    probe = folder / "mode-probe"
    probe.write_text("")
    probe.chmod(0)
    try:
        os.close(os.open(probe, os.O_RDONLY))
    except PermissionError:
        return True
    finally:
        probe.unlink()
    return False


def one_by_one(root: Path) -> dict[str, tuple[str, str]]:
    """The reference: ``check_file`` on every entry the walk lists, as ``refused`` did before it looked quickly."""
    out: dict[str, tuple[str, str]] = {}
    for rel in walk(str(root), "evidence", out):
        try:
            safe_read.check_file(root, rel, "evidence")
        except InputRefused as e:
            out[rel] = input_rules.refused_issue(e)
    return out


def hostile_tree(root: Path, outside: Path) -> dict[str, str | None]:
    """evidence/ with one entry of each kind; entry → the rule ``check_file`` gives it (None: accepted)."""
    ev = root / "evidence"
    (ev / "run-1" / "deep").mkdir(parents=True)
    (root / "lessons").mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("outside\n")
    (ev / "run-1" / "stdout.txt").write_text("plain\n")
    (ev / "run-1" / "deep" / "nested.txt").write_text("nested\n")
    (ev / "run-1" / "at-cap.txt").write_bytes(b"x" * CAP)
    (ev / "run-1" / "empty.txt").write_bytes(b"")
    (ev / "run-1" / "over-cap.txt").write_bytes(b"x" * (CAP + 1))
    (ev / "run-1" / "link-in.txt").symlink_to(ev / "run-1" / "stdout.txt")
    (ev / "run-1" / "link-out.txt").symlink_to(outside / "secret.txt")
    (ev / "run-1" / "dangling.txt").symlink_to(ev / "run-1" / "gone.txt")
    (ev / "run-1" / "link-to-folder").symlink_to(ev / "run-1" / "deep")
    (ev / "run-1" / "link-to-outside-folder").symlink_to(outside)
    (ev / "run-1" / "denied.txt").write_text("the open of this one fails\n")
    os.mkfifo(ev / "run-1" / "pipe.txt")
    os.mknod(ev / "run-1" / "socket", stat.S_IFSOCK | 0o600)
    expected: dict[str, str | None] = {
        "stdout.txt": None, "deep/nested.txt": None, "at-cap.txt": None, "empty.txt": None,
        "over-cap.txt": "input-too-large", "link-in.txt": "input-symlink", "link-out.txt": "input-symlink",
        "dangling.txt": "input-symlink", "link-to-folder": "input-symlink",
        "link-to-outside-folder": "input-symlink", "denied.txt": "input-unreadable",
        "pipe.txt": "input-special-file", "socket": "input-special-file",
    }
    try:
        os.mknod(ev / "run-1" / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
        expected["null"] = "input-special-file"
    except (PermissionError, AttributeError):
        pass  # no CAP_MKNOD here: the FIFO and the socket stand for special files
    if modes_bind(root):  # the mode bits refuse these only to a user without CAP_DAC_OVERRIDE
        (ev / "run-1" / "mode-000.txt").write_text("no one may read this\n")
        (ev / "run-1" / "mode-000.txt").chmod(0)
        (ev / "no-search").mkdir()
        (ev / "no-search" / "listed-not-opened.txt").write_text("x\n")
        (ev / "no-search").chmod(0o600)  # listable, but nothing in it can be looked up
        expected["mode-000.txt"] = "input-unreadable"
    return {f"evidence/run-1/{name}": rule for name, rule in expected.items()}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    root.mkdir()
    expected = hostile_tree(root, tmp_path / "outside")
    monkeypatch.setitem(safe_read.LIMITS, "evidence", CAP)
    real_open = os.open
    opened: list[str] = []

    def open_refusing_one(path, flags, *args, **kwargs):
        """What an ACL, a security module or a root-squashing server does: the mode allows, the open fails."""
        opened.append(os.fspath(path))
        if os.fspath(path).endswith("/evidence/run-1/denied.txt"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_refusing_one)
    yield root, expected, opened
    for folder in (root / "evidence" / "no-search",):
        if folder.exists():
            folder.chmod(0o700)


def test_refused_is_check_file_entry_by_entry(tree):
    root, expected, opened = tree
    found = inputs.refused(root)
    special = ("pipe.txt", "socket", "null")
    assert not [path for path in opened if path.endswith(special)], "a special file was opened"
    assert found == one_by_one(root)
    assert {rel: rule for rel, (rule, _) in found.items() if rel in expected} == \
        {rel: rule for rel, rule in expected.items() if rule is not None}
    if (root / "evidence" / "no-search").exists():
        assert found["evidence/no-search/listed-not-opened.txt"][0] == "input-unreadable"


def test_only_what_the_quick_look_cannot_vouch_for_is_checked_in_full(tree, monkeypatch):
    root, expected, _opened = tree
    checked: list[str] = []
    real_check = inputs.check_file

    def counted(root_, rel, kind, shown=None):
        checked.append(rel)
        return real_check(root_, rel, kind, shown)

    monkeypatch.setattr(inputs, "check_file", counted)
    inputs.refused(root)
    accepted = {rel for rel, rule in expected.items() if rule is None}
    assert accepted and not accepted & set(checked)
    assert {rel for rel, rule in expected.items() if rule is not None} <= set(checked)


def test_a_linked_evidence_folder_refuses_every_file_below_it(tmp_path):
    """``check_file`` refuses every file under a linked evidence/ (its first component is a link); the walk
    lists them as plain files, so the quick look must not vouch for them."""
    root = tmp_path / "repo"
    (root / "kept" / "run-1").mkdir(parents=True)
    (root / "kept" / "run-1" / "stdout.txt").write_text("plain\n")
    (root / "lessons").mkdir()
    (root / "evidence").symlink_to(root / "kept")
    found = inputs.refused(root)
    assert found == one_by_one(root)
    assert found["evidence/run-1/stdout.txt"][0] == "input-symlink"


def test_listed_file_passes_wants_the_listed_inode_on_the_vouched_device(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("a\n")
    st = os.lstat(path)
    assert safe_read.listed_file_passes(str(path), st.st_dev, st.st_ino, "evidence")
    assert not safe_read.listed_file_passes(str(path), st.st_dev, st.st_ino + 1, "evidence")  # replaced since listed
    assert not safe_read.listed_file_passes(str(path), st.st_dev + 1, st.st_ino, "evidence")
    assert not safe_read.listed_file_passes(str(tmp_path / "gone.txt"), st.st_dev, st.st_ino, "evidence")
    (tmp_path / "link.txt").symlink_to(path)
    assert not safe_read.listed_file_passes(str(tmp_path / "link.txt"), st.st_dev, st.st_ino, "evidence")
