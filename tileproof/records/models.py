"""Every on-disk shape tileproof reads or writes, as pydantic models.

Records (``runs/*.json``) are a discriminated union over ``kind``. Each record
carries ``schema_version``; readers check it before anything else (see
``store.load_record``). ``schema/`` is generated from these classes by
``nox -s schema``: never edit the JSON Schema by hand.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, ClassVar, Final, Literal, NamedTuple, TypeVar

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    StringConstraints,
    ValidationInfo,
    model_validator,
)

from tileproof.records.base import Model, found_in
from tileproof.records.redact import RedactionRule
from tileproof.records.schemas import schema
from tileproof.records.tolerances import TABLE_PATHS

SCHEMA_VERSION = 1
"""The record schema version this tileproof writes and reads (claims records: ``CLAIMS_SCHEMA_VERSION``)."""

CLAIMS_SCHEMA_VERSION = 2
"""Claims records: 2 stores each claim's probes typed (``ProbeKind``); 1 (still read) as text."""

READABLE_VERSIONS: dict[str, tuple[int, ...]] = {"claims": (1, CLAIMS_SCHEMA_VERSION)}
"""Record kinds whose schema moved on: kind -> every version this tileproof reads, newest last.
Any other kind is read at ``SCHEMA_VERSION`` only."""

REPORT_VERSION = 1
"""The check-report version the programs write (see kernels/harness.py)."""

LESSON_VERSION: Final = 1
"""The lesson front-matter version."""

Verdict = Literal["passed", "failed", "gated", "no-gpu", "error", "timeout"]
"""Closed set of verdicts of a program that was started. Only ``passed`` counts as passing."""

RunVerdict = Literal["passed", "failed", "gated", "no-gpu", "error", "timeout", "toolchain-absent",
                     "checker-disagrees", "unverified"]
"""A run record's verdict: ``Verdict``, or ``toolchain-absent`` (run records of ``run_version`` 2): the
program's toolchain is not on this machine (a ``kernels/*.jl`` program where no ``julia`` with
cuTile.jl is found), so it could not be started; never a pass. From run_version 5 (``OUTSIDE_RUN_VERSION``)
also ``checker-disagrees`` (tileproof's own check of the handed-over outputs and the program's report
disagree: a failure) and ``unverified`` (the program passed, but a check handed over nothing tileproof
could recompute: never a pass; a check it did recompute may still decide its row)."""

TOOLCHAIN_ABSENT_FIX = "install Julia + cuTile.jl on a GPU runner"
"""The fix a ``toolchain-absent`` run record and the publish decision name (one wording)."""

TOOLCHAIN_ABSENT_RUN_VERSION: Final = 2
"""The first ``RunRecord.run_version`` that may hold the verdict ``toolchain-absent``."""

ENTRY_RUN_VERSION: Final = 3
"""The first ``RunRecord.run_version`` that attests the tolerance entries of its checks one by one
(``RunRecord.tolerances``) and lists no tolerance file among its sources. Older run records list the
whole table file (judged per entry where git history holds that version of it, else whole-file)."""

CUDA_TILE_RUN_VERSION: Final = 4
"""The first ``RunRecord.run_version`` that names the cuda-tile release it ran with and its tileiras range
(``RunRecord.cuda_tile``) and the exception that ended the program (``RunRecord.failure``). Older run
records name only ``environment.versions['cuda-tile']``: they were all made from the lock
(``judge.releases.release_of``)."""

RELEASE_FOLDER_RUN_VERSION: Final = 5
"""The first ``RunRecord.run_version`` that names the folder its cuda-tile release was imported from when that
folder is named by the release wheel's sha256 (``RunRecord.release_folder``)."""

OUTSIDE_RUN_VERSION: Final = 5
"""The first ``RunRecord.run_version`` whose verdict is not the program's word alone: tileproof checked the outputs
the program handed over itself (``RunRecord.outside``). An older record's verdict is the program's own
(``RunRecord.verdict_by``)."""

SESSION_CHECKER_RUN_VERSION: Final = 6
"""The first ``RunRecord.run_version`` whose outputs were checked by the run session's one checker process
(``runner.outside_check.Checker``), so that ``OutsideVerdict.wall_s`` is this run's job in it, not a process of its
own."""

RUN_VERSION: Final = 6
"""``RunRecord.run_version`` of the run records written now: 6 checks the handed-over outputs in the session's one
checker process (``SESSION_CHECKER_RUN_VERSION``); 5 checks them outside the program, in a process per run
(``OUTSIDE_RUN_VERSION``) and may name the digest-named folder its cuda-tile release was unpacked into
(``RELEASE_FOLDER_RUN_VERSION``); 4 names the cuda-tile release and the program's
uncaught exception (``CUDA_TILE_RUN_VERSION``); 3 attests tolerance entries (``ENTRY_RUN_VERSION``); 2 may
hold the verdict ``toolchain-absent``; 1 (records written before, field absent; still read) predates all
four."""

BlockerKind = Literal["row", "perf-claim", "refuted-claim", "claims-unchecked", "res-usage", "no-tolerance-entry",
                      "plausibility"]
"""What kind of thing keeps a lesson from being published (``judge.gate.Blocker``; the audit summary writes it)."""

EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Z_][A-Z0-9_]*$")]
"""An environment variable name (upper case, digits, underscores)."""

ArtifactKind = Literal["executable", "tilefatbin", "cubin"]
"""What a build produces: a C++ executable, a tile fatbin, or an AOT-exported cubin."""

BuildVerdict = Literal["built", "failed", "refused"]
"""``refused``: the build exited 0 but cannot be used (e.g. no tile code)."""

NonFinite = Literal["nan", "inf", "-inf"]
Number = float | NonFinite
"""A float as the programs write it: non-finite values are strings (valid JSON)."""


def _none(value: object) -> bool:
    return value is None


ADDED_FIELD = Field(default=None, exclude_if=_none)
"""A field a record kind gained in a later version (default None): left out of the record's JSON while None, so a
record written before the field existed dumps exactly as it was written and signed."""


def counter(current: int) -> Any:
    """A version counter's field: a writer that names none writes ``current``; the schema (which describes
    files) gives 1 as its default, what a file without the counter holds (``Versioned``)."""
    return Field(default=current, json_schema_extra={"default": 1})


AS_READ: Final = {"as_read": True}
"""The validation context of a record read back from a file (``store.validate``; ``Versioned``)."""


class Versioned(Model):
    """A model with a version counter (the field ``VERSION_FIELD``) whose default is the version written now.

    Read back from a file (validation context ``AS_READ``), a counter the file lacks reads as 1: the shape
    written before the counter existed. It stays out of ``model_fields_set``, so the model dumps exactly what
    the file holds and its seal and signature still verify. What an older version means for a judge is a
    property of the model named for that meaning (``RunRecord.attests_table_whole``...), never a version
    compare in the judge: the rule lives here, beside the version it reads.
    """

    VERSION_FIELD: ClassVar[str]

    @model_validator(mode="wrap")
    @classmethod
    def _as_written(cls, data: Any, handler: ModelWrapValidatorHandler[Any], info: ValidationInfo) -> Any:
        lacks = (isinstance(data, dict) and cls.VERSION_FIELD not in data
                 and bool(info.context and info.context.get("as_read")))
        model = handler({**data, cls.VERSION_FIELD: 1} if lacks else data)
        if lacks:
            model.__pydantic_fields_set__.discard(cls.VERSION_FIELD)
        return model


