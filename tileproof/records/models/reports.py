"""The check report a program writes (``--report``), and how tileproof names a check it verified outside
the program or an exception that ended it."""

from __future__ import annotations

from typing import Literal

from tileproof.records.base import Model
from tileproof.records.models.common import Number
from tileproof.records.schemas import schema

REPORT_VERSION = 1
"""The check-report version the programs write (see kernels/harness.py)."""


class DeviceId(Model):
    name: str
    """Device name as the program's runtime reports it."""
    compute_capability: str
    """``major.minor``, e.g. ``9.0``."""


class FirstFailure(Model):
    index: list[int]
    """Row-major first failing element."""
    got: Number
    want: Number


class Check(Model):
    name: str
    """Check name; also the key of the tolerance table (kernels/tolerances.py)."""
    shape: list[int]
    dtype: str
    rtol: float
    atol: float
    checked: int
    """Elements compared."""
    mismatches: int
    max_abs_err: Number | None
    max_rel_err: Number | None
    first_failure: FirstFailure | None
    passed: bool


@schema("check-report", REPORT_VERSION)
class CheckReport(Model):
    """What a program writes to ``--report``: its checks as structured data."""

    report_version: Literal[1]
    program: str
    seed: int | None
    device: DeviceId | None
    gate: Literal["ok", "below-sm80", "no-gpu"]
    gate_message: str
    checks: list[Check]
    passed: bool


OutsideStatus = Literal["passed", "failed", "unverified"]
"""tileproof's own verdict on one check: ``passed`` and ``failed`` from its own float64 reference,
``unverified`` when the program handed over nothing it could recompute."""


OutsideProblem = Literal["mismatch", "non-finite", "all-equal", "refused", "reference-error", "no-outputs",
                         "no-reference", "withheld-input", "checker-error"]
"""Why a check is not ``passed`` outside: elements beyond the bound, a NaN or Inf output, an all-equal output
where the reference is not, handed-over files refused as input (a link, over the cap, not what the manifest
says), the lesson's reference raising, nothing handed over, no reference declared, an input not handed over,
the checker itself failing."""


class ProgramFailure(Model):
    """The exception that ended a Python program (or an export), as tileproof's launcher caught it
    (``toolchain.launch``): read by type, never parsed back out of the traceback's text."""

    type: str
    """The exception's class, qualified by its module unless it is a builtin: ``TypeError``,
    ``cuda.tile._exception.TileCompilerExecutionError``."""
    message: str
    """``str(exception)``, whole (tables show its first line, ``first_line``)."""

    @property
    def first_line(self) -> str:
        """The message's first non-blank line ("" when it has none)."""
        return next((ln.strip() for ln in self.message.splitlines() if ln.strip()), "")

    def __str__(self) -> str:
        return f"{self.type}: {self.first_line}" if self.first_line else self.type
