"""What each rule of the judge that picks records from many needs, declared at the rule (:func:`needs`), so that the
preselection (``judge.preselect``), which reads in full only the records a verdict can depend on, has one twin for
each need and changes with it.

A rule that picks records states what it reads as a :class:`Need`; ``judge.preselect.CHOOSERS`` keeps, for each
need, the one function that chooses those records from every record's facts, and the preselection is the union of
its choosers. ``tests/test_preselect.py`` holds the two lists to each other (no need without its twin, no twin
without a rule) and shows, need by need, that dropping the twin changes a verdict the suite's trees judge; the
suite's oracle (``tests/conftest.py``, ``chosen_records_judge_alike``) compares the verdicts over the chosen records
with those over every record for every tree it loads, the tamper suite's among them."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import TypeVar


class Need(str, Enum):
    """The records a rule reads, as the preselection keeps them."""

    NEWEST_OF_CLASS = "newest-of-class"
    """A row's newest counted run record of its program in each class (below 8.0 or not, a GPU or none, the cuda-tile
    release), and past a newest whose verdict is ``unverified`` every older one of its class down to the first that
    is not."""
    UNCOUNTED = "uncounted"
    """Every run record of a row's program that does not count (the row's reason names each)."""
    CITED = "cited"
    """A published lesson's cited records: its results' and its verified releases'."""
    NEWER_THAN_CITED = "newer-than-cited"
    """Every counted run record of a published lesson's programs newer than the oldest it cites."""
    OTHER_KINDS = "other-kinds"
    """Every bench, claims and compile record (performance claims, claims verdicts, compile-derived tables)."""
    FIRST_OF_RUNNER_AND_GPU = "first-of-runner-and-gpu"
    """Each runner key's first counted GPU record and each GPU's first (the plausibility signals' baselines)."""
    AGREEING = "agreeing"
    """The records of another runner key that could settle a flagged record's signal by agreeing with it."""


_DECLARED: dict[Need, list[str]] = {}
F = TypeVar("F", bound=Callable)


def needs(*wanted: Need) -> Callable[[F], F]:
    """Declares, at a rule, the records it reads (:class:`Need`): the preselection keeps them."""
    def mark(rule: F) -> F:
        for need in wanted:
            _DECLARED.setdefault(need, []).append(f"{rule.__module__}.{rule.__qualname__}")
        return rule
    return mark


def declared() -> dict[Need, tuple[str, ...]]:
    """Each need, and the rules that declared it (of the modules imported)."""
    return {need: tuple(rules) for need, rules in _DECLARED.items()}
