"""Which records count as evidence, by their signature's standing: the one switch.

``records.registry.verify`` decides a record's ``Trust``; this module decides
what that means for publishing and the audit. Today's policy,
``unsigned-counts``, keeps the committed legacy records (all unsigned, written
before signing existed) counting, so the tree still audits clean; every other
failed verification never counts. After the GPU re-run from a registered
runner, :data:`POLICY` becomes ``signed-only`` (one line): then only
``verified`` records count and an unsigned one is an audit finding.
"""

from __future__ import annotations

from typing import Literal

from tileproof.records.registry import Trust, Verification

TrustPolicy = Literal["unsigned-counts", "signed-only"]

POLICY: TrustPolicy = "unsigned-counts"
"""The switch: ``signed-only`` once the evidence is re-established from signed records."""

FINDING: dict[Trust, str] = {
    "unsigned": "record-unsigned",
    "unknown-key": "record-unknown-key",
    "bad-signature": "record-bad-signature",
    "revoked": "record-revoked-key",
    "kind-not-allowed": "record-kind-not-allowed",
    "subject-mismatch": "record-subject-mismatch",
}
"""Audit rule id for each trust word that is not ``verified``."""

RULES: dict[str, str] = {
    "record-unsigned": "a record carries no signature (counts only while the policy is unsigned-counts)",
    "record-unknown-key": "a record is signed by a key that is not in lessons/runners.yaml",
    "record-bad-signature": "a record's signature does not verify: its content changed after signing",
    "record-revoked-key": "a record is signed by a key revoked at or before the record's time",
    "record-kind-not-allowed": "a record is signed by a key that may not sign records of its kind",
    "record-subject-mismatch": "a signed statement's subjects are not the file digests its record holds",
}
"""Rule id → what it catches, for the audit's rule list."""


def counts(trust: Trust, policy: TrustPolicy = POLICY) -> bool:
    """Whether a record with this trust may back a lesson, a claim or the audit's acceptance."""
    return trust == "verified" or (trust == "unsigned" and policy == "unsigned-counts")


def issues(verification: Verification, policy: TrustPolicy = POLICY) -> list[tuple[str, str]]:
    """The audit's (rule id, reason) pairs for one record's verification: none when it counts."""
    if counts(verification.trust, policy):
        return []
    return [(FINDING[verification.trust], verification.reason)]
