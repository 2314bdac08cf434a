"""History: a record or transcript once committed under runs/ or evidence/ that is now missing, changed or
not a regular file.

The check itself is ``records.history_check.check`` (fed by ``runner.git_history``, the only
code that starts git); each of its findings (``history_check.finding``) is named by ``history_check.HISTORY``,
which ``publish`` and ``status`` print too. A tree without history is not a finding here:
the audit reports it as *not checked* (``AuditResult.history``) and the command fails
closed on it unless told the tree has no history on purpose (``audit --allow-no-history``).
"""

from __future__ import annotations

from tileproof.judge.audit.audit_rules import rule
from tileproof.records.history_check import HISTORY

MISSING = rule(HISTORY["missing"], "a record or transcript once committed under runs/ or evidence/ is gone "
                                   "(deleted or renamed after its commit)")
CHANGED = rule(HISTORY["changed"], "a record or transcript once committed under runs/ or evidence/ differs "
                                   "from its first committed version")
REFUSED = rule(HISTORY["refused"], "a record or transcript once committed under runs/ or evidence/ is now a link, "
                                   "FIFO, device or folder, or cannot be read (never followed or opened)")
