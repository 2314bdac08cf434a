"""The audit's reports: findings first, every value escaped, links that resolve,
nothing fetched; and the HTML page opened in a real headless browser.

Chromium: Debian's package (``apt-get install -y chromium``). The browser test
is skipped, with that command as the reason, where it is absent. Set
TILEPROOF_SCREENSHOT_DIR to keep the screenshot (a CI artifact).
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "audit"))
import audit_tree  # noqa: E402
from headless import needs_chromium, render  # noqa: E402

from tileproof.gather import audit  # noqa: E402
from tileproof.judge.audit.result import AuditResult  # noqa: E402
from tileproof.records import store  # noqa: E402
from tileproof.records.findings import Finding  # noqa: E402
from tileproof.report import render as report  # noqa: E402


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    audit_tree.clean_tree(root)
    result = audit.audit(root)
    assert result.ok
    return root, result


@pytest.fixture(scope="module")
def tampered(tmp_path_factory):
    """A tree with findings, one of whose reasons carries markup."""
    root = tmp_path_factory.mktemp("tampered")
    info = audit_tree.clean_tree(root)
    (root / info["run"].step.stdout.path).write_text("changed\n")
    (root / "evidence" / "<img src=x onerror=alert(1)>.txt").write_text("orphan\n")
    return root, audit.audit(root)


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.srcs, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if "href" in attrs:
            self.hrefs.append(attrs["href"])
        if "src" in attrs:
            self.srcs.append(attrs["src"])


def parse(html: str) -> Links:
    links = Links()
    links.feed(html)
    return links


def test_html_is_self_contained_and_links_resolve(clean):
    root, result = clean
    base = root / "evidence"
    html = report.render_html(result, base)
    links = parse(html)
    assert "script" not in links.tags
    assert "link" not in links.tags
    assert "img" not in links.tags
    assert not links.srcs
    assert not re.search(r"url\(|@import|https?://", html)
    files = [h for h in links.hrefs if not h.startswith("#")]
    assert len(files) > 10
    for href in files:
        assert not href.startswith("/"), href
        assert (base / unquote(href)).resolve().is_file(), href
    anchors = {h[1:] for h in links.hrefs if h.startswith("#")}
    assert anchors
    assert all(f'id="{a}"' in html for a in anchors)


def test_html_order_and_content(clean):
    root, result = clean
    html = report.render_html(result, root / "evidence")
    order = [html.index(s) for s in ('id="findings"', 'id="lessons"', 'id="grid"', 'id="environments"')]
    assert order == sorted(order)
    run = next(r for r in result.runs.newest.values() if r.program == "kernels/vector_add.py")
    for text in ("PASSED: no findings", "NVIDIA H200 (cc 9.0)", "Tesla T4 (cc 7.5)", "580.95.05",
                 "CUDA_VISIBLE_DEVICES=0", "nvcc 13.4.92", "cuda-tile 1.7.0", run.run_id, "02-softmax", "gated"):
        assert text in html, text


def test_findings_first_and_escaped(tampered):
    root, result = tampered
    html = report.render_html(result, root / "evidence")
    assert html.index("evidence-digest") < html.index('id="lessons"')
    assert "<img" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;.txt" in html
    assert "FAILED: 2 findings" in html
    md = report.render_markdown(result, root / "evidence")
    assert md.index("## Findings") < md.index("## Lessons") < md.index("## Lessons ×")
    assert "<img" not in md
    assert "⚠" in md  # the run whose transcript changed is marked in the grid


def test_markdown_links_relative(clean):
    root, result = clean
    md = report.render_markdown(result, root / "evidence")
    targets = re.findall(r"\]\(([^)]+)\)", md)
    files = [t for t in targets if not t.startswith("#")]
    assert files
    assert all((root / "evidence" / unquote(t)).resolve().is_file() for t in files)
    # The in-page links (summary, contents) name anchors the page has.
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', md))
    assert {t[1:] for t in targets if t.startswith("#")} <= anchors
    assert {"summary", "findings", "lessons", "rules"} <= anchors
    assert "| File | Rule | Reason |" not in md
    assert "None." in md


def test_markdown_cells_escape_pipes_and_line_breaks(clean):
    """A line break is escaped as every printed line escapes it (a space would make ``a\nb`` read as ``a b``)."""
    root, result = clean
    odd = AuditResult(root=root, findings=[Finding("runs/x.json", "record-seal", "a | b\nc")],
                            records=[], lessons=[], evidence_files=0, evidence_bytes=0, record_files=1)
    md = report.render_markdown(odd, root / "evidence")
    assert "| `runs/x.json` | record-seal | a \\| b\\nc |" in md


def test_reports_for_an_empty_tree(tmp_path):
    result = audit.audit(tmp_path)
    assert result.ok
    assert "No run records." in report.render_markdown(result, tmp_path / "evidence")
    assert "No lessons under lessons/." in report.render_html(result, tmp_path / "evidence")


@needs_chromium
def test_html_in_headless_chromium(tampered, tmp_path):
    root, result = tampered
    page = root / "evidence" / audit.REPORT_HTML
    store.write_atomic(page, report.render_html(result, page.parent))
    # The DOM as the browser built it (parsed, with the findings table first), and a screenshot of it.
    dom = render(page.as_uri(), png=tmp_path / "audit.png", size="1280,2000", min_png_bytes=20_000,
                 keep_as="audit.png")
    assert "FAILED: 2 findings" in dom.stdout
    assert "evidence-orphan" in dom.stdout
    assert "<img" not in dom.stdout
    assert "&lt;img src=x onerror=alert(1)&gt;.txt" in dom.stdout
