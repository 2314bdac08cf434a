"""Nothing deleted or rewritten unseen: the git-history check over real temporary
repositories (deleted, edited, renamed, restored, merged from two hosts), a shallow
clone and a folder without git, and this repository itself."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from tileproof.catalog import history as catalog_history
from tileproof.catalog import index as catalog_index
from tileproof.records.history_check import REGENERATED, GitHistory, NoHistory, blob_hasher, check
from tileproof.runner import git_history

REPO = Path(__file__).resolve().parents[1]
REPORTS = REGENERATED

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


IDENTITY = "[user]\n\temail = t@example.invalid\n\tname = t\n[commit]\n\tgpgsign = false\n"
"""The throwaway author of every commit a test makes (no signing), as the repository's own config."""


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    with (root / ".git" / "config").open("a") as config:  # what three `git config` calls append, in one write
        config.write(IDENTITY)
    write(root, "runs/20261201T000000Z-run-00000001.json", '{"a": 1}\n')
    write(root, "evidence/20261201T000000Z-run-00000001/run.stdout.txt", "check ok\n")
    write(root, "evidence/AUDIT.md", "# audit\n")
    write(root, "lessons/runners.yaml", "registry_version: 1\nrunners: []\n")
    commit(root, "records")
    return root


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


def findings(root: Path):
    report = git_history.check_repository(root, REPORTS)
    assert report.status == "checked", report.reason
    return {(f.file, f.rule) for f in report.findings}


def test_clean_history_passes_and_counts_files(repo):
    report = git_history.check_repository(repo, REPORTS)
    assert report.status == "checked"
    assert report.findings == ()
    assert report.files == 2
    assert "lessons/runners.yaml" not in str(report)  # only runs/ and evidence/ are append-only


def test_git_rm_of_a_committed_record_is_a_finding(repo):
    git(repo, "rm", "-q", "runs/20261201T000000Z-run-00000001.json")
    commit(repo, "drop the inconvenient record")
    report = git_history.check_repository(repo, REPORTS)
    (f,) = report.findings
    assert f.rule == "history-missing"
    assert f.file == "runs/20261201T000000Z-run-00000001.json"
    assert "git checkout" in str(f)
    assert "\n" not in str(f)


def test_a_transcript_edited_and_committed_is_a_finding(repo):
    write(repo, "evidence/20261201T000000Z-run-00000001/run.stdout.txt", "check ok (edited)\n")
    commit(repo, "tidy a transcript")
    assert findings(repo) == {("evidence/20261201T000000Z-run-00000001/run.stdout.txt", "history-changed")}


def test_an_uncommitted_edit_or_deletion_is_a_finding(repo):
    write(repo, "runs/20261201T000000Z-run-00000001.json", '{"a": 2}\n')
    (repo / "evidence/20261201T000000Z-run-00000001/run.stdout.txt").unlink()
    assert findings(repo) == {("runs/20261201T000000Z-run-00000001.json", "history-changed"),
                              ("evidence/20261201T000000Z-run-00000001/run.stdout.txt", "history-missing")}


def test_a_renamed_record_is_missing_under_its_name(repo):
    git(repo, "mv", "runs/20261201T000000Z-run-00000001.json", "runs/20261201T000000Z-run-00000002.json")
    commit(repo, "rename")
    assert findings(repo) == {("runs/20261201T000000Z-run-00000001.json", "history-missing")}


def test_deleted_then_restored_is_clean_again(repo):
    path = "runs/20261201T000000Z-run-00000001.json"
    first = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "rm", "-q", path)
    commit(repo, "drop")
    git(repo, "checkout", first, "--", path)
    commit(repo, "restore")
    assert findings(repo) == set()


def test_the_audits_own_reports_may_change(repo):
    write(repo, "evidence/AUDIT.md", "# audit, again\n")
    commit(repo, "re-audit")
    assert findings(repo) == set()
    assert git_history.check_repository(repo).findings == ()  # REGENERATED is the default
    changed = git_history.check_repository(repo, frozenset()).findings
    assert {(f.file, f.rule) for f in changed} == {("evidence/AUDIT.md", "history-changed")}


def test_records_from_two_hosts_merge_without_conflict(repo):
    git(repo, "checkout", "-q", "-b", "host-b")
    write(repo, "runs/20261201T010000Z-run-bbbbbbbb.json", '{"host": "b"}\n')
    commit(repo, "host b")
    git(repo, "checkout", "-q", "main")
    write(repo, "runs/20261201T010000Z-run-aaaaaaaa.json", '{"host": "a"}\n')
    commit(repo, "host a")
    git(repo, "merge", "-q", "--no-edit", "host-b")  # check=True: a conflict would raise
    report = git_history.check_repository(repo, REPORTS)
    assert report.findings == ()
    assert report.files == 4


