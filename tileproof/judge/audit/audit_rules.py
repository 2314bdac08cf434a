"""The audit's rules: each registered once, by the module that implements it.

``rule(id, catches)`` names a rule and what it catches (the reports list them).
``check(subject)`` registers a pure function that the orchestrator calls on
every record of that subject (``RunRecord``, ``CompileRecord``...) with a
``Context`` (parsed transcripts, known run ids, a memo for shared facts),
returning ``Issue``s. Every module in ``judge/audit/rules/`` is imported by
``rules.load()``, so a new rule is one new function (or one new file) there.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from tileproof.judge.audit.result import Issue

RULES: dict[str, str] = {}
"""Stable rule ids → what each one catches, ordered by id once ``rules.load()`` ran (listed at the end of both
reports)."""

CHECKS: dict[type, list[Callable]] = {}
"""Record type → the per-record checks registered for it."""


def rule(rule_id: str, catches: str) -> str:
    """Register a rule id (once) and return it."""
    if rule_id in RULES and RULES[rule_id] != catches:
        raise ValueError(f"rule {rule_id} registered twice with different texts")
    RULES[rule_id] = catches
    return rule_id


def check(subject: type):
    """Register ``fn(record, ctx) -> list[Issue]`` for every record of type ``subject``."""
    def register(fn):
        CHECKS.setdefault(subject, []).append(fn)
        return fn
    return register


@dataclass
class Context:
    """What a per-record check may read besides its record: nothing from disk."""

    known: AbstractSet[str]
    """Run ids of every record that validated."""
    query_rows: Callable[[object], list[dict] | None]
    """A transcript → its nvidia-smi rows parsed, None when no trustworthy transcript."""
    freeze: Callable[[object], tuple[dict, set] | None]
    """A transcript → (pip freeze parsed, unpinned names), None when no trustworthy transcript."""
    memo: dict = field(default_factory=dict)
    """For facts many records share (one environment per session): key → issues."""

    def once(self, key, compute: Callable[[], list[Issue]]) -> list[Issue]:
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]


def run_checks(record, ctx: Context) -> list[Issue]:
    out: list[Issue] = []
    for fn in CHECKS.get(type(record), ()):
        out += fn(record, ctx)
    return out

