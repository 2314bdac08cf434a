"""Plausibility: signals that a record's GPU may not be what it says (``judge.plausibility``), never proof.

Each signal kind is one rule, ``plausibility-<kind>``. A signal is a finding on its record
unless it is settled: explained by a lesson's front matter (``plausibility:``, the signal
and its subject) or corroborated by a second runner key's agreeing record. A lesson whose
accepted evidence holds an unsettled signal is also not publishable (``gate.Decision.doubts``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import get_args

from tileproof.judge import plausibility
from tileproof.judge.audit.audit_rules import rule
from tileproof.judge.audit.result import Issue
from tileproof.records.models import PlausibilityNote, PlausibilitySignal
from tileproof.records.store import Examined

CATCHES: dict[PlausibilitySignal, str] = {
    "shim-path": "a PATH or PYTHONPATH entry where a fake nvidia-smi or cupy is cheapest to put (relative, inside "
                 "the checkout, or a scratch folder the runner's first record did not have)",
    "smi-clock": "an nvidia-smi transcript whose own clock is further from the record's time than any time zone",
    "launch-too-fast": "a run or bench that reports GPU work in less time than launching it on a GPU takes",
    "host-facts": "host facts (system, machine, kernel release, CPU count) unlike the runner key's first record",
    "gpu-two-hosts": "a GPU uuid recorded by two runner keys (or by a key and unsigned records)",
}
RULE_OF: dict[PlausibilitySignal, str] = {kind: rule(f"plausibility-{kind}", f"{CATCHES[kind]}: "
                                                     f"{plausibility.NOT_PROOF}, unless a lesson explains it or a "
                                                     f"second runner key's record agrees")
                                          for kind in get_args(PlausibilitySignal)}


def plausibility_issues(item: Examined, items: Iterable[Examined],
                        flagged: Mapping[str, tuple[plausibility.Signal, ...]],
                        notes: Iterable[PlausibilityNote]) -> list[Issue]:
    """(rule id, reason) for each of the record's signals that no note explains and no agreeing record
    of another runner key settles."""
    return [(RULE_OF[s.kind], f"{s} (fix: run it again under a second registered runner key, or explain it in "
                              f"the front matter of the lessons it backs: plausibility: signal {s.kind}, "
                              f"subject '{s.subject}')")
            for s in plausibility.unsettled(item, items, flagged, notes)]