# --- programs' check reports -------------------------------------------------


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


# --- shared facts ------------------------------------------------------------


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
    host): 100,000 records kept as plain values hold a few thousand of each, not 100,000. ``value`` must be hashable
    and immutable; the table is emptied when it holds ``SHARED_MAX`` values (records come a session at a time)."""
    if len(_SHARED) >= SHARED_MAX:
        _SHARED.clear()
    return _SHARED.setdefault(value, value)


class TranscriptRef(NamedTuple):
    """A ``Transcript``'s three values, without its model: what the audit keeps of each of the 600,000 transcripts
    100,000 records reference (a model is ten times the size)."""

    path: str
    sha256: str
    bytes: int


class FileDigest(Model):
    """A file the record attests (program source, lesson, binary)."""

    path: str
    sha256: str


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
    """The row stride of a sampled output (``handover.RowSample``); None: the whole output was checked."""
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
    there outside ``runs/`` and ``evidence/`` (the store's own output; records written before untracked files
    counted looked at tracked files only)."""


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


class ReleaseFolder(Model):
    """The folder a run's cuda-tile release was imported from, when its name is a sha256: the release axis's way of
    running another release without network (docs/install.md) unpacks the release's wheel into a folder named by
    the wheel's digest and puts it first on ``PYTHONPATH``. What the record says; the judge checks the digest
    against the lock's hashes (``records.lock.wheel_hashes``) before it takes the folder for its own."""

    path: str
    """The folder, absolute, as the distribution's metadata locates it (``importlib.metadata``)."""
    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    """Its name: the digest of the wheel unpacked there."""


def steps_of(value) -> Iterator[Step]:
    """Every step a record (or any part of one) holds."""
    for step, _ in found_in(value, (Step,)):
        yield typing.cast(Step, step)


def unisolated(record) -> bool:
    """Whether a program step of the record ran without a wall (``Step.isolation`` ``none``)."""
    return any(step.isolation == "none" for step in steps_of(record))


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


# --- compile -----------------------------------------------------------------


class ResUsage(Model):
    """One kernel's line of ``cuobjdump -res-usage``."""

    function: str
    registers: int
    shared_bytes: int
    stack_bytes: int
    local_bytes: int
    constant_bytes: int


class BuildResult(Model):
    program: str
    kernel: str | None = None
    """For Python programs: the exported kernel's name."""
    target: str
    """``sm_XX``."""
    artifact_kind: ArtifactKind
    key: str
    """Cache key: sha256 over source digests, flags, target and toolchain versions."""
    reused_from: str | None
    """Run id of the compile record whose step built this artifact, when cached."""
    step: Step | None
    """The build step, when this record ran it."""
    inspect: Step | None = None
    """The ``cuobjdump -res-usage`` step over the artifact, when this record ran it."""
    artifact: FileDigest | None
    """Path under build/ (not committed) and digest."""
    res_usage: list[ResUsage]
    diagnoses: list[Diagnosis]
    verdict: BuildVerdict
    all_targets_step: Step | None = None
    """The one call for all of a program's builds (C++ from ``compile_version`` 2: nvcc for every target;
    Python from 3: every kernel and target exported in one process) when it failed, after which this
    build ran alone (``step``), so that each build's verdict is its own."""
    failure: ProgramFailure | None = ADDED_FIELD
    """From ``compile_version`` 5, an export that raised: the exception (``toolchain.aot``)."""


COMPILE_VERSION: Literal[5] = 5
"""``CompileRecord.compile_version`` of the compile records written now: 5 names the cuda-tile release the exports
used (``cuda_tile``; ``CUDA_TILE_COMPILE_VERSION``) and keeps a failed export's exception (``BuildResult.failure``);
4 says per program what its builds were
made from (``inputs``: the files it includes or imports, the tolerance entries it names; ``ENTRY_COMPILE_VERSION``)
and lists no tolerance file among its sources; 3 exports every uncached kernel and target of a Python program in
one process (``step`` shared by those builds); 2 builds each C++ program for every target in one nvcc call
(``step`` shared by its builds), its tile fatbin kept from the same call, and exported Python kernels one process
each; 1 (older records) also called nvcc once per target and artifact."""

ENTRY_COMPILE_VERSION: Final = 4
"""The first ``CompileRecord.compile_version`` that attests, per program, the tolerance entries its files name
(``ProgramInputs.tolerances``) instead of the whole table file or its header: an entry added or changed for
another check stales none of its builds. Older compile records list the whole table and header among their
sources (judged per entry where git history holds that version of them, else whole-file)."""

CUDA_TILE_COMPILE_VERSION: Final = 5
"""The first ``CompileRecord.compile_version`` that names the cuda-tile release its Python kernels were exported
with (``CompileRecord.cuda_tile``) and the exception a failed export raised (``BuildResult.failure``)."""


class ProgramInputs(Model):
    """What one program's builds in a compile record were made from (``compile_version`` 4)."""

    uses: list[str]
    """The program, then every helper it reaches through its imports or quoted includes: paths listed in the
    record's ``sources`` (never the tolerance table or its generated header)."""
    tolerances: dict[str, str]
    """Check name → sha256 of its tolerance entry (``tolerances.entry_digest``) for every table entry the
    program's files name: what its build can read of the table."""


class ApiInventory(Model):
    header: str
    header_sha256: str
    toolkit_version: str | None
    reductions: list[str]
    scans: list[str]
    matrix: list[str]


@schema("compile-record", SCHEMA_VERSION)
class CompileRecord(RecordBase, Versioned):
    VERSION_FIELD = "compile_version"
    kind: Literal["compile"]
    compile_version: Literal[1, 2, 3, 4, 5] = counter(COMPILE_VERSION)
    """How the builds were made (one call per C++ program, one process per Python program) and what they
    attest: see ``COMPILE_VERSION``."""
    toolchain: Toolchain
    cuda_tile: CudaTileRelease | None = ADDED_FIELD
    """From ``compile_version`` 5: the cuda-tile release the Python kernels were exported with (None when no
    cuda-tile is installed or nothing was exported)."""
    targets: list[str]
    sources: list[FileDigest]
    """Every file a build of this record was made from (before ``compile_version`` 4: every helper of each
    program's folder, the tolerance table and its header included)."""
    builds: list[BuildResult]
    api: ApiInventory | None
    passed: bool
    """True when every build in this record is ``built``."""
    inputs: dict[str, ProgramInputs] = {}
    """From ``compile_version`` 4: program → what its builds were made from; empty before."""

    @property
    def attests_table_whole(self) -> bool:
        """Written before per-entry attestation (``compile_version`` < ``ENTRY_COMPILE_VERSION``): the record
        lists every source of every program it built, the tolerance table and its header among them, and says
        nothing per program (``inputs`` empty)."""
        return self.compile_version < ENTRY_COMPILE_VERSION

    @model_validator(mode="after")
    def _fits_version(self) -> CompileRecord:
        if self.compile_version < 2 and any(b.all_targets_step for b in self.builds):
            raise ValueError("compile records before compile_version 2 hold no all_targets_step")
        if self.compile_version < 3 and any(b.all_targets_step and b.artifact_kind == "cubin" for b in self.builds):
            raise ValueError("compile records before compile_version 3 hold no all_targets_step for a Python kernel")
        named = self.cuda_tile is not None or any(b.failure for b in self.builds)
        if self.compile_version < CUDA_TILE_COMPILE_VERSION and named:
            raise ValueError(f"compile records before compile_version {CUDA_TILE_COMPILE_VERSION} name no cuda-tile "
                             "release and no export failure")
        if self.compile_version < ENTRY_COMPILE_VERSION:
            if self.inputs:
                raise ValueError(f"compile records before compile_version {ENTRY_COMPILE_VERSION} hold no inputs")
            return self
        sources = {s.path for s in self.sources}
        if sources & set(TABLE_PATHS):
            raise ValueError(f"compile records of compile_version {ENTRY_COMPILE_VERSION} attest tolerance entries, "
                             "not the table file (list them in inputs)")
        for b in self.builds:
            if b.program not in self.inputs:
                raise ValueError(f"inputs: no entry for {b.program}, which the record builds")
        for program, own in self.inputs.items():
            if own.uses[:1] != [program] or not set(own.uses) <= sources:
                raise ValueError(f"inputs.{program}.uses: must start with the program and name only files in sources")
        return self


