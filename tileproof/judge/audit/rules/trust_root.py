"""The trust root: unsigned registry changes, root resets, a loosened registry, a rewritten history.

The checks are ``judge.trust.trust_root``'s (``evaluate``, one walk of the registry's history from the
root the reviewer pins); this registers their rule ids for the reports.
"""

from __future__ import annotations

from tileproof.judge.audit.audit_rules import rule
from tileproof.judge.trust import trust_root

IDS = tuple(rule(rule_id, text) for rule_id, text in trust_root.RULES.items())
