"""A record's standing in time: judged by the commit that first added it, never by its own ``created``.

A signer chooses the ``created`` it signs; git history, which every clone carries, says when a record entered
the tree. :func:`standing` (the one decision the publish decision and the audit use) refuses a record whose key
history does not vouch for at that time (a revoked key's record counts only when that commit is an ancestor of the
revocation, whatever the dates and merges); :func:`age` orders records for "the newest". The rules (each refusal,
the clock skew allowed, the order): docs/threat-model.md, "Which records count".
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from datetime import datetime, time, timedelta, timezone

from tileproof.judge.trust.trust_root import KeyFacts, TrustState
from tileproof.records.store import Examined
from tileproof.records.trust.runner_keys import Verification
from tileproof.records.trust.trust_history import FirstCommit

SKEW = timedelta(minutes=15)
"""How far a record's ``created`` may run ahead of the commit that first added it (or of now): clocks of
the runner and of whoever committed disagree by seconds when both keep time (NTP), minutes when not."""

UNCOMMITTED = sys.maxsize
"""The position of a record no commit added yet: after every committed one."""


def standing(verification: Verification, record, first: FirstCommit | None, keys: Mapping[str, KeyFacts],
             now: datetime) -> Verification:
    """The record's trust once history is asked (see the module docstring). Only a ``verified`` signature
    can lose its standing here; every other verification is returned as it is."""
    key = keys.get(verification.keyid or "")
    if verification.trust != "verified" or key is None:
        return verification
    who = f"key {key.keyid[:16]}… ({key.owner})"

    def refused(trust, reason: str) -> Verification:
        return Verification(trust, key.keyid, f"{who}: {reason}")

    if not key.trusted_kinds:
        return refused("unendorsed-key", f"counts for nothing: {key.untrusted_why}")
    if record.kind not in key.trusted_kinds:
        return refused("kind-not-allowed", f"may not sign {record.kind} records: {key.untrusted_why}")
    if key.revoked_in is not None and (first is None or first.commit not in key.before_revocation):
        where = f"first committed in {first.commit[:12]}" if first else "not committed"
        return refused("revoked", f"revoked in {key.revoked_in[:12]}; the record is {where}, after that or beside "
                                  f"it (not an ancestor of it: only records committed before a revocation stay)")
    if key.revoked_since is not None and record.created >= key.revoked_since:
        return refused("revoked", f"revoked since {key.revoked_since.isoformat()}; the record is dated "
                                  f"{record.created.isoformat()}")
    if key.added is not None and record.created < datetime.combine(key.added, time(), timezone.utc):
        return refused("dated-before-key", f"added {key.added.isoformat()}; the record is dated "
                                           f"{record.created.isoformat()}, before its key existed here")
    if first is None or first.time > now:
        bound, what = now, "now"
    else:
        bound, what = first.time, f"commit {first.commit[:12]}, which first added it"
    if record.created > bound + SKEW:
        return refused("dated-after-commit", f"the record is dated {record.created.isoformat()}, later than {what} "
                                             f"({bound.isoformat(timespec='seconds')}) plus {_minutes(SKEW)}")
    return verification


def _minutes(delta: timedelta) -> str:
    return f"{int(delta.total_seconds() // 60)} min"


def legacy(first: FirstCommit | None, state: TrustState) -> bool:
    """Whether an unsigned record is from before this tree signed: first committed in a commit before the
    first registry with a key (an ancestor of it), or not committed at all (a working tree's own). Without
    history nothing is legacy."""
    if state.legacy is None:
        return False
    return first is None or first.commit in state.legacy


def age(item: Examined) -> tuple:
    """The order of "newest": first-commit position, then ``created``, then run id (see the module docstring)."""
    position = item.first.position if item.first is not None else UNCOMMITTED
    return (position, item.record.created, item.record.run_id)