# --- run ---------------------------------------------------------------------


class GpuFacts(Model):
    index: int
    name: str
    uuid: str
    compute_capability: str
    """From ``nvidia-smi --query-gpu=compute_cap``."""
    runtime_compute_capability: str | None
    """From the CUDA runtime (cupy); must agree with the above."""
    driver_version: str
    memory_total_mib: int | None
    clocks_sm_mhz: int | None
    clocks_mem_mhz: int | None
    pci_bus_id: str | None = None
    """From ``nvidia-smi --query-gpu=pci.bus_id`` (``00000000:00:06.0``): which GPU of a several-GPU host this was,
    whatever the index order. Asked since environment_version 3; None in records captured before (and where
    nvidia-smi gives none)."""


TileproofKind = Literal["distribution", "checkout"]
"""How the tileproof that wrote a record was loaded: an installed distribution, or a checkout's sources."""


class TileproofOrigin(Model):
    """The tileproof that captured an environment: what ran, by version and by the digest of its sources."""

    kind: TileproofKind
    """``distribution``: an installed ``tileproof`` (a wheel, or an editable install) that pip freeze lists;
    ``checkout``: the package imported from a folder no installer recorded (``nox --no-venv -s run-gpu``, the
    checkout on ``sys.path``), which pip freeze never lists and ``packages`` leaves out."""
    version: str
    """``tileproof.__version__`` of the package that ran."""
    commit: str | None
    """For a checkout: git HEAD of the folder holding the package; None for a distribution, or outside git."""
    sources_sha256: str
    """sha256 over every ``.py`` file of the package that ran (``capture.package_digest``: each file's path
    and sha256, sorted): what ran, whatever the commit or the version says."""


ENVIRONMENT_VERSION: Final = 3
"""``Environment.environment_version`` of the environments captured now: 3 adds the GPU's PCI bus id
(``gpu.pci_bus_id``) and the host's ``nvidia-smi topo -m`` (``nvidia_smi_topo``), which name one GPU among
several; 2 (still read) records where the tileproof that ran came from (``tileproof``) and may name the Slurm
job the session ran in (``slurm``); 1 (records written before, field absent; still read) listed tileproof among
``packages`` only and never names a job."""
TOPOLOGY_ENVIRONMENT_VERSION: Final = 3
"""The first environment_version with the GPU's bus id and the host's GPU topology."""


class SlurmJob(Model):
    """The Slurm job a session ran in, as slurmd described it in the session's own environment
    (``SLURM_*``, and ``CUDA_VISIBLE_DEVICES`` as Slurm set it before tileproof chose a device)."""

    job_id: str
    """``SLURM_JOB_ID``: this job's own id (each array task has one; one task's is the array's own id)."""
    array_job_id: str | None
    """``SLURM_ARRAY_JOB_ID``: the array's id; None outside an array."""
    array_task_id: int | None
    """``SLURM_ARRAY_TASK_ID``: the task's index in its array; None outside an array."""
    cluster: str | None
    """``SLURM_CLUSTER_NAME``."""
    node: str | None
    """``SLURMD_NODENAME``: the node that ran the job."""
    job_gpus: list[int] | None
    """``SLURM_JOB_GPUS``: the GPUs Slurm gave the job (its GRES indexes); None when it gave none."""
    step_gpus: list[int] | None
    """``SLURM_STEP_GPUS``: the GPUs of the job step (set in ``srun`` steps); None when unset."""
    cuda_visible_devices: str | None
    """``CUDA_VISIBLE_DEVICES`` as the job started with it (Slurm's GPU binding); None when unset."""


class Environment(Versioned):
    """What a run session captured once, shared by its program records."""

    VERSION_FIELD = "environment_version"
    environment_version: Literal[1, 2, 3] = counter(ENVIRONMENT_VERSION)
    """3 (``ENVIRONMENT_VERSION``) for environments captured now: the GPU's bus id and the host's GPU topology
    (``nvidia_smi_topo``) too; from 2: ``tileproof`` names the tileproof that ran (``packages`` never lists it when
    it ran from a checkout) and ``slurm`` the Slurm job, if any; 1 (records written before, field absent): none
    of these fields."""
    tileproof: TileproofOrigin | None = None
    """From environment_version 2: the tileproof that ran (a distribution, or a checkout's sources)."""
    session_id: str
    gpu: GpuFacts | None
    toolchain: Toolchain
    toolchain_env: Literal["clean", "as-is"]
    """``clean``: children got an environment with CUDA_HOME/CUDA_PATH removed."""
    versions: dict[str, str | None]
    """cuda-tile, cupy, numpy, python, os and kernel."""
    packages: dict[str, str]
    """Every installed distribution → version (importlib.metadata)."""
    env: dict[str, str]
    """Allowlisted environment variables only; never the whole environment."""
    pip_freeze: Transcript
    pip_freeze_redactions: dict[RedactionRule, int] = {}
    """Credentials (URL userinfo, tokens) replaced in pip freeze before writing, per rule."""
    nvidia_smi: Transcript | None
    nvidia_smi_query: Transcript | None
    slurm: SlurmJob | None = None
    """From environment_version 2: the Slurm job the session ran in; None when it ran outside Slurm."""
    nvidia_smi_topo: Transcript | None = None
    """From environment_version 3: ``nvidia-smi topo -m`` of the host (how its GPUs, NICs and CPUs connect: NVLink,
    PCIe switch, NUMA node), once per session; None where there is no nvidia-smi."""

    @model_validator(mode="after")
    def _fits_version(self) -> Environment:
        if self.environment_version < 2 and self.slurm is not None:
            raise ValueError("environments before environment_version 2 name no Slurm job")
        if self.environment_version < TOPOLOGY_ENVIRONMENT_VERSION and (
                self.nvidia_smi_topo is not None or (self.gpu is not None and self.gpu.pci_bus_id is not None)):
            raise ValueError(f"environments before environment_version {TOPOLOGY_ENVIRONMENT_VERSION} name no PCI bus "
                             "id and no GPU topology")
        if (self.environment_version >= 2) != (self.tileproof is not None):
            raise ValueError("environment_version 2 and later, and only they, name the tileproof that ran (tileproof)")
        return self