def test_a_shallow_clone_cannot_check(repo, tmp_path):
    write(repo, "runs/20261201T020000Z-run-00000003.json", "{}\n")
    commit(repo, "second")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    report = git_history.check_repository(shallow, REPORTS)
    assert report.status == "no-history"
    assert "shallow" in report.reason
    assert report.findings == ()


def test_no_git_checkout_cannot_check(tmp_path):
    (tmp_path / "runs").mkdir()
    report = git_history.check_repository(tmp_path, REPORTS)
    assert report.status == "no-history"
    assert "not a git checkout" in report.reason


def test_no_history_is_never_checked():
    report = check(NoHistory("test"))
    assert report.status != "checked"
    assert "could not check" in report.reason


def test_blob_hasher_gives_gits_object_id(tmp_path):
    """``blob_hasher`` (what ``runner.git_history.working_id`` streams a file through) is ``git hash-object``."""
    (tmp_path / "f").write_bytes(b"hello\n")
    out = subprocess.run(["git", "hash-object", str(tmp_path / "f")], capture_output=True, text=True, check=True)
    digest = blob_hasher(len(b"hello\n"))
    digest.update(b"hello\n")
    assert digest.hexdigest() == out.stdout.strip()


def test_pure_check_over_given_inputs():
    from tileproof.records.history_check import FirstVersion

    h = GitHistory(first=(FirstVersion("runs/a.json", "c" * 40, "1" * 40),
                          FirstVersion("runs/b.json", "c" * 40, "2" * 40)),
                   current={"runs/a.json": "1" * 40, "runs/b.json": "3" * 40})
    assert [(f.file, f.rule) for f in check(h).findings] == [("runs/b.json", "history-changed")]


def test_a_file_name_that_looks_like_a_log_token_is_read_as_a_name(repo):
    """The log's tokens are read one after another, never searched for: a name holding what a commit or a
    file token looks like is still one file, and its first version is the one first committed."""
    tricky = "evidence/x/:000000 100644 " + "0" * 40 + " " + "1" * 40 + " A"
    write(repo, tricky, "one\n")
    commit(repo, "tricky name")
    write(repo, tricky, "two\n")
    commit(repo, "edited")
    assert (tricky, "history-changed") in findings(repo)


def test_a_log_this_code_cannot_read_is_no_history():
    """Output that is neither a commit nor a file token (another git's format) is no history, never a partial
    map of first versions (a file left out of it would be a file never checked)."""
    good = b"\x01" + b"c" * 40 + b"\0\n:000000 100644 " + b"0" * 40 + b" " + b"1" * 40 + b" A\0runs/a.json\0"
    assert set(git_history.first_versions(good)) == {"runs/a.json"}
    for bad in (good + b"runs/b.json\0", good.replace(b" A\0", b" A\t"), b"commit " + b"c" * 40 + b"\n"):
        found = git_history.first_versions(bad)
        assert isinstance(found, NoHistory) and "cannot read" in found.reason, bad


def test_this_repository_history_is_intact():
    report = git_history.check_repository(REPO, REPORTS)
    if report.status == "no-history":
        pytest.skip(f"this checkout has no history to check: {report.reason}")
    assert report.findings == (), "\n".join(map(str, report.findings))
    assert report.files > 100


# --- a record's git.commit is a claim, checked against history ---------------------------


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def test_at_commits_reads_blobs_and_knows_commits(repo):
    now = head(repo)
    stdout = "evidence/20261201T000000Z-run-00000001/run.stdout.txt"
    write(repo, stdout, "edited later\n")
    commit(repo, "edit")
    unknown = "0" * 40
    found = git_history.at_commits(repo, [now, unknown], [(now, stdout), (now, "kernels/none.py"), (unknown, stdout)])
    assert found.known == {now: True, unknown: False}
    assert found.sha256[(now, stdout)] == hashlib.sha256(b"check ok\n").hexdigest()  # that commit's bytes
    assert found.sha256[(now, "kernels/none.py")] is None
    assert found.sha256[(unknown, stdout)] is None


def test_at_commits_without_history_cannot_check(tmp_path):
    assert isinstance(git_history.at_commits(tmp_path, ["0" * 40], []), NoHistory)
    assert git_history.at_commits(tmp_path, [], []).known == {}  # nothing claimed: nothing to ask git


