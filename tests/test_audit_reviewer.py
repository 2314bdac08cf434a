"""``judge.audit.rules.reviewer``: which pin moves are notices (findings under ``--strict``), as a table."""

from __future__ import annotations

import pytest

from tileproof.judge.audit.rules import reviewer
from tileproof.judge.trust.trust_root import PinMove, Root

A, B, C = "a" * 40, "b" * 40, "c" * 40


def move(after: str | None, before: str | None = B, in_range: bool = True) -> PinMove:
    return PinMove("d" * 40, before, after, "a root reset, reviewed", in_range)


CASES = {
    "tree-pin-moved-in-range": (move(A), Root(".ci/trust-root", A, commit=A), True),
    "moved-before-the-range": (move(A, in_range=False), Root(".ci/trust-root", A, commit=A), False),
    "rewritten-around-the-same-pin": (move(B), Root(".ci/trust-root", B, commit=B), False),
    "moved-to-the-reviewers-own-root": (move(A), Root("--trust-root", A, commit=A), False),
    "moved-to-the-environments-root": (move(A), Root("$TILEPROOF_TRUST_ROOT", A, commit=A), False),
    "moved-elsewhere-than-the-reviewers-root": (move(C), Root("--trust-root", A, commit=A), True),
    "removed-under-trust-on-first-use": (move(None), None, True),
}


@pytest.mark.parametrize("pin, root, noticed", CASES.values(), ids=CASES.keys())
def test_which_pin_moves_are_notices(pin, root, noticed):
    found = reviewer.pin_issues([pin], root)
    assert [rule for rule, _why in found] == ([reviewer.PIN_MOVED] if noticed else [])
    for _rule, why in found:
        assert why.startswith(f"pin moved in {pin.commit[:12]}: .ci/trust-root ")


def test_since_issues_name_the_commit_and_what_to_do():
    rule, why = reviewer.since_nothing("file:/tmp/head", A, at_head=True)
    assert rule == "since-judged-nothing" and why.startswith(f"--since file:/tmp/head ({A[:12]}) judged 0 records")
    rule, why = reviewer.since_not_ancestor(B, B, A)
    assert rule == "since-not-ancestor" and f"is not an ancestor of HEAD ({A[:12]})" in why
