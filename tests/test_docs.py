"""The documentation site (docs/): ``nox -s tests`` builds it beside pytest, and that build fails on what a reader
would trip over: a page no table of contents lists, a link to a missing page or heading, a heading out of order,
AUTHORING.md's generated reference gone from where the authoring page includes it."""

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
