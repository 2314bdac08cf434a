"""File names that are not valid UTF-8, under runs/, evidence/ and lessons/, through the real commands.

A name's bytes come back from ``os.scandir`` and from git's ``-z`` output. Before this, git_history
decoded git's paths as strict UTF-8, so a committed ``evidence/bad\\xff.txt`` ended ``status`` and ``audit``
in a ``UnicodeDecodeError`` traceback; an uncommitted one ended ``audit --since`` the same way, and the
audit itself once the verified-file index tried to store the name (``UnicodeEncodeError``). Now such a
name is one ``input-not-utf8`` finding (a tree problem for ``status``), written with its bad byte
escaped (``\\xff``) in every line and report; in runs/ it is a stray entry, never a record.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import audit_tree  # tests/data/audit, on sys.path (conftest)
import pytest
from conftest import AgedCopies, git_commit_all

from tileproof.__main__ import main
from tileproof.records.errors import encodable, one_line, utf8_problem
from tileproof.records.findings import Finding
from tileproof.runner import git_history

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git (the tree is a checkout)")

BAD = os.fsdecode(b"bad\xff.txt")
"""A name whose one byte 0xff is not UTF-8, as ``os.scandir`` lists it (``surrogateescape``)."""
SHOWN = "bad\\xff.txt"
FINDING = "input-not-utf8: its name is not valid UTF-8 (byte 0xff) (fix: give it a UTF-8 name)"


def run(*argv: str) -> tuple[int, str]:
    """The command as the CLI runs it: (exit status, stdout and stderr), which must hold no lone surrogate (a
    strict UTF-8 terminal could not print it) and no traceback."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(list(argv))
    text = out.getvalue()
    assert "Traceback" not in text, text
    text.encode("utf-8")  # raises on a surrogate
    return code, text


def head(root: Path, rev: str = "HEAD") -> str:
    return subprocess.run(["git", "-C", str(root), "rev-parse", rev], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("names") / "tree"
    audit_tree.synthetic_tree(root, 0)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True, capture_output=True)
    git_commit_all(root, "course")
    audit_tree.synthetic_tree(root, 12, commit=head(root))
    git_commit_all(root, "records")
    return root


@pytest.fixture
def checkout(template, tmp_path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(template, root, symlinks=True)
    return root


def run_folder(root: Path) -> str:
    return next(p.name for p in sorted((root / "evidence").iterdir()) if "-run-" in p.name)


def odd_files(root: Path) -> list[str]:
    """A non-UTF-8 file at the top of evidence/ and one in a run's folder (paths relative to ``root``)."""
    return [f"evidence/{BAD}", f"evidence/{run_folder(root)}/{BAD}"]


def with_odd_files(template: Path, root: Path) -> None:
    shutil.copytree(template, root, symlinks=True)
    for rel in odd_files(root):
        (root / rel).write_text("x\n")


@pytest.fixture(scope="module")
def planted_copies(request, template) -> AgedCopies:
    """The tree with ``odd_files`` written and aged past the index's racy window (so the index would keep them),
    a copy per test, all aged in one wait."""
    return AgedCopies(request, "planted", "tree", lambda root: with_odd_files(template, root),
                      lambda root: [root / rel for rel in odd_files(root)])


@pytest.fixture
def planted(planted_copies) -> Path:
    return planted_copies.take()


def plant(root: Path, commit: bool) -> list[str]:
    """The ``planted`` tree's odd files, committed when ``commit``. Returns how findings name them."""
    if commit:
        git_commit_all(root, "odd names")
    return [f"evidence/{SHOWN}", f"evidence/{run_folder(root)}/{SHOWN}"]


def about(text: str, shown: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"{shown}: ")]


@pytest.mark.parametrize("commit", [True, False], ids=["committed", "untracked"])
def test_a_non_utf8_evidence_name_is_one_finding_for_audit_and_a_tree_problem_for_status(planted, commit):
    checkout = planted
    shown = plant(checkout, commit)
    for _ in ("cold", "warm"):  # the second run reads through the index the first one filled
        code, text = run("audit", "--root", str(checkout), "--md", str(checkout.parent / "a.md"),
                         "--json", str(checkout.parent / "a.json"))
        assert code == 1, text
        for name in shown:
            assert about(text, name) == [f"{name}: {FINDING}"], text  # no history finding: it is unchanged
        assert "history: checked" in text
    md = (checkout.parent / "a.md").read_text()
    assert f"| `{shown[0]}` | input-not-utf8 |" in md
    files = {f["file"]: f["rule"] for f in json.loads((checkout.parent / "a.json").read_text())["findings"]}
    assert files == {name: "input-not-utf8" for name in shown}
    code, text = run("status", "--root", str(checkout))
    assert code == 0, text
    lessons = [line for line in text.splitlines() if line.startswith("0") and ": draft, " in line]
    said = f"; not ready: inputs the audit refuses: {min(shown)}: input-not-utf8 (+1 more) ("
    assert len(lessons) == 4 and all(said in line for line in lessons), text


@pytest.mark.parametrize("commit", [True, False], ids=["committed", "untracked"])
def test_audit_since_reports_a_non_utf8_name_in_a_run_folder(planted, commit):
    checkout = planted
    before = head(checkout)  # the odd files are not committed yet
    shown = plant(checkout, commit)
    code, text = run("audit", "--root", str(checkout), "--since", before)
    assert code == 1, text
    assert about(text, shown[1]) == [f"{shown[1]}: {FINDING}"], text
    assert f"since {before} " in text


