"""The catalog's use of the runner's one forked helper (``runner.forked``): a job run there lets go of the indexes
the forked process opened (their loaded rows: what the job learned is saved already) before its result is pickled
and sent, so both are never held at once beside the parent's copy of the result being made."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from tileproof.catalog import index
from tileproof.runner.forked import ForkedHelper


class Background:
    """``runner.forked.ForkedHelper`` (one forked process when ``wanted`` and it can pay off, else inline), each job
    closing the indexes its process opened once it is done there."""

    def __init__(self, wanted: bool):
        self._helper = ForkedHelper(wanted)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        """``ForkedHelper.submit`` of ``fn(*args)``."""
        return self._helper.submit(_released_after, os.getpid(), fn, *args)

    @property
    def pool(self) -> Any:
        """The forked process's pool while it runs (None: jobs run inline, or it ended)."""
        return self._helper.pool

    def close(self) -> None:
        self._helper.close()


def _released_after(parent: int, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; in a forked process (not ``parent``), its indexes closed after."""
    try:
        return fn(*args)
    finally:
        if os.getpid() != parent:
            index.release()
