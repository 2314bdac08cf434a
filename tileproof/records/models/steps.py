"""Steps and transcripts: one subprocess as a record holds it (argv, times, exit, its streams kept under
``evidence/`` by path and digest) and how its processes were contained."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from datetime import datetime
from typing import Final, Literal, NamedTuple, TypeVar

from pydantic import model_validator

from tileproof.records.base import Model, found_in
from tileproof.records.models.common import Versioned, counter
from tileproof.records.redact import RedactionRule


class Transcript(Model):
    """A file under ``evidence/``, referenced by repo-relative path and digest."""

    path: str
    sha256: str
    bytes: int

    def ref(self) -> TranscriptRef:
        return TranscriptRef(self.path, self.sha256, self.bytes)


H = TypeVar("H")


_SHARED: dict = {}


SHARED_MAX = 1 << 16


def share(value: H) -> H:
    """One object for equal values that many records hold (a session's transcripts, a program's sources, a runner's
    host): records kept as plain values hold one of each distinct value, not one per record. ``value`` must be hashable
    and immutable; the table is emptied when it holds ``SHARED_MAX`` values (records come a session at a time)."""
    if len(_SHARED) >= SHARED_MAX:
        _SHARED.clear()
    return _SHARED.setdefault(value, value)


class TranscriptRef(NamedTuple):
    """A ``Transcript``'s three values, without its model: what the audit keeps of each transcript the records
    reference (a model is ten times the size)."""

    path: str
    sha256: str
    bytes: int


class FileDigest(Model):
    """A file the record attests (program source, lesson, binary)."""

    path: str
    sha256: str


class StreamCut(Model):
    """Where a captured stream was cut: its first ``kept_bytes`` of ``total_bytes`` are kept."""

    kept_bytes: int
    total_bytes: int


Containment = Literal["pid-namespace", "cgroup", "marker"]
"""How a step's processes were kept together and ended (``runner.process``, best first):
``pid-namespace``: its own PID namespace, whose end the kernel makes the end of every process in it;
``cgroup``: its own cgroup v2 folder, ended with ``cgroup.kill``; ``marker``: the fallback, a marker
variable and the parent chain (a descendant that clears its environment and leaves the session escapes
it, and after ``kill -9`` of tileproof only the direct child dies)."""


Isolation = Literal["separate-user", "user-namespace", "none"]
"""The wall a step's program ran behind (``runner.wall``; docs/containment.md, "The wall"): ``separate-user``:
tileproof is root and the program ran as a separate unprivileged user in its own PID and mount namespace;
``user-namespace``: in a user namespace without host root (and its own PID and mount namespace); both with
``no_new_privs``, an empty capability bounding set, a read-only view without the signing key's folder and a
private scratch. ``none``: this host could build neither, and the program ran as tileproof's own user with the
whole filesystem in view (a record of it is signed only by a key whose registry entry allows unisolated runs)."""


STEP_VERSION: Final = 3
"""``Step.step_version`` of the steps written now: 3 records the step's ``isolation``; 2 records the step's
``containment``; 1 (steps written before, field absent; still read) was always contained by the marker."""


class Step(Versioned):
    """One subprocess: argv as a list, never a shell string."""

    VERSION_FIELD = "step_version"
    step_version: Literal[1, 2, 3] = counter(STEP_VERSION)
    """3 (``STEP_VERSION``) for steps written now: ``isolation`` says which wall its program ran behind; 2:
    ``containment`` says how its processes were contained; 1 (written before, field absent): no ``containment``
    (the marker was the only one then)."""
    name: str
    argv: list[str]
    started: datetime
    ended: datetime
    duration_s: float
    exit_code: int | None
    """None when killed at the timeout."""
    timed_out: bool = False
    stdout: Transcript
    stderr: Transcript
    stdout_cut: StreamCut | None = None
    """Set when stdout passed the capture cap: the transcript holds only its head."""
    stderr_cut: StreamCut | None = None
    """Set when stderr passed the capture cap."""
    redactions: dict[RedactionRule, int] = {}
    """Credentials replaced before writing, per rule (never the values): both streams and a check report."""
    strays_killed: int = 0
    """Processes of the step still alive when it ended outside the program's own process group (detached
    grandchildren: ``setsid``, ``setpgid``), killed with it."""
    containment: Containment | None = None
    """From step_version 2: how its processes were kept together and ended (``Containment``)."""
    isolation: Isolation | None = None
    """From step_version 3: the wall its program ran behind (``Isolation``; every step of a record is a program,
    a compiler or a probe reading untrusted input, and runs behind the wall where one can be built)."""

    @model_validator(mode="after")
    def _fits_version(self) -> Step:
        if (self.step_version >= 2) != (self.containment is not None):
            raise ValueError("step_version 2 and later, and only they, say how the step was contained (containment)")
        if (self.step_version >= 3) != (self.isolation is not None):
            raise ValueError("step_version 3, and only it, says which wall the step ran behind (isolation)")
        return self


def steps_of(value) -> Iterator[Step]:
    """Every step a record (or any part of one) holds."""
    for step, _ in found_in(value, (Step,)):
        yield typing.cast(Step, step)


def unisolated(record) -> bool:
    """Whether a program step of the record ran without a wall (``Step.isolation`` ``none``)."""
    return any(step.isolation == "none" for step in steps_of(record))