def test_commit_claims_are_checked(repo):
    """Unknown commit; clean at a commit whose file differs; dirty (only the commit is claimed); no commit."""
    from signing_keys import real_run

    from tileproof.judge.audit.rules import commits
    from tileproof.records.models import FileDigest, GitState

    write(repo, "kernels/k.py", "print('k')\n")
    commit(repo, "kernel")
    now = head(repo)
    good = FileDigest(path="kernels/k.py", sha256=hashlib.sha256(b"print('k')\n").hexdigest())
    bad = good.model_copy(update={"sha256": "1" * 64})

    def rec(commit_id, dirty, source):
        return real_run(git=GitState(commit=commit_id, dirty=dirty), sources=[source])

    cases = {"clean": rec(now, False, good), "edited": rec(now, False, bad), "dirty": rec(now, True, bad),
             "unknown": rec("f" * 40, False, good), "none": rec(None, True, bad)}
    claims = {name: commits.claim_of(r) for name, r in cases.items()}
    found = git_history.at_commits(repo, *commits.wanted(claims.values()))
    got = {name: [rule for rule, _ in commits.commit_issues(c, found)] for name, c in claims.items()}
    assert got == {"clean": [], "edited": [commits.MISMATCH], "dirty": [], "unknown": [commits.UNKNOWN], "none": []}
    (why,) = [w for _, w in commits.commit_issues(claims["edited"], found)]
    assert why.startswith("kernels/k.py: the record attests sha256 111111111111… and says the tree was clean at")


def test_the_audits_report_names_come_from_the_history_exemptions():
    """One list: the reports the audit writes into evidence/ are exactly the files history exempts."""
    from tileproof.gather import audit

    assert set(audit.COMMITTED_REPORTS) == set(REGENERATED)
    assert {f"evidence/{audit.REPORT_MD}", f"evidence/{audit.REPORT_HTML}"} == set(REGENERATED)


# -- the cached comparison (catalog.history.start): the log and index listing kept by what fixes them ----------


def cached_read(root: Path):
    """The history as the catalog reads it (``catalog.history.start``), its comparison kept in the tree's index."""
    return catalog_history.start(catalog_index.opened(root), Path(root))()


def both_ways(root: Path, monkeypatch) -> tuple:
    """The history check's findings and count read twice (the second read may answer from the kept
    comparison), and once with the index off (every git read done): all three must agree."""
    kept_before = cached_read(root)
    again = cached_read(root)
    monkeypatch.setenv("TILEPROOF_INDEX", "off")
    fresh = cached_read(root)
    monkeypatch.delenv("TILEPROOF_INDEX")
    answers = [check(h, REPORTS) for h in (kept_before, again, fresh)]
    assert len({(a.files, a.findings) for a in answers}) == 1, answers
    assert kept_before.record_commits() == again.record_commits() == fresh.record_commits()
    return again, answers[0]


def test_a_second_read_answers_from_the_kept_comparison(repo, monkeypatch):
    again, report = both_ways(repo, monkeypatch)
    assert again.vouched == report.files == 2  # both files vouched for by git's index
    assert [f.path for f in again.first] == ["evidence/AUDIT.md"]  # the audit's report: left to the check
    head = git(repo, "rev-parse", "HEAD").strip()
    assert dict(again.record_commits()) == {"runs/20261201T000000Z-run-00000001.json": head}


@pytest.mark.parametrize("change", ["commit", "stage", "config", "environment", "replace", "grafts"])
def test_whatever_fixes_the_log_or_the_listing_is_in_the_key(repo, monkeypatch, change):
    """Each input of the log and the listing, changed after a read was kept, makes the next read a full one
    (nothing vouched from the kept comparison), and the check is the same as git's own answer."""
    cached_read(repo)
    assert cached_read(repo).vouched == 2
    target = "runs/20261201T000000Z-run-00000001.json"
    if change == "commit":
        write(repo, target, '{"a": 2}\n')
        commit(repo, "an edit committed")
    elif change == "stage":
        write(repo, target, '{"a": 2}\n')
        git(repo, "add", target)
    elif change == "config":
        git(repo, "config", "core.ignoreCase", "true")
    elif change == "environment":
        monkeypatch.setenv("GIT_LITERAL_PATHSPECS", "1")
    elif change == "replace":
        write(repo, "notes.txt", "x\n")
        commit(repo, "another commit")
        git(repo, "replace", "HEAD", "HEAD~1")
    elif change == "grafts":
        (repo / ".git" / "info").mkdir(exist_ok=True)
        (repo / ".git" / "info" / "grafts").write_text(git(repo, "rev-parse", "HEAD"))
    assert cached_read(repo).vouched == 0  # a full read: not the earlier comparison's answer
    _again, report = both_ways(repo, monkeypatch)
    if change in ("commit", "stage"):
        assert [(f.file, f.rule) for f in report.findings] == [(target, "history-changed")]


