"""The audit report a reviewer opens: what was audited first, one summary, contents, links that survive a move,
and a mistyped trust root shown as the one cause it is (real clones of this repository, real audits)."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import subprocess
from datetime import datetime, timedelta, timezone
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import COMMITTED, clone_at

from tileproof.__main__ import main
from tileproof.commands import audit as audit_command
from tileproof.gather import audit
from tileproof.report import causes

TYPO = COMMITTED[:-1] + ("0" if COMMITTED[-1] != "0" else "1")
"""The committed tree's commit with its last digit mistyped: a full id, of no commit here."""
REPORT = Path(__file__).resolve().parents[1] / "tileproof" / "report"


class Page(HTMLParser):
    """Every href and id of a page, and the text of each ``<dl class="audited">`` entry."""

    def __init__(self, text: str):
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()
        self.facts: dict[str, str] = {}
        self._dt: str | None = None
        self._in: str | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("href") is not None:
            self.hrefs.append(a["href"])
        if a.get("id") is not None:
            self.ids.add(a["id"])
        self._in = tag if tag in ("dt", "dd") else None

    def handle_data(self, data):
        if self._in == "dt":
            self._dt = data
        elif self._in == "dd" and self._dt is not None:
            self.facts.setdefault(self._dt, data)


def section(html: str, anchor: str) -> str:
    start = html.index(f'<h2 id="{anchor}">')
    end = html.find("<h2 ", start + 1)
    return html[start:end if end > 0 else None]


def audited(*argv: str) -> tuple[int, str, object]:
    """``tileproof audit ARGV`` as the command line runs it: its exit status, what it printed (stdout), and the
    result it printed and wrote its reports from (``gather.audit.audit``'s, kept as the command gets it)."""
    results = []
    real = audit_command.audit
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as m, contextlib.redirect_stdout(out):
        m.setattr(audit_command, "audit", lambda *a, **k: results.append(real(*a, **k)) or results[-1])
        code = main(["audit", *argv])
    (result,) = results
    return code, out.getvalue(), result


@pytest.fixture(scope="module")
def mistyped(committed_tree, tmp_path_factory):
    """The committed tree audited with the trust root mistyped, the reports written: exit status, the reports'
    folder, the result and what it printed."""
    out = tmp_path_factory.mktemp("mistyped")
    code, printed, result = audited("--allow-no-history", "--root", str(committed_tree), "--trust-root", TYPO,
                                    "--report-dir", str(out))
    return code, out, result, printed


@pytest.fixture(scope="module")
def clean(committed_tree, tmp_path_factory):
    """The committed tree audited, the reports written: exit status, the reports' folder and the result."""
    out = tmp_path_factory.mktemp("clean")
    code, _printed, result = audited("--allow-no-history", "--root", str(committed_tree), "--report-dir", str(out))
    return code, out, result


def test_a_mistyped_trust_root_is_one_cause_not_a_hundred_findings(mistyped):
    code, out, result, _printed = mistyped
    assert code == 1
    view = causes.grouped(result.findings, result.lessons)
    assert [g.cause.rule for g in view.groups] == ["trust-root-not-in-history"]
    group = view.groups[0]
    # Every other finding follows from it: each signed record unendorsed, each published lesson without evidence.
    assert view.standalone == ()
    assert len(group.consequences) == len(result.findings) - 1 > 20
    assert {f.rule for f in group.consequences} == {"record-unendorsed-key", "lesson-published-without-evidence"}
    assert {f.file for f in group.consequences if f.rule == "lesson-published-without-evidence"} == {
        lesson.file for lesson in result.lessons if lesson.status == "published"}
    html = (out / "audit.html").read_text()
    found = section(html, "findings")
    # The cause leads; what follows sits folded under it, no row of it outside the fold.
    assert found.index('class="banner bad cause"') < found.index("<details>")
    assert "trust-root-not-in-history" in found[:found.index("<details>")]
    outside = re.sub(r"<details>.*?</details>", "", found, flags=re.S)
    assert "<tr>" not in outside
    assert found.count("record-unendorsed-key</td>") == sum(f.rule == "record-unendorsed-key" for f in result.findings)
    assert f"{len(group.consequences)} findings follow from it" in unescape(found)
    summary = section(html, "summary")
    rows = re.findall(r"<tr><td>(.*?)</tr>", summary)
    assert "root cause: trust-root-not-in-history" in rows[0]
    md = (out / "AUDIT.md").read_text()
    assert md.index("**Root cause**") < md.index("| `runs/")
    assert "FAILED: " in md and "1 root cause (trust-root-not-in-history)" in md


