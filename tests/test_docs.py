"""The documentation site (docs/): ``nox -s tests`` builds it beside pytest, and that build fails on what a reader
would trip over: a page no table of contents lists, a link to a missing page or heading, a heading out of order,
AUTHORING.md's generated reference gone from where the authoring page includes it. The code's pointers into the
site (``docs/page.md, "Heading"`` in a docstring, ``docs/page.md#anchor`` in the README; in the package, the tests,
scripts/, the workflows, the registry and CI's files) name what exists."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import conftest
import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_tests_session_builds_the_docs_strictly_beside_pytest():
    nf = conftest.noxfile()
    assert nf.DOCS_BUILD in nf.BESIDE_PYTEST
    assert "-W" in nf.DOCS_BUILD  # warnings are errors
    assert "-E" in nf.DOCS_BUILD  # every page read again: a saved environment never hides a warning


@pytest.mark.slow(reason="real Sphinx builds: only the builder says which breakage fails it")
def test_the_docs_build_fails_on_each_kind_of_breakage(tmp_path):
    pytest.importorskip("sphinx", reason="the docs extra is not installed (nox -s tests installs it)")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    guide = (REPO / "AUTHORING.md").read_text()
    end = "<!-- end of the generated front-matter reference -->"
    assert end in guide
    (tmp_path / "AUTHORING.md").write_text(guide.replace(end, ""))
    (tmp_path / "docs" / "orphan.md").write_text("# Orphan\n\nNo table of contents lists this page.\n")
    with (tmp_path / "docs" / "claims.md").open("a") as page:
        page.write("\nSee [a page](no-such-page.md) and [a heading](install.md#no-such-heading).\n\n#### Too deep\n")
    built = subprocess.run([sys.executable, "-m", *conftest.noxfile().DOCS_BUILD], cwd=tmp_path,
                           capture_output=True, text=True)
    said = built.stdout + built.stderr
    assert built.returncode != 0, said
    assert "orphan.md: WARNING: document isn't included in any toctree" in said
    assert "cross-reference target not found: 'no-such-page.md'" in said
    assert "local id not found in doc 'install': 'no-such-heading'" in said
    assert "Non-consecutive header level increase" in said
    assert 'option "end-before": text not found' in said


POINTER = re.compile(r'docs/([a-z0-9-]+)\.md(?:, "([^"]+)"|#([a-z0-9-]+))?')
"""``docs/page.md``, optionally with ``, "A heading"`` (docstrings) or ``#a-heading`` (Markdown links)."""


def _headings(page: Path) -> list[str]:
    """The page's Markdown headings, outside code blocks."""
    fenced, found = False, []
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#+ (.+)", line)):
            found.append(m.group(1).strip())
    return found


def _anchor(heading: str) -> str:
    """The anchor MyST (and GitHub) give a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_the_pattern_finds_pointers_with_and_without_a_heading():
    found = POINTER.findall('see docs/claims.md, "The claims matrix", and [x](docs/install.md#the-lock)')
    assert found == [("claims", "The claims matrix", ""), ("install", "", "the-lock")]
    assert _anchor("What each command writes, and what to commit") == "what-each-command-writes-and-what-to-commit"


def test_every_pointer_into_the_docs_names_a_page_and_heading_that_exist():
    tests = [p for p in sorted((REPO / "tests").glob("*.py")) if p.name != Path(__file__).name]  # shows the form
    sources = [*sorted((REPO / "tileproof").rglob("*.py")), *tests, *sorted((REPO / "scripts").glob("*.py")),
               *sorted((REPO / ".github" / "workflows").glob("*.yml")),
               *(REPO / name for name in ("noxfile.py", "pyproject.toml", "README.md", "AUTHORING.md",
                                          "lessons/runners.yaml", ".ci/trust-root", ".ci/run"))]
    seen = 0
    for source in sources:
        for page, heading, anchor in POINTER.findall(source.read_text()):
            seen += 1
            where = f"{source.relative_to(REPO)}: docs/{page}.md"
            path = REPO / "docs" / f"{page}.md"
            assert path.is_file(), f"{where}: no such page"
            headings = _headings(path)
            assert not heading or heading in headings, f"{where}: no heading {heading!r} (it has {headings})"
            assert not anchor or anchor in map(_anchor, headings), f"{where}: no heading with anchor #{anchor}"
    assert seen, "the README links the docs pages"
