"""A failed record of the release axis is settled the way a pass is: by a second runner key's record that agrees.

The records are this repository's own: cuda-tile 1.3.0 ended ``kernels/fused.py`` with a ``TileTypeError`` on the
lent H200 twice (2026-12-01, under two runner keys), each time from a folder under ``/tmp`` on ``PYTHONPATH`` that
the ``shim-path`` signal flags. A run of the same source under a third key, from a wheel unpacked into its
digest-named folder (no signal), that fails the same way under the same release and tileiras settles them; a failure
of another class, release, tileiras or source, a failed check, the same key's failure, a pass, or the other flagged
session's record does not.
"""

from __future__ import annotations

import dataclasses

import pytest
from test_plausibility import OTHER_KEY, altered, real, smi_clocks

from tileproof.judge import plausibility, preselect
from tileproof.judge.audit.rules.plausibility import plausibility_issues
from tileproof.records.models import ProgramFailure, ReleaseFolder

FIRST = "20261201T221047Z-run-9ca652e8"
"""The first record of the runner key of the 1.3.0 run below (its baseline: /tmp/gpu-node/site only)."""
FAILED = "20261201T221118Z-run-40393580"
"""cuda-tile 1.3.0, kernels/fused.py: TileTypeError, from /tmp/tileproof-releases.t8iZMb/cuda-tile-1.3.0."""
FAILED_AGAIN = "20261201T230553Z-run-121d1e4d"
"""The same run on the next lent H200 under another key, from /tmp/tileproof-releases.BrwYzj/cuda-tile-1.3.0."""
FIRST_AGAIN = "20261201T230508Z-run-f29086ff"
"""The first record of that other key."""
WHEEL_SHA = "a" * 64
PINNED = frozenset({("1.3.0", WHEEL_SHA)})
"""The lock's hash of the 1.3.0 wheel the new run unpacked."""


@pytest.fixture(scope="module")
def records():
    return {r: real(r) for r in (FIRST, FAILED, FIRST_AGAIN, FAILED_AGAIN)}


def new_key_run(item, **update):
    """``item`` as a third runner key's run of the same source writes it the digest way: the wheel unpacked into a
    folder named by its sha256, first on PYTHONPATH, named in the record; another GPU."""
    rec = item.record
    folder = f"/tmp/tileproof-releases/{WHEEL_SHA}"
    gpu = rec.environment.gpu.model_copy(update={"uuid": "GPU-third-key"})
    env = rec.environment.model_copy(update={"gpu": gpu, "env": {
        **rec.environment.env, "PYTHONPATH": f"{folder}:/tmp/gpu-node/site"}})
    return altered(item, keyid=OTHER_KEY, days=3, environment=env, run_version=5,
                   release_folder=ReleaseFolder(path=folder, sha256=WHEEL_SHA), **update)


def judged(records, *extra):
    items = [records[FIRST], records[FAILED], *extra]
    flagged = plausibility.signals(items, smi_clocks(*items), PINNED)
    return items, flagged


def settled(records, *extra) -> bool:
    items, flagged = judged(records, *extra)
    old = records[FAILED]
    assert old.record.run_id in flagged  # the old record's own signal: PYTHONPATH under /tmp, no digest
    return plausibility.unsettled(old, items, flagged, []) == [] and plausibility_issues(old, items, flagged, []) == []


def test_the_same_failure_under_a_second_key_settles_the_old_record(records):
    again = new_key_run(records[FAILED])
    items, flagged = judged(records, again)
    assert again.record.run_id not in flagged  # its folder is the release axis's own
    assert plausibility.agreement(again.record) == plausibility.agreement(records[FAILED].record)
    assert settled(records, again)
    facts = [dataclasses.replace(i, record=preselect.facts_of(i.record)) for i in items]
    assert again.record.run_id in preselect.agreeing([records[FAILED]], facts)


@pytest.mark.parametrize("what", ["class", "release", "tileiras", "source", "failed-check", "same-key", "passed"])
def test_any_other_outcome_or_source_settles_nothing(records, what):
    rec = records[FAILED].record
    tile = rec.cuda_tile
    change = {
        "class": {"failure": ProgramFailure(type="TypeError", message="another failure")},
        "release": {"cuda_tile": tile.model_copy(update={"version": "1.4.0"})},
        "tileiras": {"cuda_tile": tile.model_copy(update={"tileiras": "13.2.51"})},
        "source": {"sources": [s.model_copy(update={"sha256": "b" * 64}) if s.path == rec.program else s
                               for s in rec.sources]},
        "failed-check": {"failure": None},
        "passed": {"verdict": "passed", "failure": None},
    }.get(what, {})
    other = new_key_run(records[FAILED], **change)
    if what == "same-key":
        other = dataclasses.replace(other, verification=records[FAILED].verification)
    assert not settled(records, other)


def test_two_flagged_failures_do_not_settle_each_other(records):
    """Both 2026-12-01 sessions failed the same way under two keys, but each has its own signal: a record with a
    signal vouches for nothing, so those two stay as they are until an unflagged run agrees."""
    again = records[FAILED_AGAIN]
    assert plausibility.agreement(again.record) == plausibility.agreement(records[FAILED].record)
    assert again.verification.keyid != records[FAILED].verification.keyid
    items, flagged = judged(records, records[FIRST_AGAIN], again)
    assert again.record.run_id in flagged
    assert not settled(records, records[FIRST_AGAIN], again)