@schema("run-record", SCHEMA_VERSION)
class RunRecord(RecordBase, Versioned):
    """One program's run. What it depends on (``gate.staleness``): the lesson's program list, every
    file in ``sources`` (from run_version 3: the program and the helpers it includes or imports; before:
    also the whole tolerance file) and, from run_version 3, each tolerance entry in ``tolerances``."""

    VERSION_FIELD = "run_version"
    kind: Literal["run"]
    run_version: Literal[1, 2, 3, 4, 5, 6] = counter(RUN_VERSION)
    """6 (``RUN_VERSION``) for records written now: the outputs checked in the session's one checker process
    (``outside.wall_s``: this run's job in it); 5 and up: the outputs checked outside the program (``outside``), and
    the digest-named folder of its cuda-tile release, when there is one (``release_folder``); 4 and up: the
    cuda-tile release and the program's uncaught exception
    named (``cuda_tile``, ``failure``); 3 and up: tolerance entries attested one by one
    (``ENTRY_RUN_VERSION``); 2 and up: the verdict may be
    ``toolchain-absent``; 1 (records written before, field absent): the verdicts of ``Verdict`` only, the
    tolerance table a whole-file source."""
    environment: Environment
    program: str
    lessons: list[str]
    """Lesson ids whose front matter lists this program."""
    lesson_programs: dict[str, str]
    """Lesson id → sha256 of its front matter's program list at run time
    (``lessons.program_list_digest``); a changed list makes the record stale."""
    sources: list[FileDigest]
    """The program, its helpers, and the lesson files, as they were run."""
    tolerances: dict[str, str] = {}
    """From run_version 3: check name → sha256 of its tolerance entry as run (``tolerances.entry_digest``),
    for every check of the program (its report's and its lessons'); empty before."""
    binary: FileDigest | None
    """The C++ executable run (its source and headers are in ``sources``); None for Python programs."""
    step: Step
    report: CheckReport | None
    report_file: Transcript | None
    verdict: RunVerdict
    reason: str
    """One line: why this verdict."""
    cuda_tile: CudaTileRelease | None = ADDED_FIELD
    """From run_version 4, for a Python program: the cuda-tile release installed for it and the tileiras it
    ran with (None when no cuda-tile is installed); a release other than the lock's, or a tileiras outside
    its range, makes the record part of the release axis, never a lesson row's evidence (``judge.releases``)."""
    failure: ProgramFailure | None = ADDED_FIELD
    """From run_version 4, for a Python program: the uncaught exception that ended it (tileproof starts it
    through ``toolchain.launch``, which writes it down), None when none did. A failed check is no failure."""
    release_folder: ReleaseFolder | None = ADDED_FIELD
    """From run_version 5, for a Python program: the folder its cuda-tile release was imported from, when that
    folder's name is a sha256 (a release wheel unpacked by its digest); None otherwise."""
    outside: OutsideVerdict | None = ADDED_FIELD
    """From run_version 5: tileproof's own check of the outputs the program handed over; None when the program
    ran no check (gated, no GPU, crashed before its report). The verdict is ``passed`` only when it and the
    program's report agree."""

    @property
    def verdict_by(self) -> Literal["program", "program-and-checker"]:
        """Whose word the verdict is: the program's own report alone (records before ``OUTSIDE_RUN_VERSION``),
        or the program's report and tileproof's check of its handed-over outputs, agreeing."""
        return "program-and-checker" if self.run_version >= OUTSIDE_RUN_VERSION else "program"

    def unverified(self, check: str) -> bool:
        """Whether this record leaves ``check`` unverified, so that it decides nothing about it: its verdict is
        ``unverified`` (the program passed) and tileproof's own check found nothing to recompute ``check`` from.
        Never for a record before ``OUTSIDE_RUN_VERSION`` (its verdict is the program's, as it always was), nor for
        one that failed in any way (a failure decides its rows, whichever check was left unverified)."""
        if self.verdict != "unverified":
            return False
        found = next((c for c in self.outside.checks if c.name == check), None) if self.outside else None
        return found is None or found.status == "unverified"

    def outside_failed(self, check: str) -> OutsideCheck | None:
        """tileproof's own check of ``check`` when it failed, None otherwise (or before ``OUTSIDE_RUN_VERSION``)."""
        found = next((c for c in self.outside.checks if c.name == check), None) if self.outside else None
        return found if found is not None and found.status == "failed" else None

    @property
    def attests_table_whole(self) -> bool:
        """Written before per-entry attestation (``run_version`` < ``ENTRY_RUN_VERSION``): the record depends on
        the whole tolerance table file (among its ``sources``; ``tolerances`` empty), and its verdict on every
        check of its report."""
        return self.run_version < ENTRY_RUN_VERSION

    @property
    def names_release(self) -> bool:
        """Written since records name their cuda-tile release (``run_version`` >= ``CUDA_TILE_RUN_VERSION``):
        ``cuda_tile`` None then means none was installed; an older record names only the installed version
        (``environment.versions``)."""
        return self.run_version >= CUDA_TILE_RUN_VERSION

    @model_validator(mode="after")
    def _fits_version(self) -> RunRecord:
        if self.verdict == "toolchain-absent" and self.run_version < TOOLCHAIN_ABSENT_RUN_VERSION:
            raise ValueError(f"verdict toolchain-absent needs run_version {TOOLCHAIN_ABSENT_RUN_VERSION}")
        if self.run_version < ENTRY_RUN_VERSION and self.tolerances:
            raise ValueError(f"run records before run_version {ENTRY_RUN_VERSION} attest no tolerance entries")
        if self.run_version < OUTSIDE_RUN_VERSION and (self.outside is not None
                                                       or self.verdict in ("checker-disagrees", "unverified")):
            raise ValueError(f"run records before run_version {OUTSIDE_RUN_VERSION} hold the program's verdict only "
                             "(no outside check, no verdict checker-disagrees or unverified)")
        if self.run_version < CUDA_TILE_RUN_VERSION and (self.cuda_tile is not None or self.failure is not None):
            raise ValueError(f"run records before run_version {CUDA_TILE_RUN_VERSION} name no cuda_tile release "
                             "and no failure")
        if self.run_version < RELEASE_FOLDER_RUN_VERSION and self.release_folder is not None:
            raise ValueError(f"run records before run_version {RELEASE_FOLDER_RUN_VERSION} name no release_folder")
        if self.release_folder is not None and self.cuda_tile is None:
            raise ValueError("a release_folder is the folder of the cuda_tile release it names: cuda_tile is missing")
        if self.run_version >= ENTRY_RUN_VERSION and set(TABLE_PATHS) & {s.path for s in self.sources}:
            raise ValueError(f"run records of run_version {ENTRY_RUN_VERSION} attest tolerance entries, not the "
                             "table file (list them in tolerances)")
        return self


@schema("session-record", SCHEMA_VERSION)
class SessionRecord(RecordBase):
    """Written last by ``run``: a session without one is incomplete."""

    kind: Literal["session"]
    session_id: str
    runs: list[str]
    """Run ids written by this session, in order."""
    verdict_counts: dict[str, int]


# --- bench -------------------------------------------------------------------


