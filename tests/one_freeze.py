"""One real ``pip freeze`` per Python environment for the in-process sessions of a test process.

Every ``run`` session records ``pip freeze --all`` (``runner.capture.pip_freeze``): a Python process of its own that
costs about 0.3 s of CPU, the same transcript for every session of a test process in one environment. The
``pip_freeze_once`` fixture (or ``frozen`` patched in by a module's own fixture) runs the real command once per
environment (the interpreter and the variables that change what it lists: ``PYTHONPATH``, ``PYTHONHOME``,
``PYTHONNOUSERSITE``) and hands each later session the same bytes and redaction counts. A session's own folder, its
working directory, holds no distribution. What the capture itself does (the command, its redaction, its transcript
read back) is tested in tests/test_capture.py and tests/test_redact.py, and by every session started as a process of
its own.
"""

from __future__ import annotations

import os
import sys

import pytest

from tileproof.records.redact import RedactionRule
from tileproof.runner import capture

_REAL = capture.pip_freeze
_FROZEN: dict[tuple[str | None, ...], tuple[bytes, dict[RedactionRule, int]]] = {}


def frozen() -> tuple[bytes, dict[RedactionRule, int]]:
    """``capture.pip_freeze``'s answer, the real command run once per environment of this process."""
    key = (sys.executable, *(os.environ.get(v) for v in ("PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE")))
    if key not in _FROZEN:
        _FROZEN[key] = _REAL()
    text, counts = _FROZEN[key]
    return text, dict(counts)


@pytest.fixture
def pip_freeze_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture, "pip_freeze", frozen)
