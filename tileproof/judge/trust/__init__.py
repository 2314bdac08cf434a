"""Which records count as evidence: the one funnel every decision and the audit go through.

A record counts only when what was checked about it when it was loaded
(``store.Examined``) says so: its seal is intact (a record edited after writing,
or with no seal, never counts) and its signature's standing
(``records.trust.runner_keys.verify``, then its standing in history, ``judge.trust.standing``) is one
the policy accepts. A tree whose ``lessons/runners.yaml`` lists any runner key, or says
``policy: signed-only``, or whose git history shows a version that did
(``judge.trust.trust_root``: the policy only tightens; carried on each ``Examined`` record),
accepts only ``verified`` records (:func:`effective`); :data:`POLICY`, the code's
default, only applies to a tree that has registered no key yet (a project before its
first key, a test tree), where unsigned records count. The rows, the performance claims, the refuted
claims and the audit all follow, because they all ask :func:`refusal` here (through :func:`split`, or
:func:`admits` for one record). Unsigned records first committed before the tree's first key are
legacy: they count toward nothing under ``signed-only`` and are no finding (:func:`issues`).

This module is the door of the judge's trust room; beside it, ``standing`` (a record's standing in time, by the
commit that first added it) and ``trust_root`` (which keys the registry's history vouches for, from the root).
The plain data they judge is the records' trust room, ``records.trust``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from tileproof.judge.trust import standing
from tileproof.records.store import Examined, examine
from tileproof.records.trust.runner_keys import TreePolicy, Trust, Verification

TrustPolicy = Literal["unsigned-counts", "signed-only"]

POLICY: TrustPolicy = "unsigned-counts"
"""The default for a tree that has registered no runner key; a registry with a key puts ``signed-only`` in force."""

FINDING: dict[Trust, str] = {
    "unsigned": "record-unsigned",
    "unknown-key": "record-unknown-key",
    "bad-signature": "record-bad-signature",
    "revoked": "record-revoked-key",
    "kind-not-allowed": "record-kind-not-allowed",
    "subject-mismatch": "record-subject-mismatch",
    "unisolated-not-allowed": "record-unisolated-not-allowed",
    "unendorsed-key": "record-unendorsed-key",
    "dated-before-key": "record-dated-before-key",
    "dated-after-commit": "record-dated-after-commit",
}
"""Audit rule id for each trust word that is not ``verified``."""

RULES: dict[str, str] = {
    "record-unsigned": "a record carries no signature (counts only while the policy is unsigned-counts)",
    "record-unknown-key": "a record is signed by a key that is not in lessons/runners.yaml",
    "record-bad-signature": "a record's signature does not verify: its content changed after signing",
    "record-revoked-key": "a record is signed by a key revoked at or before the record's time, or first "
                          "committed in a commit that is not an ancestor of the key's revocation",
    "record-kind-not-allowed": "a record is signed by a key that may not sign records of its kind (or was "
                               "allowed it only by an unsigned registry change)",
    "record-subject-mismatch": "a signed statement's subjects (and materials) are not the file digests its record "
                               "holds",
    "record-unisolated-not-allowed": "a record whose programs ran without a wall (isolation none) is signed by a "
                                     "key whose registry entry does not allow unisolated runs",
    "record-unendorsed-key": "a record is signed by a key that an unsigned registry change added: it counts for "
                             "nothing",
    "record-dated-before-key": "a record is dated before its key was added to lessons/runners.yaml",
    "record-dated-after-commit": "a record is dated later than the commit that first added it (plus a small "
                                 "skew), or than now",
}
"""Rule id → what it catches, for the audit's rule list."""


def effective(tree: TreePolicy | None) -> TrustPolicy:
    """The policy in force: the code's (:data:`POLICY`), tightened to ``signed-only`` when the
    tree's registry says so; a registry can never loosen it."""
    return "signed-only" if tree == "signed-only" else POLICY


def counts(trust: Trust, policy: TrustPolicy = POLICY) -> bool:
    """Whether a record with this trust may back a lesson, a claim or the audit's acceptance."""
    return trust == "verified" or (trust == "unsigned" and policy == "unsigned-counts")


def issues(verification: Verification, policy: TrustPolicy = POLICY, *, legacy: bool = False) -> list[tuple[str, str]]:
    """The audit's (rule id, reason) pairs for one record's verification: none when it counts, nor
    for an unsigned record that is ``legacy``: first committed before the tree registered its first
    key, or not committed at all (a working tree's own; ``judge.trust.standing.legacy``). Such
    a record counts toward nothing under ``signed-only`` (:func:`counts`); an unsigned record
    committed after the first key is a finding, and so is any unsigned record in a tree whose
    history cannot be read."""
    if counts(verification.trust, policy) or (legacy and verification.trust == "unsigned"):
        return []
    return [(FINDING[verification.trust], verification.reason)]


# --- the funnel: examined records in, the ones that count out -------------------------


def refusal(item: Examined) -> str | None:
    """Why this record does not count, in the words decisions print; None when it counts."""
    if item.seal != "intact":
        return "seal broken"
    if not counts(item.trust, effective(item.policy)):
        return f"signature {item.trust}"
    return None


def admits(item: Examined) -> bool:
    """Whether the record counts as evidence."""
    return refusal(item) is None


def examined(records: Iterable) -> list[Examined]:
    """Records as ``Examined`` (plain records are examined here, once each, as unsigned)."""
    return [r if isinstance(r, Examined) else examine(r) for r in records]


def split(items: Iterable[Examined]) -> tuple[list[Any], dict[str, list[str]]]:
    """(the records that count, oldest first by ``standing.age``: the last of any selection of them is its
    newest; refusal → run ids of those that do not)."""
    good: list[Examined] = []
    refused: dict[str, list[str]] = {}
    for item in items:
        why = refusal(item)
        if why is None:
            good.append(item)
        else:
            refused.setdefault(why, []).append(item.record.run_id)
    return [item.record for item in sorted(good, key=standing.age)], refused


def ignored_note(refused: dict[str, list[str]]) -> str:
    """`` (ignored, seal broken: a, b)``, or empty."""
    return "".join(f" (ignored, {why}: {', '.join(ids)})" for why, ids in refused.items())


def ignored_ids(refused: dict[str, list[str]]) -> tuple[str, ...]:
    return tuple(i for ids in refused.values() for i in ids)
