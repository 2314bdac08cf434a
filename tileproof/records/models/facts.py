"""Facts every record kind shares: the git state, host, toolchain and cuda-tile release a record was made
with, tileproof's own check of handed-over outputs, and the fields every record starts with (``RecordBase``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import StringConstraints, model_validator

from tileproof.records.base import Model
from tileproof.records.models.common import Number, Versioned, counter
from tileproof.records.models.reports import Check, CheckReport, OutsideProblem, OutsideStatus
from tileproof.records.models.steps import Transcript


class OutsideCheck(Model):
    """One check as tileproof checked it, outside the program (``runner.outside_check``)."""

    name: str
    status: OutsideStatus
    problem: OutsideProblem | None
    """None when ``passed``."""
    index: int | None = None
    """The check's position in the program's check report (a bench checks one name once per configuration);
    None in records that identify a check by its name alone."""
    why: str
    """One line: what was found."""
    checked: int = 0
    """Elements compared (the sampled rows' elements for a sampled output)."""
    mismatches: int = 0
    max_abs_err: Number | None = None
    max_rel_err: Number | None = None
    sampled_stride: int | None = None
    """The row stride of an output sampled by rows at a stride (``handover.RowSample``, or a ``handover.Sample``
    whose rows are a stride, its columns sampled or not); None otherwise: the whole output, or a sample whose rows
    are an index list or that samples columns only (the check's ``why`` says what was compared)."""
    output_sha256: str | None = None
    """sha256 of the whole output's C-order bytes (as handed over, or as the sample names it)."""


def pair_checks(report: CheckReport, found: list[OutsideCheck]) -> list[tuple[Check, OutsideCheck | None]]:
    """Each check of the report with tileproof's own check of it: the one of its ``index`` when that names the same
    check, else (a check without index: a version 1 handover, a failed job) the first unpaired one of its name."""
    by_index = {c.index: c for c in found if c.index is not None}
    unindexed = [c for c in found if c.index is None]
    out: list[tuple[Check, OutsideCheck | None]] = []
    for i, mine in enumerate(report.checks):
        theirs = by_index.get(i)
        if theirs is None or theirs.name != mine.name:
            theirs = next((c for c in unindexed if c.name == mine.name), None)
            if theirs is not None:
                unindexed.remove(theirs)
        out.append((mine, theirs))
    return out


class OutsideVerdict(Model):
    """tileproof's own check of what a program handed over (``records.handover``), beside the program's report."""

    checks: list[OutsideCheck]
    """One per check of the program's report, and per handed-over check the report lacks."""
    manifest: Transcript | None
    """``handover.json`` as kept under ``evidence/``; None when the program handed over none."""
    references_sha256: str | None = None
    """sha256 of ``kernels/references.py`` as the checker ran it (UTF-8); None when nothing was recomputed."""
    wall_s: float
    """Seconds tileproof's own check of this run took, as tileproof saw them. From run_version 6
    (``SESSION_CHECKER_RUN_VERSION``): reading and keeping the manifest and the job's round trip through the
    session's one checker process (which starts as the session opens, beside the first program's step: a first
    job still waiting for it counts that wait, and a job that had to start a new one after a failure counts that
    start); run_version 5: the checker's own process for this run, start to end."""

    def pairs(self, report: CheckReport) -> list[tuple[Check, OutsideCheck | None]]:
        """``pair_checks`` of the report and these checks."""
        return pair_checks(report, self.checks)


class GitState(Model):
    commit: str | None
    """HEAD when the record was written; None outside a git checkout."""
    dirty: bool
    """True when the tree differed from HEAD: a tracked file changed, or a file git neither tracks nor ignores was
    there outside ``runs/``, ``evidence/`` and ``build`` (tileproof's own output; records written before untracked
    files counted looked at tracked files only)."""


class HostFacts(Model):
    system: str
    release: str
    """Kernel release."""
    machine: str
    python: str
    cpu_count: int


class ToolVersion(Model):
    name: str
    """nvcc, tileiras, ptxas, cuobjdump, nvvm."""
    path: str | None
    version: str | None
    """``major.minor.patch`` as the tool or its package reports it."""


ToolchainProblemKind = Literal["tool-missing", "mixed-releases", "hazard-var"]
"""``tool-missing``: a tool of the release was not found; ``mixed-releases``: the pieces are of more
than one major.minor; ``hazard-var``: CUDA_HOME/CUDA_PATH names another toolkit (harmless when the
children's environment is ``clean``, which removes it)."""


class ToolchainProblem(Model):
    """One mismatch or hazard, by kind: code reads ``kind``, people read ``detail``."""

    kind: ToolchainProblemKind
    subject: str
    """What it is about: the tool's name, the variable's name, or ``release``."""
    detail: str
    """One line for a person, with the fix."""

    def __str__(self) -> str:
        return self.detail


TOOLCHAIN_VERSION: Final = 2
"""``Toolchain.version`` of the toolchains found now: 2 holds ``problems`` as ``ToolchainProblem``s."""


class Toolchain(Versioned):
    VERSION_FIELD = "version"
    version: Literal[1, 2] = counter(TOOLCHAIN_VERSION)
    """2: ``problems`` are ``ToolchainProblem``s. 1 (records written before, field absent): one
    line of text each; read as written and judged fail-closed (a text problem always counts)."""
    source: Literal["pip", "system"]
    tools: list[ToolVersion]
    packages: dict[str, str]
    """Installed nvidia-*/cuda-* distributions → version."""
    major_minor: str | None
    """The one release every piece shares; None when they disagree."""
    coherent: bool
    problems: list[ToolchainProblem | str]
    """One per mismatch or hazard found (text only in version 1)."""

    @model_validator(mode="after")
    def _typed_in_v2(self) -> Toolchain:
        if self.version >= 2 and any(isinstance(p, str) for p in self.problems):
            raise ValueError("toolchain version 2 holds problems as {kind, subject, detail}, not text")
        if self.version == 1 and any(isinstance(p, ToolchainProblem) for p in self.problems):
            raise ValueError("toolchain version 1 holds problems as text; set version 2 for typed problems")
        return self


class ReleaseFolder(Model):
    """The folder a run's cuda-tile release was imported from, when its name is a sha256: the release axis's way of
    running another release without network (docs/install.md) unpacks the release's wheel into a folder named by
    the wheel's digest and puts it first on ``PYTHONPATH``. What the record says; the judge checks the digest
    against the lock's hashes (``records.lock.wheel_hashes``) before it takes the folder for its own."""

    path: str
    """The folder, absolute, as the distribution's metadata locates it (``importlib.metadata``)."""
    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    """Its name: the digest of the wheel unpacked there."""


class CudaTileRelease(Model):
    """The cuda-tile release a run or an export used, and whether the tileiras beside it is one that release
    declares (its metadata's requirement for the ``tileiras`` extra; ``toolchain.cuda_tile``)."""

    version: str
    """The cuda-tile distribution's version (``importlib.metadata``: the one first on ``sys.path``, the one the
    programs import)."""
    requires: str | None
    """The compiler requirement of its ``tileiras`` extra as its metadata writes it
    (``nvidia-cuda-tileiras<13.3,>=13.2``, ``cuda-toolkit[nvcc,nvvm,tileiras]<13.4,>=13.2``); None when it
    declares none."""
    tileiras: str | None
    """The tileiras version used (``tileiras --version``); None when none was found."""
    in_range: bool | None
    """Whether ``tileiras`` satisfies ``requires`` (``toolchain.cuda_tile.in_range``); None when either is
    unknown."""
    outside_range_allowed: bool = False
    """``--tileiras-outside-range`` was given: the run went ahead although ``in_range`` is not True."""

    @model_validator(mode="after")
    def _asked_when_outside(self) -> CudaTileRelease:
        if self.in_range is not True and not self.outside_range_allowed:
            raise ValueError("a tileiras outside (or not known to be inside) cuda-tile's declared range is only "
                             "used when --tileiras-outside-range asks for it (outside_range_allowed)")
        return self

    @property
    def outside(self) -> bool:
        """Made with a tileiras the release does not declare (or not known to)."""
        return self.in_range is not True


class Diagnosis(Model):
    """A known failure recognised from real error text."""

    id: str
    title: str
    fix: str


class RecordBase(Model):
    schema_version: Literal[1]
    run_id: str
    """``<UTC yyyymmddThhmmssZ>-<kind>-<8 hex>``; also the file name."""
    created: datetime
    tileproof_version: str
    git: GitState
    host: HostFacts
    seal: str = ""
    """sha256 of this record's canonical JSON with ``seal`` empty (``store.seal_of``):
    a changed byte anywhere in the record is caught by ``nox -s audit``."""
