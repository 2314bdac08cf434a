"""Signatures: a record whose verification (``records.trust.runner_keys.verify``) the trust policy does not accept.

The rule ids and texts are ``judge.trust``'s (one list); the orchestrator applies
``trust.issues`` to each record's verification as it reads it.
"""

from __future__ import annotations

from tileproof.judge import trust
from tileproof.judge.audit.audit_rules import rule

IDS = tuple(rule(rule_id, text) for rule_id, text in trust.RULES.items())
