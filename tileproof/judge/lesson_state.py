"""A lesson's state, as ``status`` and ``publish`` both say it: one message and one exit status each.

``judge.verdict.LessonVerdict.state`` decides which state a lesson is in, from its one verdict; the commands
print ``message`` after the lesson's id and add their own detail (``status`` the first blocker's fix, ``publish``
every blocker). ``publish`` exits with ``exit_code`` (0 when it writes); ``status`` reads only and exits 0. The
tree's own problems come first, in the order ``publish`` names them: a refused input, then the trust root, then
history.
"""

from __future__ import annotations

from enum import Enum


class LessonState(Enum):
    """Where a lesson stands; each member's value is (its one message, ``publish``'s exit status)."""

    message: str
    exit_code: int

    INPUT_REFUSED = ("not ready: inputs the audit refuses", 2)
    """An input the audit refuses by what it is (a link, a FIFO, a file over its cap): no lesson is ready."""
    TRUST_BROKEN = ("not ready: the runner registry's history does not hold from the trust root", 1)
    """The registry's history does not hold from the trust root: no lesson is ready."""
    HISTORY_BROKEN = ("not ready: committed records or transcripts were deleted or edited", 1)
    """Something once committed under runs/ or evidence/ is missing or changed: no lesson is ready."""
    DRAFT = ("stays draft", 1)
    """A draft whose newest evidence does not hold yet."""
    READY = ("ready to publish", 0)
    """A draft ``publish`` would publish (``publish --dry-run`` exits 0)."""
    VALID = ("already published, its records hold", 0)
    """A published lesson whose cited records hold and which shows exactly what they give."""
    DIFFERS = ("published, but it does not show what its records give (nox -s audit fails)", 1)
    """A published lesson whose records hold but which differs from what they give."""
    WITHOUT_EVIDENCE = ("published, but its evidence no longer holds (nox -s audit fails)", 1)
    """A published lesson whose cited records no longer hold."""

    def __init__(self, message: str, exit_code: int) -> None:
        self.message = message
        self.exit_code = exit_code

    @property
    def ready(self) -> bool:
        """What ``publish --dry-run`` exits 0 on."""
        return self.exit_code == 0