def test_the_printed_audit_names_the_cause_first(mistyped):
    code, _out, _result, printed = mistyped
    assert code == 1
    lines = [line for line in printed.splitlines() if line]
    assert lines[0].startswith("root cause: lessons/runners.yaml: trust-root-not-in-history")
    assert re.search(r"; (\d+) findings below follow from it", lines[0])
    assert lines[1].startswith("lessons/runners.yaml: trust-root-not-in-history")


def test_a_finding_of_its_own_is_not_put_under_the_cause(tmp_path):
    root = clone_at(tmp_path / "repo")
    (root / "evidence" / "stray.txt").write_text("not referenced by any record\n")
    victim = sorted((root / "runs").glob("*-run-*.json"))[-1]
    envelope = json.loads(victim.read_text())
    sig = envelope["signatures"][0]["sig"]
    envelope["signatures"][0]["sig"] = ("B" if sig[0] == "A" else "A") + sig[1:]
    victim.write_text(json.dumps(envelope, indent=2))
    result = audit.audit(root, trust_root=TYPO)
    view = causes.grouped(result.findings, result.lessons)
    alone = {(f.file, f.rule) for f in view.standalone}
    assert ("evidence/stray.txt", "evidence-orphan") in alone
    mine = [f for f in result.findings if f.file == f"runs/{victim.name}" and f.rule != "record-unendorsed-key"]
    assert mine and all((f.file, f.rule) in alone for f in mine)
    # Every finding is shown once: a cause, under one cause, or on its own.
    assert sorted(map(str, causes.in_order(view))) == sorted(map(str, result.findings))
    assert view.total == len(result.findings)


def _remove(root: Path) -> None:
    (root / "lessons" / "runners.yaml").unlink()


def _empty(root: Path) -> None:
    (root / "lessons" / "runners.yaml").write_text("registry_version: 1\npolicy: signed-only\nrunners: []\n")


@pytest.mark.parametrize(("poison", "cause"), [(_remove, "registry-missing"), (_empty, "registry-emptied")])
def test_a_registry_gone_or_emptied_is_one_cause_too(tmp_path, poison, cause):
    """Without the registry's keys every signed record is record-unknown-key, and the published lessons lose their
    records: all of it under the one cause."""
    root = clone_at(tmp_path / "repo")
    poison(root)
    result = audit.audit(root)
    view = causes.grouped(result.findings, result.lessons)
    assert [g.cause.rule for g in view.groups] == [cause]
    assert view.standalone == ()
    follows = {f.rule for f in view.groups[0].consequences}
    assert follows == {"record-unknown-key", "lesson-published-without-evidence"}


def test_without_a_cause_nothing_is_grouped(clean):
    _code, _out, result = clean
    view = causes.grouped(result.findings, result.lessons)
    assert view.groups == () and view.lead() is None


@pytest.mark.slow(reason="a clone of the committed tree audited three times: twice rewriting its committed "
                          "reports, once with the working tree dirty")
