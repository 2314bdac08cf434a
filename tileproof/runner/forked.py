"""One forked helper process for pure byte work (hashing, sealing), so a reader command can use a
second CPU. Only the runner starts processes: a feature asks for this helper instead of importing
``multiprocessing`` itself (the import contract in pyproject.toml keeps it so)."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any


class ForkedHelper:
    """One forked process when ``wanted`` and it can pay off (Linux's fork, 2+ CPUs); otherwise each
    job runs inline when its result is asked for. The job must be a pure function of its arguments.

    The process serves one job: once its result is taken, the process ends (:meth:`close`). What it built
    for the job (an audit's byte pass holds the index rows of 400,000 files) is then freed at once, not kept
    until the command ends beside everything the main process goes on to build."""

    def __init__(self, wanted: bool):
        self.pool = None
        if wanted and (os.cpu_count() or 1) > 1 and "fork" in multiprocessing.get_all_start_methods():
            self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        """A callable returning ``fn(*args)``: computed meanwhile, or on call. Called once, it ends the process
        (its result is kept for a second call)."""
        if self.pool is None:
            return lambda: fn(*args)
        future = self.pool.submit(fn, *args)

        def result() -> Any:
            try:
                return future.result()
            finally:
                self.close()
        return result

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None