def test_a_working_tree_change_is_never_answered_from_the_kept_comparison(repo, monkeypatch):
    """git diff-files runs every time: an edit, a deletion or a link in a committed file's place after the
    comparison was kept is found as a full read finds it."""
    cached_read(repo)
    rel = "evidence/20261201T000000Z-run-00000001/run.stdout.txt"
    write(repo, rel, "check edited\n")
    _again, report = both_ways(repo, monkeypatch)
    assert [(f.file, f.rule) for f in report.findings] == [(rel, "history-changed")]
    (repo / rel).unlink()
    (repo / rel).symlink_to("/etc/passwd")
    _again, report = both_ways(repo, monkeypatch)
    assert [(f.file, f.rule) for f in report.findings] == [(rel, "history-refused")]
    (repo / rel).unlink()
    _again, report = both_ways(repo, monkeypatch)
    assert [(f.file, f.rule) for f in report.findings] == [(rel, "history-missing")]


def test_a_file_the_index_does_not_hold_is_hashed_each_time(repo, monkeypatch):
    """A committed file taken out of git's index (``git rm --cached``) is compared from the working tree on
    every read, the kept comparison or not."""
    rel = "evidence/20261201T000000Z-run-00000001/run.stdout.txt"
    git(repo, "rm", "-q", "--cached", rel)
    again, report = both_ways(repo, monkeypatch)
    assert again.vouched == 1 and report.findings == ()
    write(repo, rel, "check edited\n")
    _again, report = both_ways(repo, monkeypatch)
    assert [(f.file, f.rule) for f in report.findings] == [(rel, "history-changed")]


def test_a_hand_edited_comparison_is_ignored(repo, monkeypatch):
    """The kept comparison is a row of the verified-file index: one edited without its check digest is
    ignored, and the history read in full."""
    import sqlite3

    from tileproof.catalog import index as file_index

    cached_read(repo)
    db = sqlite3.connect(repo / file_index.FOLDER / file_index.DATABASE)
    with db:
        changed = db.execute("UPDATE summaries SET value = ? WHERE kind = ?",
                             ('{"odd": [], "records": [], "vouched": 99}', catalog_history.CACHE_KIND)).rowcount
    db.close()
    assert changed == 1
    again, report = both_ways(repo, monkeypatch)
    assert report.files == 2


def test_a_comparison_of_another_shape_is_read_in_full(repo, monkeypatch):
    """A kept comparison whose row checks but which this code cannot read (another shape) reads the history in full,
    the stat check having listed nothing (so no read was begun early)."""
    import sqlite3

    from tileproof.catalog import index as file_index

    cached_read(repo)
    db = sqlite3.connect(repo / file_index.FOLDER / file_index.DATABASE)
    with db:
        (folder, kind, scope, code), = db.execute("SELECT folder, kind, scope, code FROM summaries WHERE kind = ?",
                                                  (catalog_history.CACHE_KIND,)).fetchall()
        value = '{"shape": "another"}'
        db.execute("UPDATE summaries SET value = ?, check_ = ? WHERE kind = ?",
                   (value, file_index._check(folder, kind, scope, code, value), kind))
    db.close()
    assert cached_read(repo).vouched == 0  # read in full, not answered from the row
    _again, report = both_ways(repo, monkeypatch)
    assert report.files == 2 and report.findings == ()


def test_a_tree_in_a_subfolder_of_a_repository_finds_an_uncommitted_edit(repo, monkeypatch):
    """The stat check names paths from the tree's root, as the log and the index listing do: a tree kept in a
    subfolder of a larger repository found no edited file (git named it from the repository's top)."""
    outer = repo.parent / "outer"
    outer.mkdir()
    git(outer, "init", "-q", "-b", "main")
    with (outer / ".git" / "config").open("a") as config:
        config.write(IDENTITY)
    shutil.copytree(repo, outer / "course", ignore=shutil.ignore_patterns(".git"))
    commit(outer, "the course, in a subfolder")
    rel = "evidence/20261201T000000Z-run-00000001/run.stdout.txt"
    write(outer / "course", rel, "check edited\n")
    _again, report = both_ways(outer / "course", monkeypatch)
    assert [(f.file, f.rule) for f in report.findings] == [(rel, "history-changed")]
