"""The audit as JUnit XML, for CI dashboards: one test case per lesson row, claim and audit rule.

Three suites: ``lessons`` (every row of every lesson's table, ``report.lesson_view``:
a failure when it blocks publishing, skipped when an optional row lacks evidence),
``claims`` (every claim of ``report.claims_view``: a failure when refuted and still
asserted, skipped when no release decided it, an error when its check could not run),
``audit-rules`` (every registered rule, plus any rule a finding names that is not
registered: a failure listing that rule's findings; and one case ``git-history``, a
failure when the history could not be checked, as the audit's exit status says). Written with the standard
library's ``xml.etree`` (tests read it back with an independent parser).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tileproof.judge.audit.result import AuditResult
from tileproof.judge.audit.rules import load as load_rules
from tileproof.report.claims_render import view_of
from tileproof.report.lesson_view import lesson_rows

RULES = load_rules()
UNDECIDED = ("unchecked", "unverifiable-here")


class _Suite:
    def __init__(self, name: str):
        self.element = ET.Element("testsuite", name=name)
        self.counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def case(self, name: str, classname: str, outcome: str | None = None, message: str = "", text: str = "") -> None:
        """``outcome``: None (passed), ``failure``, ``error`` or ``skipped``."""
        case = ET.SubElement(self.element, "testcase", name=name, classname=classname, time="0")
        self.counts["tests"] += 1
        if outcome is not None:
            ET.SubElement(case, outcome, message=message).text = text or message
            self.counts["failures" if outcome == "failure" else "errors" if outcome == "error" else "skipped"] += 1

    def done(self) -> ET.Element:
        for k, v in self.counts.items():
            self.element.set(k, str(v))
        return self.element


def _lessons(result: AuditResult) -> _Suite:
    suite = _Suite("lessons")
    for lesson in result.lessons:
        for r in lesson_rows(lesson):
            name = f"{lesson.id}: {r.program} {r.check}"
            text = r.why + (f"\nfix: {r.command}" if r.command else "")
            if not r.counted:
                suite.case(name, f"lessons.{lesson.id}", "failure", r.outcome, text)
            elif r.outcome not in ("passed", "supported"):
                suite.case(name, f"lessons.{lesson.id}", "skipped", r.outcome, text)
            else:
                suite.case(name, f"lessons.{lesson.id}")
    return suite


def _claims(result: AuditResult) -> _Suite:
    suite = _Suite("claims")
    for row in view_of(result).rows:
        name, cls = f"{row.document}/{row.claim_id}", f"claims.{row.document}"
        why = "; ".join(f"{c.release}: {c.verdict}: {c.why}" + (f" (evidence: {c.evidence})" if c.evidence else "")
                        for c in row.cells if c is not None) or "no claims record checked it"
        if row.stands_out:
            suite.case(name, cls, "failure", "refuted and still asserted", why)
        elif row.deciding == "error":
            suite.case(name, cls, "error", "the check could not run", why)
        elif row.deciding in UNDECIDED:
            suite.case(name, cls, "skipped", row.deciding, why)
        else:
            suite.case(name, cls)
    return suite


def _rules(result: AuditResult) -> _Suite:
    suite = _Suite("audit-rules")
    by_rule: dict[str, list[str]] = {}
    for f in result.findings:
        by_rule.setdefault(f.rule, []).append(str(f))
    for rule in [*RULES, *(r for r in by_rule if r not in RULES)]:
        found = by_rule.get(rule, [])
        if found:
            suite.case(rule, "audit.rules", "failure", f"{len(found)} finding{'s' * (len(found) != 1)}",
                       "\n".join(found))
        else:
            suite.case(rule, "audit.rules")
    suite.case("git-history", "audit.history", None if result.history_checked else "failure",
               result.history_line())
    return suite


def junit_xml(result: AuditResult) -> str:
    """The whole document, UTF-8 with an XML declaration."""
    root = ET.Element("testsuites", name="tileproof audit")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in (_lessons(result), _claims(result), _rules(result)):
        root.append(suite.done())
        for k in totals:
            totals[k] += suite.counts[k]
    for k, v in totals.items():
        root.set(k, str(v))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
