"""History: a record or transcript once committed under runs/ or evidence/ that is now missing or changed.

The check itself is ``records.history.check`` (fed by ``runner.history``, the only
code that starts git); this names each of its findings as an audit rule. A tree
without history is not a finding here: the audit reports it as *not checked*
(``AuditResult.history``) and the command fails closed on it unless told the tree
has no history on purpose (``audit --allow-no-history``).
"""

from __future__ import annotations

from tileproof.judge.audit.registry import rule
from tileproof.records.history import HistoryReport, Problem

MISSING = rule("history-missing", "a record or transcript once committed under runs/ or evidence/ is gone "
                                  "(deleted or renamed after its commit)")
CHANGED = rule("history-changed", "a record or transcript once committed under runs/ or evidence/ differs "
                                  "from its first committed version")
RULE_OF: dict[Problem, str] = {"missing": MISSING, "changed": CHANGED}


def history_issues(report: HistoryReport) -> list[tuple[str, str, str]]:
    """(file, rule id, reason) for each once-committed file now missing or changed."""
    out = []
    for f in report.findings:
        what = "deleted" if f.problem == "missing" else "edited"
        out.append((f.path, RULE_OF[f.problem],
                    (f"{what} after commit {f.commit[:12]}, which first added it; records and transcripts are never "
                     f"deleted or edited (fix: git checkout {f.commit[:12]} -- {f.path})")))
    return out