def test_an_edited_committed_non_utf8_file_is_a_history_finding_naming_it(planted):
    checkout = planted
    shown = plant(checkout, commit=True)
    (checkout / "evidence" / BAD).write_text("edited\n")
    code, text = run("audit", "--root", str(checkout))
    assert code == 1, text
    (history,) = [line for line in about(text, shown[0]) if ": history-changed: " in line]
    assert history.endswith(f" -- {shown[0]})")
    code, text = run("verify", "--root", str(checkout))
    assert code == 1 and f"{shown[0]}: history-changed: " in text, text


def test_git_history_names_a_non_utf8_file_as_the_folder_listing_does(planted):
    checkout = planted
    before = head(checkout)  # the odd files are not committed yet
    plant(checkout, commit=True)
    folder = run_folder(checkout)
    history = git_history.read(checkout)
    firsts = {f.path: f for f in history.first}
    for rel in (f"evidence/{BAD}", f"evidence/{folder}/{BAD}"):
        assert rel in firsts and rel.removeprefix("evidence/").split("/")[-1] in os.listdir(checkout / Path(rel).parent)
        assert history.current[rel] == firsts[rel].blob  # hashed by that name: the same file
    found = git_history.changed_since(checkout, before, ("evidence",))
    assert not isinstance(found, type(git_history.NoHistory("")))
    assert found[1] == {f"evidence/{BAD}", f"evidence/{folder}/{BAD}"}
    at = git_history.at_commits(checkout, [head(checkout)], [(head(checkout), f"evidence/{BAD}"),
                                                              (head(checkout), "evidence/\ud800.txt")])
    assert at.sha256[(head(checkout), f"evidence/{BAD}")] is not None
    assert at.sha256[(head(checkout), "evidence/\ud800.txt")] is None  # no name's bytes: missing, not a crash


def test_non_utf8_names_in_runs_are_stray_entries(checkout):
    for name in (os.fsdecode(b"x\xfe.json"), os.fsdecode(b"y\xfd.txt")):
        (checkout / "runs" / name).write_text("{}\n")
    code, text = run("audit", "--root", str(checkout))
    assert code == 1, text
    for shown in ("runs/x\\xfe.json", "runs/y\\xfd.txt"):
        assert [line.split(": ")[1] for line in about(text, shown)] == ["runs-stray-file"], text
    code, text = run("status", "--root", str(checkout))
    assert code == 2, text
    assert text.splitlines() == ["tileproof status: runs/x\\xfe.json: is not a record (records are runs/<run id>.json "
                                 "files) (fix: move it out of runs/; only tileproof writes there)"]


def test_a_non_utf8_name_is_written_as_its_bytes_everywhere():
    name = os.fsdecode(b"evidence/a\xff\xc3b.txt")
    assert one_line(name) == encodable(name) == "evidence/a\\xff\\xc3b.txt"
    assert one_line("a\ud800\nb") == "a\\ud800\\nb" and encodable("a\ud800\nb") == "a\\ud800\nb"
    assert utf8_problem(name) == "its name is not valid UTF-8 (byte 0xff)"
    assert utf8_problem("évidence/x.txt") is None and utf8_problem("plain") is None
    assert Finding(name, rule="r", reason=f"why {name}", fix=name) == Finding(
        "evidence/a\\xff\\xc3b.txt", rule="r", reason="why evidence/a\\xff\\xc3b.txt", fix="evidence/a\\xff\\xc3b.txt")
    assert encodable("plain évidence") == "plain évidence"


def test_a_line_break_in_a_name_is_escaped_in_every_line_and_report_never_cut(checkout):
    """A record file and a transcript named with a line break, committed, then the record deleted and the
    transcript edited: the printed audit, the Markdown and the HTML report name each as ``a\\nb`` (before, the
    reports wrote a space or a raw line break in its place: ``runs/a`` on one line, ``b.json`` on the next)."""
    (checkout / "runs" / "a\nb.json").write_text("{}\n")
    (checkout / "evidence" / "c\nd.txt").write_text("x\n")
    git_commit_all(checkout, "odd names")
    (checkout / "runs" / "a\nb.json").unlink()
    (checkout / "evidence" / "c\nd.txt").write_text("y\n")
    md, html = checkout.parent / "a.md", checkout.parent / "a.html"
    code, text = run("audit", "--root", str(checkout), "--md", str(md), "--html", str(html))
    assert code == 1, text
    assert "runs/a\\nb.json: history-missing: " in text and "evidence/c\\nd.txt: history-changed: " in text, text
    for report in (md.read_text(), html.read_text()):
        assert "runs/a\\nb.json" in report and "evidence/c\\nd.txt" in report
        assert "runs/a\n" not in report and "runs/a b.json" not in report and "evidence/c d.txt" not in report
    assert "| `runs/a\\nb.json` | history-missing |" in md.read_text()
    assert ">runs/a\\nb.json</a>" in html.read_text()


def test_a_name_with_a_line_break_is_never_sent_to_gits_batch_reader(checkout):
    """git's ``cat-file --batch`` reads one query per line: a path with a line break (from a record's JSON) was
    cut there and read as two queries, and every answer after it went to the wrong question. Such a path is
    missing now, and the others keep their own answers."""
    commit = head(checkout)
    other, real = [p.relative_to(checkout) for p in sorted((checkout / "kernels").iterdir()) if p.suffix == ".py"][:2]
    pairs = [(commit, f"evidence/a\n{commit}:{other.as_posix()}"), (commit, real.as_posix())]
    assert (checkout / other).read_bytes() != (checkout / real).read_bytes()
    found = git_history.at_commits(checkout, [commit], pairs)
    assert not isinstance(found, git_history.NoHistory)
    assert found.sha256[pairs[0]] is None
    assert found.sha256[pairs[1]] == hashlib.sha256((checkout / real).read_bytes()).hexdigest()
