"""``audit --junit`` and ``audit --json``: read back by an independent parser (junitparser) and by the schema.

The expected counts come from the audit's own decisions and rules, not from the
writer: a case per lesson row (results rows, performance claims, refuted claims),
per claim of the claims files and records, and per audit rule.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import junitparser
import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "audit"))
import audit_tree

from tileproof.__main__ import main
from tileproof.gather import audit
from tileproof.judge.audit.rules import load as load_rules
from tileproof.records.audit_summary import AuditSummary
from tileproof.report.claims_render import view_of

REPO = Path(__file__).resolve().parents[1]


def _suites(path: Path) -> dict[str, junitparser.TestSuite]:
    xml = junitparser.JUnitXml.fromfile(str(path))
    return {s.name: s for s in xml}


def _expected_rows(result) -> int:
    return sum(len(lesson.decision.rows) + len(lesson.decision.perf) + len(lesson.decision.refuted)
               for lesson in result.lessons)


def test_junit_of_the_committed_records(tmp_path, capsys, committed_tree):
    out = tmp_path / "audit.xml"
    assert main(["audit", "--allow-no-history", "--root", str(committed_tree), "--junit", str(out),
                 "--json", str(tmp_path / "a.json")]) == 0
    result = audit.audit(committed_tree)
    suites = _suites(out)
    assert set(suites) == {"lessons", "claims", "audit-rules"}
    assert len(list(suites["lessons"])) == _expected_rows(result) > 0
    claims = view_of(result)
    assert len(list(suites["claims"])) == len(claims.rows) > 0
    assert len(list(suites["audit-rules"])) == len(load_rules()) + 1  # and the git-history case
    # Failures: the refuted claims still asserted; no audit rule fails on a clean tree.
    failed = [c.name for c in suites["claims"] if any(isinstance(r, junitparser.Failure) for r in c.result)]
    assert sorted(failed) == sorted(f"{r.document}/{r.claim_id}" for r in claims.standing_out)
    assert not any(c.result for c in suites["audit-rules"])
    # An optional row without evidence is skipped, not failed.
    skipped = [c for c in suites["lessons"] if any(isinstance(r, junitparser.Skipped) for r in c.result)]
    assert skipped
    assert all("optional" in c.name for c in skipped)
    assert "wrote" in capsys.readouterr().out


def test_junit_failures_for_findings_and_blocked_rows(tmp_path):
    info = audit_tree.clean_tree(tmp_path)
    (tmp_path / info["run"].step.stdout.path).write_text("changed\n")
    (tmp_path / "kernels" / "vector_add.py").write_text('"""Changed after the run."""\n')
    out = tmp_path / "junit.xml"
    assert main(["audit", "--allow-no-history", "--root", str(tmp_path), "--junit", str(out)]) == 1
    result = audit.audit(tmp_path)
    suites = _suites(out)
    rules = {c.name: c for c in suites["audit-rules"]}
    for f in result.findings:
        failure = next(r for r in rules[f.rule].result if isinstance(r, junitparser.Failure))
        assert f.file in failure.text
    # The test tree has no git history: the audit could not check it, and the JUnit says so.
    assert not result.history_checked
    assert any(isinstance(r, junitparser.Failure) and "NOT CHECKED" in r.message for r in rules["git-history"].result)
    blocked = [c for c in suites["lessons"] if any(isinstance(r, junitparser.Failure) for r in c.result)]
    expected = [r for lesson in result.lessons for r in lesson.decision.rows if r.blocks]
    assert len(blocked) == len(expected) > 0
    assert len(list(suites["lessons"])) == _expected_rows(result)


def test_json_summary_validates_and_matches_the_audit(tmp_path, committed_tree):
    out = tmp_path / "summary.json"
    assert main(["audit", "--allow-no-history", "--root", str(committed_tree), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    summary = AuditSummary.model_validate(data)
    schema = json.loads((REPO / "schema" / "audit-summary.v1.schema.json").read_text())
    assert set(schema["required"]) <= set(data)
    result = audit.audit(committed_tree)
    assert summary.passed
    assert summary.records == result.validated == len(list((committed_tree / "runs").glob("*.json")))
    assert summary.history_checked == result.history_checked
    assert summary.history_line == result.history_line()
    assert [lesson.id for lesson in summary.lessons] == [lesson.id for lesson in result.lessons]
    assert sum(c.refuted_and_asserted for c in summary.claims) == len(view_of(result).standing_out)
    controls = [p for b in summary.bench for p in b.head_to_head if p.control]
    assert controls
    assert all(p.case.startswith("matmul/cublas/") for p in controls)
    assert summary.history
    assert all(len(h.values) == len(h.run_ids) >= 2 for h in summary.history)


@pytest.mark.parametrize("flag", ["--junit", "--json"])
def test_no_write_writes_nothing(tmp_path, flag, committed_tree):
    out = tmp_path / "x"
    assert main(["audit", "--allow-no-history", "--root", str(committed_tree), flag, str(out), "--no-write"]) == 0
    assert not out.exists()
