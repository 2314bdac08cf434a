"""judge.trust.standing: a record's standing judged by the commit that first added it (a table of cases), and
the order of "the newest"."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta, timezone

import pytest
from signing_keys import real_run

from tileproof.judge import trust
from tileproof.judge.trust import standing
from tileproof.judge.trust.trust_root import KeyFacts, TrustReport, TrustState
from tileproof.records.store import examine, seal_of
from tileproof.records.trust.runner_keys import Verification
from tileproof.records.trust.trust_history import FirstCommit

RECORD = real_run()
"""A real H200 run record (kind run), dated ``RECORD.created``."""
T = RECORD.created
NOW = T + timedelta(days=2)
KEY = "a" * 64
VERIFIED = Verification("verified", KEY, "signed by key aaaa… (h200)")
FACTS = KeyFacts(KEY, "h200", frozenset({"run", "session"}), added=T.date() - timedelta(days=1))


def sealed(rec):
    return rec.model_copy(update={"seal": seal_of(rec)})


def committed(at: datetime, commit: str = "c" * 40, position: int = 5) -> FirstCommit:
    return FirstCommit(commit, position, at)


CASES = {
    "committed-after-it-was-made": (FACTS, committed(T + timedelta(hours=1)), "verified"),
    "within-the-skew": (FACTS, committed(T - standing.SKEW + timedelta(seconds=1)), "verified"),
    "dated-after-its-first-commit": (FACTS, committed(T - standing.SKEW - timedelta(seconds=1)), "dated-after-commit"),
    "uncommitted-dated-now": (FACTS, None, "verified"),
    "forged-commit-date-in-the-future": (FACTS, committed(NOW + timedelta(days=900)), "verified"),
    "key-added-after-the-record": (replace(FACTS, added=T.date() + timedelta(days=1)), committed(NOW),
                                   "dated-before-key"),
    "unendorsed-key": (replace(FACTS, trusted_kinds=frozenset(), untrusted_why="commit c granted it unsigned"),
                       committed(NOW), "unendorsed-key"),
    "kind-granted-unsigned": (replace(FACTS, trusted_kinds=frozenset({"session"}), untrusted_why="widened"),
                              committed(NOW), "kind-not-allowed"),
    "first-added-after-the-revocation": (replace(FACTS, revoked_in="r" * 40, revoked_since=T + timedelta(days=9),
                                                 before_revocation=frozenset({"b" * 40})),
                                         committed(NOW), "revoked"),
    "first-added-beside-the-revocation-dated-before-it": (replace(FACTS, revoked_in="r" * 40,
                                                                  revoked_since=T + timedelta(days=9),
                                                                  before_revocation=frozenset({"b" * 40})),
                                                          committed(T + timedelta(minutes=1)), "revoked"),
    "committed-before-the-revocation": (replace(FACTS, revoked_in="r" * 40, revoked_since=T + timedelta(days=9),
                                                before_revocation=frozenset({"b" * 40, "c" * 40})),
                                        committed(NOW), "verified"),
    "uncommitted-with-its-key-revoked": (replace(FACTS, revoked_in="r" * 40, revoked_since=T + timedelta(days=9),
                                                 before_revocation=frozenset({"c" * 40})), None, "revoked"),
    "dated-at-the-earliest-revocation": (replace(FACTS, revoked_in="r" * 40, revoked_since=T,
                                                 before_revocation=frozenset({"c" * 40})),
                                         committed(NOW), "revoked"),
}


@pytest.mark.parametrize("facts, first, expected", CASES.values(), ids=CASES.keys())
def test_standing(facts, first, expected):
    got = standing.standing(VERIFIED, RECORD, first, {KEY: facts}, NOW)
    assert got.trust == expected
    assert (got is VERIFIED) == (expected == "verified")
    if expected != "verified":
        assert got.keyid == KEY
        assert "h200" in got.reason
        assert trust.FINDING[got.trust].startswith("record-")


def test_an_uncommitted_record_dated_in_the_future_is_refused_against_now():
    future = RECORD.model_copy(update={"created": NOW + standing.SKEW + timedelta(seconds=1)})
    assert standing.standing(VERIFIED, future, None, {KEY: FACTS}, NOW).trust == "dated-after-commit"


def test_only_a_verified_signature_is_judged_here():
    unknown = Verification("unknown-key", KEY, "not in the registry")
    assert standing.standing(unknown, RECORD, None, {KEY: FACTS}, NOW) is unknown


def test_the_newest_is_the_last_committed_whatever_the_dates_say():
    """A record dated 2030 but committed first is older than a record dated now, committed after it;
    an uncommitted record is the newest; without history, ``created`` orders them (as before)."""
    future = sealed(RECORD.model_copy(update={"created": datetime(2030, 1, 1, tzinfo=timezone.utc), "run_id": "f"}))
    later = sealed(RECORD.model_copy(update={"run_id": "l"}))
    items = [examine(later, first=committed(NOW, position=7)), examine(future, first=committed(NOW, position=3))]
    assert [i.record.run_id for i in sorted(items, key=standing.age)] == ["f", "l"]
    loose = examine(RECORD.model_copy(update={"run_id": "u"}))
    assert sorted([loose, *items], key=standing.age)[-1] is loose
    plain = [examine(future), examine(later)]
    assert [i.record.run_id for i in sorted(plain, key=standing.age)] == ["l", "f"]
    assert [r.run_id for r in trust.split(items)[0]] == ["f", "l"], "trust.split orders oldest first"


def _state(legacy):
    return TrustState({}, "signed-only", legacy, legacy is not None, TrustReport(legacy is not None, "r", "x"))


@pytest.mark.parametrize("legacy, first, expected", [
    (frozenset({"a" * 40}), committed(T, "a" * 40), True),
    (frozenset({"a" * 40}), committed(T, "b" * 40), False),
    (frozenset({"a" * 40}), None, True),
    (None, None, False),
], ids=["before-the-first-key", "after-it", "uncommitted", "no-history"])
def test_legacy(legacy, first, expected):
    assert standing.legacy(first, _state(legacy)) is expected


def test_a_key_added_on_a_date_counts_from_the_start_of_that_day_utc():
    facts = replace(FACTS, added=date(T.year, T.month, T.day))
    assert standing.standing(VERIFIED, RECORD, committed(NOW), {KEY: facts}, NOW).trust == "verified"
