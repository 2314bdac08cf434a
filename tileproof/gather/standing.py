"""Which records' signatures are findings: the one judgement ``audit`` and ``verify`` both print.

``judge.trust.issues`` says, for one record, whether its verification is a finding; an
unsigned record is none when it is legacy (first committed while the tree's registry listed
no key) or not committed at all (a working tree's own). Which records those are is read from
git history once (``runner.history.unsigned_standing``). Both commands call :func:`trust_issues`,
so a pristine clone (legacy unsigned records, signed ones after) is clean for both.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tileproof.judge import trust
from tileproof.judge.audit.result import Issue
from tileproof.records.registry import Verification
from tileproof.runner import history


def trust_issues(root: Path, verified: Mapping[str, Verification],
                 policy: trust.TrustPolicy) -> dict[str, list[Issue]]:
    """Record file (``runs/<name>.json``) → the (rule id, reason) pairs ``policy`` has against its
    verification; an empty list for a record that counts or is legacy."""
    unsigned = [file for file, v in verified.items() if v.trust == "unsigned"]
    legacy, uncommitted = history.unsigned_standing(root, unsigned) if unsigned else (set(), set())
    return {file: trust.issues(v, policy, legacy=file in legacy | uncommitted) for file, v in verified.items()}