BENCH_VERSION: Final = 5
"""``BenchRecord.bench_version`` of the bench records written now: 5 keeps tileproof's own check of every case's
handed-over output (``BenchRecord.outside``) and makes the verdict from both words, as a run record's
(``checker-disagrees``, ``unverified``); 4 keeps, beside the CUDA-event timings, the
wall-clock time of each case's timed region as the program reported it and whether tileproof's own bracket of
the step holds it (``BenchCase.wall_s``, ``wall_in_step``); 3 gives every timed case the GPU's
SM clock and power draw while it ran (``load``), against the card's maximum SM clock and power limit;
2 (still read) gives every timed case its ``roofline`` (what bounds it, against which ceiling of the
same run) and flags results too good to believe unseen (``second_look``); 1 (records written before,
field absent; still read) has neither."""

ROOFLINE_BENCH_VERSION: Final = 2
"""The first bench_version whose cases carry ``roofline`` and ``second_look``."""
LOAD_BENCH_VERSION: Final = 3
"""The first bench_version whose cases carry ``load``."""
WALL_BENCH_VERSION: Final = 4
"""The first bench_version whose cases carry ``wall_s`` and ``wall_in_step``."""
OUTSIDE_BENCH_VERSION: Final = 5
"""The first bench_version that keeps tileproof's own check (``outside``) and whose verdict is both words."""

BenchVerdict = Literal["passed", "failed", "gated", "no-gpu", "error", "timeout", "checker-disagrees", "unverified"]
"""A bench record's verdict: ``Verdict``, and from bench_version 5 (``OUTSIDE_BENCH_VERSION``) the two verdicts of
tileproof's own check (``RunVerdict``): ``passed`` only when the program and tileproof's own check agree on every
check; ``unverified`` when a check could not be recomputed (it never counts as passing)."""

SECOND_LOOK_COPY_PCT: Final = 95.0
"""A bytes-bound case above this % of the device copy measured in the same run is flagged for a second look."""

Bound = Literal["flops", "bytes"]
"""The resource that bounds a case: its counted FLOPs at the dense peak take longer than its counted
bytes at the device copy's bandwidth (``flops``), or not (``bytes``)."""

Ceiling = Literal["device copy", "dense peak", "largest cuBLAS product"]
"""What a case's rate is measured against: for ``bytes`` the device copy timed in the same run; for
``flops`` the tensor cores' dense peak (``ceilings['peak_tflops']``), or, where the program knows no
peak for the GPU, the largest cuBLAS product of the same run. cuBLAS at the case's own shape is the
other flops ceiling: ``pct_of_reference`` and the head-to-head ratio."""


class Roofline(Model):
    """Where a case stands against the ceiling that bounds it (bench_version 2)."""

    bound: Bound
    ceiling: Ceiling
    ceiling_key: str | None
    """The case key of the ceiling's own measurement in this record (the copy, the cuBLAS product);
    None for the dense peak, which is computed, not timed."""
    ceiling_rate: float
    """The ceiling in the case's unit: GB/s for ``bytes``, TFLOP/s for ``flops``."""
    pct_of_ceiling: float
    """The case's rate as % of ``ceiling_rate``."""
    floor_ms: float
    """The larger of (counted FLOPs at the FLOP ceiling) and (counted bytes at the copy's bandwidth):
    no version of this computation can take less; the case's median over it is its gap."""

    def text(self) -> str:
        """``bytes-bound: 63.0% of the device copy (4202 GB/s)``."""
        unit = "GB/s" if self.bound == "bytes" else "TFLOP/s"
        return f"{self.bound}-bound: {self.pct_of_ceiling:.1f}% of the {self.ceiling} ({self.ceiling_rate:.0f} {unit})"


SecondLookRule = Literal["above-copy", "above-reference"]
"""``above-copy``: a bytes-bound case above ``SECOND_LOOK_COPY_PCT`` of the device copy;
``above-reference``: a flops-bound case above cuBLAS by more than the cuBLAS-against-itself control's
spread at that shape."""


class SecondLook(Model):
    """A result good enough that it must be measured again before it is believed."""

    rule: SecondLookRule
    value: float
    """The % that tripped the rule (of the copy; of cuBLAS, head to head when the case was paired)."""
    threshold: float
    """What it exceeded, in the same %."""
    basis: str
    """Where the numbers come from, e.g. ``head to head, 200 cycles; control 100.1% [99.8, 100.5]``."""

    def text(self) -> str:
        """``second look: 102.8% > 100.5% of the reference (head to head, ...): measure it again``."""
        what = "the device copy" if self.rule == "above-copy" else "the reference"
        return (f"second look: {self.value:.1f}% > {self.threshold:.1f}% of {what} ({self.basis}); "
                "measure it again before believing it")


ClockEventReason = Literal["gpu_idle", "applications_clocks", "sw_power_cap", "hw_slowdown", "sync_boost",
                           "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock",
                           "other"]
"""NVML's clocks event reasons, why the SM clock is below its most: ``sw_power_cap`` the driver holding
the board at its power limit, ``*_thermal_slowdown`` heat, ``hw_slowdown``/``hw_power_brake_slowdown`` the
board's own protection, ``gpu_idle`` nothing to run; ``other`` any bit NVML set that the bench names not."""

PowerReading = Literal["instant", "average"]
"""How NVML gave the power draw: ``instant`` (its instantaneous field) or ``average`` (over the last second,
nvmlDeviceGetPowerUsage on Ampere and newer GPUs: longer than one batch of a fast case)."""


class GpuLoad(Model):
    """What the GPU did while one case ran (bench_version 3): its SM clock and power draw, read through
    NVML by the bench program every few milliseconds during the case's batches (the warm-up launches of
    the case and its timed launches, the L2 flushes between them included) and once as each batch ended,
    against the card's maximum SM clock and enforced power limit. Only reads: the bench never sets a clock
    or a limit."""

    samples: int = Field(ge=1)
    """Readings inside the case's batches."""
    window_s: float
    """Seconds the case's batches lasted in all (the thread reads every ``interval_ms`` of the results file's
    ``load``, so ``samples`` is about ``window_s`` over that, plus one a batch)."""
    sm_clock_mhz: float
    """Median SM clock over the readings."""
    sm_clock_q1_mhz: float
    sm_clock_q3_mhz: float
    """Quartiles of the SM clock over the readings."""
    max_sm_clock_mhz: float = Field(gt=0)
    """The card's maximum SM clock (NVML's max clock), the clock the dense peak is computed at."""
    power_w: float
    """Median power draw over the readings."""
    power_q1_w: float
    power_q3_w: float
    """Quartiles of the power draw."""
    power_limit_w: float = Field(gt=0)
    """The power limit the driver enforced (NVML's enforced power limit)."""
    power_reading: PowerReading
    reasons: dict[ClockEventReason, float] = Field(default_factory=dict)
    """Fraction of the readings in which each clock event reason was active; reasons never active are left out."""
    pct_of_peak_at_clock: float | None = None
    """For a case whose FLOPs bound it: its rate as % of the dense peak scaled from the clock the peak was
    computed at to this case's median SM clock, i.e. how much of the tensor cores' work per clock it got at
    the clock it ran at; None otherwise."""

    @property
    def pct_of_power_limit(self) -> float:
        """The lower quartile of the power draw as % of the limit: in three readings of four it drew at least this."""
        return 100.0 * self.power_q1_w / self.power_limit_w

    @property
    def pct_below_max_clock(self) -> float:
        """How far below its maximum the SM clock ran, from the upper quartile of the clock, in % of the maximum:
        in three readings of four the clock was at least this far below it."""
        return 100.0 * (1.0 - self.sm_clock_q3_mhz / self.max_sm_clock_mhz)

    def text(self) -> str:
        """``SM 1515 of 1980 MHz, 688 of 700 W (instant; sw_power_cap 97%), 149 readings``."""
        seen = ", ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(self.reasons.items(), key=lambda kv: -kv[1]))
        return (f"SM {self.sm_clock_mhz:.0f} of {self.max_sm_clock_mhz:.0f} MHz, {self.power_w:.0f} of "
                f"{self.power_limit_w:.0f} W ({self.power_reading}{'; ' + seen if seen else ''}), "
                f"{self.samples} readings")


