"""Which records count as evidence: the one funnel every decision goes through.

A record counts only when what was checked about it when it was loaded
(``store.Examined``) says so. Today that is its seal: a record whose seal is not
the digest of its content (edited after writing) or that has no seal never
counts, anywhere. A signature check plugs in here and nowhere else: give
``Examined`` the signature's status when loading, and add its test to
``refusal``; the rows, the performance claims and the claims all follow.
"""

from __future__ import annotations

from typing import Any, Iterable

from tileproof.records.store import Examined, examine

def refusal(item: Examined) -> str | None:
    """Why this record does not count, in the words decisions print; None when it counts."""
    if item.seal != "intact":
        return "seal broken"
    return None


def counts(item: Examined) -> bool:
    """Whether the record counts as evidence."""
    return refusal(item) is None


def examined(records: Iterable) -> list[Examined]:
    """Records as ``Examined`` (plain records are examined here, once each)."""
    return [r if isinstance(r, Examined) else examine(r) for r in records]


def split(items: Iterable[Examined]) -> tuple[list[Any], dict[str, list[str]]]:
    """(the records that count, refusal → run ids of those that do not)."""
    good: list[Any] = []
    refused: dict[str, list[str]] = {}
    for item in items:
        why = refusal(item)
        if why is None:
            good.append(item.record)
        else:
            refused.setdefault(why, []).append(item.record.run_id)
    return good, refused


def ignored_note(refused: dict[str, list[str]]) -> str:
    """`` (ignored, seal broken: a, b)``, or empty."""
    return "".join(f" (ignored, {why}: {', '.join(ids)})" for why, ids in refused.items())


def ignored_ids(refused: dict[str, list[str]]) -> tuple[str, ...]:
    return tuple(i for ids in refused.values() for i in ids)
