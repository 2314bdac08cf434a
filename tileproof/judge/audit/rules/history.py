"""History: a record or transcript once committed under runs/ or evidence/ that is now missing, changed or
not a regular file.

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
REFUSED = rule("history-refused", "a record or transcript once committed under runs/ or evidence/ is now a link, "
                                  "FIFO, device or folder, or cannot be read (never followed or opened)")
RULE_OF: dict[Problem, str] = {"missing": MISSING, "changed": CHANGED, "refused": REFUSED}
VERB: dict[Problem, str] = {"missing": "deleted", "changed": "edited", "refused": "replaced"}


def history_issues(report: HistoryReport) -> list[tuple[str, str, str]]:
    """(file, rule id, reason) for each once-committed file now missing, changed or not a regular file."""
    out = []
    for f in report.findings:
        why = f" ({f.why})" if f.why else ""
        out.append((f.path, RULE_OF[f.problem],
                    (f"{VERB[f.problem]} after commit {f.commit[:12]}, which first added it{why}; records and "
                     f"transcripts are never deleted or edited (fix: git checkout {f.commit[:12]} -- {f.path})")))
    return out
