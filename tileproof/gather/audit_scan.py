"""The audit's walk of a folder, each refused entry an ``input-*`` issue (``records.walk``, whose refusals
``judge.audit.rules.inputs`` words), and the collector paused while a command holds many records."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager

from tileproof.judge.audit.result import Issue
from tileproof.judge.audit.rules import inputs
from tileproof.records import walk as plain_walk
from tileproof.records.errors import InputRefused


def refusing(refused: dict[str, Issue]) -> plain_walk.Refuse:
    """A walk's ``refuse`` that keeps each refusal in ``refused`` as its ``input-*`` issue."""
    def refuse(rel: str, error: InputRefused) -> None:
        refused[rel] = inputs.refused_issue(error)
    return refuse


def entries(root: str, folder: str, refused: dict[str, Issue]) -> Iterator[tuple[str, os.DirEntry]]:
    """``records.walk.entries``, each refused entry kept in ``refused`` as its issue."""
    return plain_walk.entries(root, folder, refusing(refused))


def walk(root: str, folder: str, refused: dict[str, Issue],
         stats: dict[str, os.stat_result] | None = None) -> Iterator[str]:
    """``records.walk.walk``, each refused entry kept in ``refused`` as its issue."""
    return plain_walk.walk(root, folder, refusing(refused), stats)


@contextmanager
def paused_gc():
    """No cyclic garbage collection inside (reference counting still frees). What is alive at the end is frozen
    (``gc.freeze``) before the collector is on again: else its first pass after this walks every object the
    command kept, to find no cycle among records and their models (docs/benchmarks.md, "The catalog")."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.enable()