def test_the_header_says_which_commit_clean_or_dirty_when_and_the_root(tmp_path):
    root = clone_at(tmp_path / "repo")
    before = datetime.now(timezone.utc) - timedelta(seconds=2)
    # Twice: the committed reports the first run rewrote (on purpose) do not make the tree dirty for the second.
    for _ in range(2):
        code, _printed, result = audited("--root", str(root), "--update-committed-report")
        assert code == 0
    page = Page((root / "evidence" / "audit.html").read_text())
    assert page.facts["audited commit"] == COMMITTED
    assert page.facts["working tree"].startswith("clean")
    at = datetime.strptime(page.facts["audited at"], "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=timezone.utc)
    assert before <= at <= datetime.now(timezone.utc)
    assert page.facts["trust root"] == result.trust.root
    assert page.facts["trust range"] == result.trust.range
    assert "'..'" in page.facts["links"]  # evidence/audit.html: the repository root is its parent
    text = (root / "evidence" / "audit.html").read_text()
    assert text.index('class="audited"') < text.index('id="summary"') < text.index('id="contents"') \
        < text.index('id="findings"')
    (root / "README.md").write_text((root / "README.md").read_text() + "\nedited\n")
    assert main(["audit", "--root", str(root), "--html", str(tmp_path / "dirty.html")]) == 0
    assert Page((tmp_path / "dirty.html").read_text()).facts["working tree"].startswith("DIRTY")


def test_every_lesson_is_one_summary_row_and_the_contents_resolve(clean):
    code, out, result = clean
    assert code == 0
    html = (out / "audit.html").read_text()
    summary = section(html, "summary")
    for lesson in result.lessons:
        assert f'<a href="#lesson-{lesson.id}">{lesson.id}</a>' in summary
    page = Page(html)
    toc = re.findall(r'href="#([^"]+)"', html[html.index('id="contents"'):html.index("</nav>")])
    assert {"summary", "findings", "lessons", "claims", "bench", "grid", "rules"} <= set(toc)
    assert set(toc) <= page.ids
    assert all(unquote(h[1:]) in page.ids for h in page.hrefs if h.startswith("#"))


def test_link_base_links_survive_a_move_and_name_files_at_the_audited_commit(committed_tree, tmp_path):
    base = "https://example.invalid/owner/repo/blob/{commit}/"
    assert main(["audit", "--allow-no-history", "--root", str(committed_tree), "--report-dir", str(tmp_path),
                 "--link-base", base]) == 0
    moved = tmp_path / "attached" / "to-a-pull-request.html"
    moved.parent.mkdir()
    (tmp_path / "audit.html").rename(moved)
    page = Page(moved.read_text())
    prefix = base.replace("{commit}", COMMITTED)
    files = [h for h in page.hrefs if not h.startswith("#")]
    assert len(files) > 100
    assert all(h.startswith(prefix) for h in files), [h for h in files if not h.startswith(prefix)][:3]
    assert all(unquote(h[1:]) in page.ids for h in page.hrefs if h.startswith("#"))
    paths = sorted({unquote(h[len(prefix):]) for h in files})
    check = subprocess.run(["git", "-C", str(committed_tree), "cat-file", "--batch-check"], check=True,
                           input="".join(f"{COMMITTED}:{p}\n" for p in paths), capture_output=True, text=True)
    missing = [line for line in check.stdout.splitlines() if line.endswith(" missing")]
    assert missing == []
    assert prefix in page.facts["links"]
    md = (tmp_path / "AUDIT.md").read_text()
    targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", md) if "/" in t or t.startswith("#")]
    assert len(targets) > 100
    assert all(t.startswith(("#", prefix)) for t in targets)


@pytest.mark.parametrize("bad", ["ftp://example.invalid/x/", "https://example.invalid/x", "/work/repo/",
                                 "https://example.invalid/x/?a=1/"])
def test_a_bad_link_base_is_one_line_and_exit_2(bad, committed_tree, tmp_path, capsys):
    assert main(["audit", "--root", str(committed_tree), "--report-dir", str(tmp_path), "--link-base", bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "--link-base" in err[0] and "fix:" in err[0]
    assert not (tmp_path / "audit.html").exists()


def _functions(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            count = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs) \
                + (args.vararg is not None) + (args.kwarg is not None)
            yield node, node.end_lineno - node.lineno + 1, count


def test_no_report_function_is_long_or_takes_many_parameters():
    """Each report section is one view and two short renderers: no function over 60 lines or 7 parameters."""
    too = [f"{p.name}:{n.lineno} {n.name} ({lines} lines, {params} parameters)"
           for p in sorted(REPORT.glob("*.py")) for n, lines, params in _functions(p) if lines > 60 or params > 7]
    assert too == []