class BenchCase(Model):
    """One timed case: a kernel variant at one shape, or its library reference."""

    name: str
    """What is computed: ``matmul``, ``softmax``, ``online_softmax``, ``copy``."""
    variant: str
    """``tile``, ``grouped``, ``persistent``, ``cublas``, ``cupy``..."""
    shape: list[int]
    dtype: str
    tiles: list[int] | None
    repeats: int
    first_launch_ms: float | None
    """The first launch, JIT compile included; never part of the statistics."""
    median_ms: float
    min_ms: float
    max_ms: float
    spread: float
    """Standard deviation over mean of the timed repeats."""
    noisy: bool
    """spread > 0.10 (pyperf's rule)."""
    tflops: float | None
    gbps: float | None
    pct_of_reference: float | None
    """Rate as % of the same-run library reference (cuBLAS / cupy) at the same shape."""
    pct_of_ceiling: float | None
    """Rate as % of the measured ceiling (large cuBLAS product / large copy)."""
    max_rel_err: float | None
    """Checked once against a reference before timing."""
    checked: bool
    config: dict[str, int | str | list[int] | None] = Field(default_factory=dict)
    """Compiler hints and launch settings beyond the tile shape (``num_worker_warps``,
    ``occupancy``, ``group_m``, ``grid``), or the library call for a reference."""
    key: str = ""
    """The program's case key, ``name/variant/shape[/tiles+hints]``; ``repeat_spread`` uses it."""
    tiles_per_sm: float | None = None
    """Output tiles over the GPU's SMs: the waves a one-tile-per-block grid needs (a
    fraction means the last wave leaves SMs idle)."""
    resources: dict[str, int | str] | None = None
    """What the compiled kernel costs, read by the driver from the JIT's cubin:
    ``registers`` and ``local_bytes`` (spills) per thread, ``shared_bytes``,
    ``max_threads_per_block``, ``blocks_per_sm``; or ``error`` saying why not."""
    roofline: Roofline | None = None
    """From bench_version 2: what bounds the case and how close it comes to that ceiling (None for a
    case that counts neither FLOPs nor bytes); always None in bench_version 1 records."""
    second_look: SecondLook | None = None
    """From bench_version 2: set when the result is too good to believe from one measurement."""
    load: GpuLoad | None = None
    """From bench_version 3: the GPU's SM clock and power draw during this case's batches; None where the
    program could not read them (the record's ``load_unavailable`` says why)."""
    events_ms: float | None = ADDED_FIELD
    """From bench_version 4: the sum of the case's CUDA-event samples (ms), what the timed launches took by the
    program's own clock."""
    wall_s: float | None = ADDED_FIELD
    """From bench_version 4: the wall-clock seconds of the regions in which the case's samples were timed (the
    program's ``time.time()`` around each timed batch, summed); None when the program reported none."""
    wall_in_step: bool | None = ADDED_FIELD
    """From bench_version 4: whether every timed region the program reported lies inside the step as tileproof
    bracketed it (its own start and end times); None when the program reported none. The audit
    (``bench-wall-clock``) finds a case whose wall clock cannot hold the rate its events claim."""

    # The metrics a performance claim can name beyond the fields above (``PerfMetric``), derived here so
    # that the claim rule reads each from one place.

    @property
    def times_floor(self) -> float | None:
        """The median over the roofline's floor: how many times longer the case took than its counted work
        at the ceiling of the same run (1.0 would be the roofline itself); None without a roofline."""
        return self.median_ms / self.roofline.floor_ms if self.roofline and self.roofline.floor_ms > 0 else None

    @property
    def pct_of_power_limit(self) -> float | None:
        """``GpuLoad.pct_of_power_limit``; None without ``load``."""
        return self.load.pct_of_power_limit if self.load else None

    @property
    def pct_below_max_clock(self) -> float | None:
        """``GpuLoad.pct_below_max_clock``; None without ``load``."""
        return self.load.pct_below_max_clock if self.load else None

    @property
    def pct_of_peak_at_clock(self) -> float | None:
        """``GpuLoad.pct_of_peak_at_clock``; None without ``load`` or for a case its bytes bound."""
        return self.load.pct_of_peak_at_clock if self.load else None


class PairedRatio(Model):
    """A case against its library reference when both were launched in turn, cycle by cycle."""

    reference: str
    """The reference case's key (same computation and shape)."""
    cycles: int
    pct_of_reference: float
    """Median over cycles of (reference ms / case ms) x 100: the case's rate as % of the
    reference's, each cycle's pair taken at the same clocks."""
    q1: float
    q3: float
    """Quartiles of the same per-cycle percentages: how much one pair can say."""
    control: bool = False
    """The reference against a second copy of itself (A/A): how far from 100% the method
    alone puts a ratio."""


