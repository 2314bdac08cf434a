"""The report built from the committed records, checked as a reviewer sees it: in a real headless browser.

Chromium (Debian's ``chromium``; CI's ``.ci/run`` installs it) loads the page with
console logging on: any console message fails the test (the page has no script, so
there should be none; a control page that logs proves the check would see one). It
takes a screenshot (kept under TILEPROOF_SCREENSHOT_DIR when set). Every ``href``
and ``src`` of the page, parsed with ``html.parser``, must resolve, relative to the
page's location, to a file inside the repository; every ``#anchor`` to an id.
Skipped, with the install command as the reason, only where chromium is absent.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from headless import console_messages, needs_chromium, render

from tileproof.__main__ import main


class Refs(HTMLParser):
    """Every href/src and every id of a page."""

    def __init__(self):
        super().__init__()
        self.refs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.refs.append(value)
            if name == "id" and value is not None:
                self.ids.add(value)


def unresolved(page: Path, root: Path) -> list[str]:
    """The page's links that do not resolve to a file inside ``root`` (or to an id of the page)."""
    refs = Refs()
    refs.feed(page.read_text())
    bad = []
    for ref in refs.refs:
        if ref.startswith("#"):
            if unquote(ref[1:]) not in refs.ids:
                bad.append(ref)
            continue
        url = urlparse(ref)
        if url.scheme or url.netloc or ref.startswith("/"):
            bad.append(ref)  # nothing is fetched from elsewhere, and no absolute path of this machine
            continue
        target = (page.parent / unquote(url.path)).resolve()
        if not target.is_file() or not target.is_relative_to(root.resolve()):
            bad.append(ref)
    return bad




@pytest.fixture(scope="module")
def built(tmp_path_factory, committed_tree):
    """The report of the committed records (``conftest.COMMITTED``), written into a folder outside the repository."""
    out = tmp_path_factory.mktemp("report")
    assert main(["audit", "--allow-no-history", "--root", str(committed_tree), "--report-dir", str(out)]) == 0
    return out / "audit.html"


def test_every_link_resolves_to_a_file_in_the_repository(built, committed_tree):
    refs = Refs()
    refs.feed(built.read_text())
    assert len([r for r in refs.refs if not r.startswith("#")]) > 100
    assert unresolved(built, committed_tree) == []


def test_the_committed_report_links_resolve(committed_tree):
    page = committed_tree / "evidence" / "audit.html"
    assert unresolved(page, committed_tree) == []
    assert 'id="bench"' in page.read_text()
    assert 'id="claims"' in page.read_text()


def test_the_link_check_catches_a_broken_link(tmp_path):
    page = tmp_path / "p.html"
    page.write_text('<a href="nope.json">x</a><a href="#missing">y</a><img src="/etc/hostname">')
    assert unresolved(page, tmp_path) == ["nope.json", "#missing", "/etc/hostname"]


@needs_chromium
def test_the_console_check_sees_a_console_error(tmp_path):
    page = tmp_path / "control.html"
    page.write_text('<!DOCTYPE html><p>x</p><script>console.error("tileproof-control")</script>')
    got = render(page.as_uri())
    assert any("tileproof-control" in m for m in console_messages(got.stderr))


@pytest.fixture(scope="module")
def rendered(built, tmp_path_factory):
    """The committed records' report loaded once in Chromium: its DOM, a screenshot and a printed PDF."""
    out = tmp_path_factory.mktemp("rendered")
    png, pdf = out / "audit.png", out / "audit.pdf"
    got = render(built.as_uri(), png=png, size="1280,2400", pdf=pdf, min_png_bytes=50_000,
                 keep_as="audit-committed-records.png")
    return got, pdf


@needs_chromium
def test_the_report_in_headless_chromium(rendered):
    dom, _pdf = rendered
    assert console_messages(dom.stderr) == []
    for text in ('id="bench"', "cuBLAS vs cuBLAS (control)", 'id="claims"', 'id="history"', "<svg", 'id="steps"',
                 'class="history steps"'):
        assert text in dom.stdout, text
    # What a reviewer reads first: the audited commit and tree, then one summary table, then the contents.
    page = dom.stdout
    for text in ('<dl class="audited">', "<dt>audited commit</dt>", "<dt>working tree</dt>", "<dt>audited at</dt>",
                 "<dt>trust root</dt>", "<dt>links</dt>"):
        assert text in page, text
    assert page.index('class="audited"') < page.index('class="summary"') < page.index('id="contents"') \
        < page.index('id="findings"')
    refs = Refs()
    refs.feed(page)
    toc = page[page.index('id="contents"'):page.index("</nav>")]
    entries = re.findall(r'href="#([^"]+)"', toc)
    assert len(entries) >= 10
    assert set(entries) <= refs.ids
    assert [r for r in refs.refs if r.startswith("#") and unquote(r[1:]) not in refs.ids] == []


@needs_chromium
def test_a_mistyped_trust_root_in_headless_chromium(committed_tree, tmp_path):
    """The page of an audit under a trust root not in the history: the one cause shows first, what follows is
    folded; the page has no console message and its links resolve."""
    typo = "0" * 40
    assert main(["audit", "--allow-no-history", "--root", str(committed_tree), "--trust-root", typo,
                 "--report-dir", str(tmp_path)]) == 1
    page = tmp_path / "audit.html"
    assert unresolved(page, committed_tree) == []
    got = render(page.as_uri(), png=tmp_path / "cause.png", size="1280,1600", min_png_bytes=20_000,
                 keep_as="audit-mistyped-trust-root.png")
    assert console_messages(got.stderr) == []
    dom = got.stdout
    findings = dom[dom.index('id="findings"'):]
    assert findings.index("Root cause") < findings.index("<details>") < findings.index("record-unendorsed-key</td>")
    assert "root cause: trust-root-not-in-history" in dom[dom.index('class="summary"'):dom.index('id="contents"')]


@needs_chromium
def test_the_report_prints(rendered):
    """Printed (the page's print CSS): a PDF of several pages, with no console message."""
    got, pdf = rendered
    assert console_messages(got.stderr) == []
    data = pdf.read_bytes()
    assert data[:5] == b"%PDF-"
    assert len(re.findall(rb"/Type\s*/Page\b", data)) > 3