@schema("bench-record", SCHEMA_VERSION)
class BenchRecord(RecordBase, Versioned):
    VERSION_FIELD = "bench_version"
    kind: Literal["bench"]
    bench_version: Literal[1, 2, 3, 4, 5] = counter(BENCH_VERSION)
    """3 (``BENCH_VERSION``) for records written now: cases carry ``load`` besides what 2 has; 2: cases carry
    ``roofline`` and ``second_look``, and ``ceilings`` may hold ``peak_tflops``; 1 (records written before,
    field absent): none of these."""
    environment: Environment
    program: str
    sources: list[FileDigest]
    step: Step
    report: CheckReport | None = None
    """The program's check report: one check per case, run once before any timing."""
    report_file: Transcript | None = None
    results_file: Transcript | None
    """The bench program's JSON output, verbatim."""
    gpu_before: Transcript | None
    """``nvidia-smi --query-gpu`` (clocks, temperature, power) before the bench."""
    gpu_after: Transcript | None
    cases: list[BenchCase]
    ceilings: dict[str, float]
    """``tflops``: a large cuBLAS product's rate; ``gbps``: a large device copy's bandwidth; from
    bench_version 2 ``peak_tflops``: the dense tensor-core peak the program computed for this GPU."""
    repeat_spread: dict[str, float]
    """Case key → relative difference of its median measured twice in this run."""
    head_to_head: dict[str, PairedRatio] = Field(default_factory=dict)
    """Case key → its rate against the reference's when the two were launched in turn
    (the programs' phase ``paired``); empty when the program has no such phase."""
    load_unavailable: str | None = None
    """From bench_version 3: why some case has no ``load`` (the program could not read the GPU's clock and
    power through NVML, or read nothing during its batches); None when every case with a rate has one."""
    outside: OutsideVerdict | None = None
    """From bench_version 5: tileproof's own check of the outputs the program handed over (each case's check
    ``index`` in ``report``), None when the program ran no check; before, absent (the verdict was the program's)."""
    verdict: BenchVerdict
    reason: str

    @property
    def verdict_by(self) -> Literal["program", "program-and-checker"]:
        """Whose word the verdict is: the program's report alone before ``OUTSIDE_BENCH_VERSION``, else both."""
        return "program-and-checker" if self.bench_version >= OUTSIDE_BENCH_VERSION else "program"

    @property
    def has_rooflines(self) -> bool:
        """Written since cases carry ``roofline`` and ``second_look`` (``bench_version`` >=
        ``ROOFLINE_BENCH_VERSION``): a case without a roofline then has none; an older record has none at all."""
        return self.bench_version >= ROOFLINE_BENCH_VERSION

    @model_validator(mode="after")
    def _fits_version(self) -> BenchRecord:
        rated = [c for c in self.cases if c.tflops is not None or c.gbps is not None]
        if self.bench_version < ROOFLINE_BENCH_VERSION:
            if any(c.roofline or c.second_look for c in self.cases) or "peak_tflops" in self.ceilings:
                raise ValueError(f"bench records before bench_version {ROOFLINE_BENCH_VERSION} hold no roofline, "
                                 "second look or peak_tflops")
        elif any(c.roofline is None for c in rated):
            raise ValueError(f"bench records of bench_version {ROOFLINE_BENCH_VERSION} and later give every case "
                             "with a rate its roofline")
        if self.bench_version < LOAD_BENCH_VERSION:
            if any(c.load for c in self.cases) or self.load_unavailable is not None:
                raise ValueError(f"bench records before bench_version {LOAD_BENCH_VERSION} hold no load and no "
                                 "load_unavailable")
        elif any(c.load is None for c in rated) and not self.load_unavailable:
            raise ValueError(f"bench records of bench_version {LOAD_BENCH_VERSION} give every case with a rate its "
                             "load, or say in load_unavailable why not")
        if self.bench_version < WALL_BENCH_VERSION and any(
                c.wall_s is not None or c.wall_in_step is not None or c.events_ms is not None for c in self.cases):
            raise ValueError(f"bench records before bench_version {WALL_BENCH_VERSION} hold no wall-clock times")
        if self.bench_version < OUTSIDE_BENCH_VERSION and (
                self.outside is not None or self.verdict in ("checker-disagrees", "unverified")):
            raise ValueError(f"bench records before bench_version {OUTSIDE_BENCH_VERSION} hold no outside check and "
                             "no verdict of one")
        return self


# --- claims ------------------------------------------------------------------


ClaimVerdictName = Literal["confirmed", "refuted", "unverifiable-here", "error"]
"""``confirmed``/``refuted``: the evidence agrees with / contradicts the document;
``unverifiable-here``: needs what this machine lacks (a GPU, nvcc, a card below 8.0);
``error``: the check itself could not run (a tool failure, not a finding)."""


CheckKind = Literal["compile", "header", "api", "res-usage", "gpu", "not-checkable"]
"""How a claim probe is checked (the ``kind`` of a check in a claims file)."""

ProbeRole = Literal["check", "wrong", "right"]
"""A probe's part in its claim: the claim's own ``check``, or a pitfall's ``wrong``/``right`` code."""


class ProbeKind(Model):
    """One probe a claim ran: its role and the kind of its check."""

    role: ProbeRole
    kind: CheckKind


class _ClaimResultFields(Model):
    """What every version of a claim result holds."""

    id: str
    document: str
    """The document's id (its claims file is ``lessons/claims/<document>.claims.yaml``)."""
    statement: str
    source: str = ""
    """Where the document makes the claim: path, section and its words."""
    asserted: bool = True
    """False when the document no longer asserts it (or only reports it as someone's claim)."""
    verdict: ClaimVerdictName
    why: str
    """One line: what the evidence showed, or why it cannot be checked here."""
    evidence: Transcript | None = None
    """The transcript a reader should open first: the deciding probe's stderr when its step failed,
    else its stdout (``claims.outcomes.first_evidence``); None in records written before it existed."""
    toolchain: str | None
    """The toolchain release the verdict holds for (a claim can be true for 13.3 and false for 13.5)."""
    steps: list[Step]


class ClaimResult(_ClaimResultFields):
    """One claim's check, run here, and what it showed (claims records of version 2)."""

    check: list[ProbeKind] = Field(min_length=1)
    """The probes run, in order: one ``check``, or a pitfall's ``wrong`` and/or ``right``."""


class ClaimResultV1(_ClaimResultFields):
    """A claim result as version-1 claims records hold it: read, never written, never parsed."""

    check: str
    """The check kinds as text (``compile``, or ``wrong:compile, right:gpu``); kept as written so the
    record's seal still holds. No code reads it back."""


@schema("claims-record", CLAIMS_SCHEMA_VERSION)  # reads v1 too
class ClaimsRecord(RecordBase):
    """One ``tileproof claims`` run: every claim's verdict, and what it was checked with."""

    schema_version: Literal[1, 2]  # type: ignore[assignment]
    """2 (``CLAIMS_SCHEMA_VERSION``) for records written now; 1 for older ones (results as text)."""
    kind: Literal["claims"]
    toolchain: Toolchain
    gpu: GpuFacts | None
    claims_files: list[FileDigest]
    """The claims files, their snippets and the documents (inside the repository) as checked."""
    nvidia_smi: Transcript | None = None
    nvidia_smi_query: Transcript | None = None
    """The GPU transcripts that ``gpu`` was read from, when a GPU was probed."""
    results: list[ClaimResult] | list[ClaimResultV1]

    @model_validator(mode="after")
    def _results_fit_version(self) -> ClaimsRecord:
        want = ClaimResult if self.schema_version == CLAIMS_SCHEMA_VERSION else ClaimResultV1
        if not all(type(r) is want for r in self.results):
            check_as = "a list of probes" if want is ClaimResult else "text"
            raise ValueError(f"schema_version {self.schema_version} claims records hold "
                             f"{want.__name__} results (check as {check_as})")
        return self


Record = Annotated[
    CompileRecord | RunRecord | SessionRecord | BenchRecord | ClaimsRecord, Field(discriminator="kind")
]


# --- lessons -----------------------------------------------------------------


class LessonProgram(Model):
    """A program of the lesson."""

    path: str
    """``kernels/*.py``, ``kernels/*.jl`` (cuTile.jl) or ``cpp/*.cu``."""
    checks: list[str]
    """Check names (tolerance-table keys) the program must pass."""


class ResultRow(Model):
    """One row of the lesson's results table."""

    program: str
    """A path listed in ``programs``."""
    check: str
    """A check name, or ``gate`` for the capability-gate row."""
    bound: str
    """As shown to readers, e.g. ``float64, rtol 1e-4, atol 1e-3``."""
    optional: bool = False
    """Needs hardware this project lacks; shows ``?`` and never blocks publishing."""
    hardware: str | None = None
    """For optional rows: the hardware they need (e.g. ``cc < 8.0``)."""
    result: str = "?"
    """``?`` in a draft; publish writes what the deciding record showed."""
    run_id: str | None = None
    """The record behind ``result``, written by publish."""


class Hardware(Model):
    """Where the published evidence ran: written by publish, never by hand."""

    gpu: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    cuda: str | None = None
    tileiras: str | None = None
    cuda_tile: str | None = None
    run_id: str | None = None


PerfMetric = Literal["pct_of_reference", "pct_of_ceiling", "tflops", "gbps", "times_floor", "pct_of_power_limit",
                     "pct_below_max_clock", "pct_of_peak_at_clock"]
"""A ``BenchCase`` field or derived metric a performance claim is about: its rate as % of the library
reference or of the run's ceiling, the rate itself, how many times its roofline floor it took
(``times_floor``), and from bench_version 3 what the GPU did while it ran: its power draw as % of the power
limit, how far below its maximum the SM clock ran, and its rate as % of the dense peak at that clock
(``BenchCase``'s properties say how each is read)."""


class PerfReference(Model):
    """A claim's bound taken from its own history on the GPU class, as an alternative to a fixed ``at_least``:
    the ``percentile`` of the claim's value over the ``last`` counted bench records of the newest record's GPU
    class (its name and the claim's compute capability) before the newest; the newest below it beyond its noise
    has drifted (``judge.perf_claims``)."""

    percentile: float = Field(gt=0, lt=100, allow_inf_nan=False)
    """E.g. 10: the value nine earlier records in ten reached."""
    last: int = Field(ge=3, le=1000)
    """How many earlier counted records the bound is taken over (at least 3 must exist)."""


class PerfClaim(Model):
    """A performance claim the lesson makes; publish needs a bench record that supports it
    (``tileproof.perf_claims``)."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    statement: str = Field(min_length=1)
    """The claim as the lesson words it, e.g. ``tile matmul reaches >= 80% of cuBLAS at 4096³ on sm_90``."""
    case: str = Field(pattern=r"^[^*/\s]+(/[^*/\s]+){2}(/([^*/\s]+|\*))?$")
    """A bench case key, ``name/variant/shape[/tiles+hints]``, or ``name/variant/shape/*``: the best
    over every tile configuration of that shape."""
    metric: PerfMetric
    at_least: float | None = Field(default=None, allow_inf_nan=False, exclude_if=_none)
    """The claimed lower bound, in the metric's units (percent for the ``pct_`` metrics); or ``reference``."""
    compute_capability: str = Field(pattern=r"^[0-9]+\.[0-9]+$")
    """``major.minor``: only bench records from a GPU of exactly this compute capability count."""
    program: str = Field(min_length=1)
    """The bench program whose records can support the claim (``kernels/bench/<name>_bench.py``)."""
    reference: PerfReference | None = ADDED_FIELD
    """Instead of ``at_least``: the bound from the claim's recorded distribution on its GPU class."""

    @model_validator(mode="after")
    def _one_bound(self) -> PerfClaim:
        if (self.at_least is None) == (self.reference is None):
            raise ValueError("a performance claim states exactly one of at_least (a fixed bound) and reference (a "
                             "bound from its recorded history)")
        return self


class ResUsageKernel(Model):
    """One row of a compile-derived REG/SHARED table: a kernel and how the lesson describes it."""

    name: str = Field(min_length=1)
    """The kernel's source name (matched to ``cuobjdump -res-usage``'s mangled functions)."""
    reduction: str
    mechanism: str


class ResUsageTable(Model):
    """A REG/SHARED table in the body (``<!-- res-usage:begin -->``) that publish fills from the
    compile records' ``cuobjdump -res-usage`` of one build: one REG/SHARED pair per CUDA release."""

    program: str
    """The C++ program (under ``cpp/``) the kernels are in; it must be one of the lesson's programs."""
    target: str = Field(pattern=r"^sm_[0-9]+[a-z]?$")
    """The build's target, e.g. ``sm_89``."""
    artifact: ArtifactKind = "tilefatbin"
    """Which build of the program: tile code shows in res-usage only in a ``--tilefatbin`` build."""
    kernels: list[ResUsageKernel] = Field(min_length=1)


class VerifiedRelease(Model):
    """A cuda-tile release every Python program of the lesson passed with (written by publish, from the run
    records that decide it: ``judge.release_matrix``)."""

    cuda_tile: str
    """The cuda-tile version."""
    tileiras: list[str]
    """The tileiras versions those runs used."""
    tileiras_in_range: bool
    """Whether that tileiras is one the release declares; false: it was run outside its range, on purpose
    (``--tileiras-outside-range``), and a plain ``pip install cuda-tile[tileiras]==VERSION`` gets another."""
    run_ids: list[str]
    """The run records behind it, one per Python program."""


PlausibilitySignal = Literal["shim-path", "smi-clock", "launch-too-fast", "host-facts", "gpu-two-hosts"]
"""What a plausibility signal on a record is about (``judge.plausibility``; none is proof): ``shim-path``, a
PATH or PYTHONPATH entry where a fake nvidia-smi or cupy is cheapest to put; ``smi-clock``, an nvidia-smi
transcript dated far from the record; ``launch-too-fast``, a GPU run shorter than its launch could be;
``host-facts``, host facts unlike the runner key's first record; ``gpu-two-hosts``, a GPU uuid under two
runner keys."""


class PlausibilityNote(Model):
    """A plausibility signal on the lesson's evidence, explained for reviewers: with it the signal no
    longer keeps the lesson from publishing nor is an audit finding; the note stays here for every
    reviewer to read and weigh."""

    signal: PlausibilitySignal
    """The kind of signal, as the audit names it (``plausibility-<signal>``)."""
    subject: str = Field(min_length=1)
    """What the signal is about, exactly as the audit prints it: ``PYTHONPATH=/tmp/site``, an nvidia-smi
    transcript's path, a run id, ``cpu_count=2``, a GPU uuid."""
    explanation: str = Field(min_length=20)
    """Why the signal is harmless here, in words a reviewer can check (who set what up, where, when)."""


@schema("lesson", LESSON_VERSION)
class LessonFront(Model):
    """A lesson's YAML front matter (``lessons/<id>.md``), read by ``records.lessons``."""

    lesson_version: Literal[1]
    """The front-matter version; ``1``."""
    id: str
    """The lesson id; equals the file name without ``.md``."""
    title: str
    """The lesson's title as readers see it."""
    status: Literal["draft", "published"]
    """``draft`` until ``nox -s publish -- ID`` finds passing records for every required row; only publish
    writes ``published``."""
    programs: list[LessonProgram]
    """The programs the lesson teaches with, each with the checks it must pass."""
    hardware: Hardware
    """Written by publish from the newest record behind a passed row; every field null in a draft."""
    results: list[ResultRow]
    """One row per program and check (plus an optional ``gate`` row); cells written by publish."""
    performance: list[PerfClaim] = []
    """Performance claims; each needs a supporting bench record before publish (none: no claim)."""
    env: list[EnvName] = []
    """Extra environment variable names this lesson's programs receive (beyond the runner's allowlist)."""
    res_usage: ResUsageTable | None = None
    """A compile-derived REG/SHARED table the body holds (None: none); publish fills it from the
    compile records that attest today's sources."""
    cuda_tile_verified: list[VerifiedRelease] = []
    """The cuda-tile releases the lesson's Python programs were verified on, oldest first: written by publish
    from run records (one release per entry, including the lock's); empty in a draft and in a lesson without
    Python programs (then the key is left out)."""
    plausibility: list[PlausibilityNote] = []
    """Plausibility signals on the lesson's evidence, each explained (none: the evidence has none, or a
    record from a second runner key agrees); written by the author, reviewed like the prose."""
