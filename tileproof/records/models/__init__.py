"""Every on-disk shape tileproof reads or writes, as pydantic models: one module per kind.

``common`` (the verdicts, the version counter), ``reports`` (a program's check report), ``steps``
(subprocesses and their transcripts), ``facts`` (what every record shares), then a module per record
kind: ``compile``, ``run``, ``bench``, ``claims``; ``record`` (the union over ``kind``) and ``lessons``
(the front matter). This module hands every public name on, so ``tileproof.records.models.RunRecord``
is the one import path outside the package.

Records (``runs/*.json``) are a discriminated union over ``kind``. Each record
carries ``schema_version``; readers check it before anything else (see
``store.load_record``). ``schema/`` is generated from these classes by
``nox -s schema``: never edit the JSON Schema by hand.
"""

from __future__ import annotations

from tileproof.records.base import Model
from tileproof.records.models.bench import (
    BENCH_VERSION,
    LOAD_BENCH_VERSION,
    ROOFLINE_BENCH_VERSION,
    SECOND_LOOK_COPY_PCT,
    WALL_BENCH_VERSION,
    BenchCase,
    BenchRecord,
    Bound,
    Ceiling,
    ClockEventReason,
    GpuLoad,
    PairedRatio,
    PowerReading,
    Roofline,
    SecondLook,
    SecondLookRule,
)
from tileproof.records.models.claims import (
    CLAIMS_SCHEMA_VERSION,
    CheckKind,
    ClaimResult,
    ClaimResultV1,
    ClaimsRecord,
    ClaimVerdictName,
    ProbeKind,
    ProbeRole,
)
from tileproof.records.models.common import (
    ADDED_FIELD,
    AS_READ,
    SCHEMA_VERSION,
    BlockerKind,
    NonFinite,
    Number,
    Verdict,
    Versioned,
    counter,
)
from tileproof.records.models.compile import (
    COMPILE_VERSION,
    CUDA_TILE_COMPILE_VERSION,
    ENTRY_COMPILE_VERSION,
    ApiInventory,
    ArtifactKind,
    BuildResult,
    BuildVerdict,
    CompileRecord,
    ProgramInputs,
    ResUsage,
)
from tileproof.records.models.facts import (
    TOOLCHAIN_VERSION,
    CudaTileRelease,
    Diagnosis,
    GitState,
    HostFacts,
    OutsideCheck,
    OutsideVerdict,
    RecordBase,
    ReleaseFolder,
    Toolchain,
    ToolchainProblem,
    ToolchainProblemKind,
    ToolVersion,
)
from tileproof.records.models.lessons import (
    LESSON_VERSION,
    EnvName,
    Hardware,
    LessonFront,
    LessonProgram,
    PerfClaim,
    PerfMetric,
    PlausibilityNote,
    PlausibilitySignal,
    ResultRow,
    ResUsageKernel,
    ResUsageTable,
    VerifiedRelease,
)
from tileproof.records.models.record import READABLE_VERSIONS, Record
from tileproof.records.models.reports import (
    REPORT_VERSION,
    Check,
    CheckReport,
    DeviceId,
    FirstFailure,
    OutsideProblem,
    OutsideStatus,
    ProgramFailure,
)
from tileproof.records.models.run import (
    CUDA_TILE_RUN_VERSION,
    ENTRY_RUN_VERSION,
    ENVIRONMENT_VERSION,
    OUTSIDE_RUN_VERSION,
    RELEASE_FOLDER_RUN_VERSION,
    RUN_VERSION,
    SESSION_CHECKER_RUN_VERSION,
    TOOLCHAIN_ABSENT_FIX,
    TOOLCHAIN_ABSENT_RUN_VERSION,
    TOPOLOGY_ENVIRONMENT_VERSION,
    Environment,
    GpuFacts,
    RunRecord,
    RunVerdict,
    SessionRecord,
    SlurmJob,
    TileproofKind,
    TileproofOrigin,
)
from tileproof.records.models.steps import (
    SHARED_MAX,
    STEP_VERSION,
    Containment,
    FileDigest,
    Isolation,
    Step,
    StreamCut,
    Transcript,
    TranscriptRef,
    share,
    steps_of,
    unisolated,
)

__all__ = [
    "Model",
    "SCHEMA_VERSION", "Verdict", "BlockerKind", "NonFinite", "Number", "ADDED_FIELD", "counter", "AS_READ",
    "Versioned", "REPORT_VERSION", "DeviceId", "FirstFailure", "Check", "CheckReport", "OutsideStatus",
    "OutsideProblem", "ProgramFailure", "Transcript", "SHARED_MAX", "share", "TranscriptRef", "FileDigest",
    "StreamCut", "Containment", "Isolation", "STEP_VERSION", "Step", "steps_of", "unisolated", "OutsideCheck",
    "OutsideVerdict", "GitState", "HostFacts", "ToolVersion", "ToolchainProblemKind", "ToolchainProblem",
    "TOOLCHAIN_VERSION", "Toolchain", "ReleaseFolder", "CudaTileRelease", "Diagnosis", "RecordBase", "ArtifactKind",
    "BuildVerdict", "ResUsage", "BuildResult", "COMPILE_VERSION", "ENTRY_COMPILE_VERSION",
    "CUDA_TILE_COMPILE_VERSION", "ProgramInputs", "ApiInventory", "CompileRecord", "RunVerdict",
    "TOOLCHAIN_ABSENT_FIX", "TOOLCHAIN_ABSENT_RUN_VERSION", "ENTRY_RUN_VERSION", "CUDA_TILE_RUN_VERSION",
    "RELEASE_FOLDER_RUN_VERSION", "OUTSIDE_RUN_VERSION", "SESSION_CHECKER_RUN_VERSION", "RUN_VERSION", "GpuFacts",
    "TileproofKind", "TileproofOrigin", "ENVIRONMENT_VERSION", "TOPOLOGY_ENVIRONMENT_VERSION", "SlurmJob",
    "Environment", "RunRecord", "SessionRecord", "BENCH_VERSION", "ROOFLINE_BENCH_VERSION", "LOAD_BENCH_VERSION",
    "WALL_BENCH_VERSION", "SECOND_LOOK_COPY_PCT", "Bound", "Ceiling", "Roofline", "SecondLookRule", "SecondLook",
    "ClockEventReason", "PowerReading", "GpuLoad", "BenchCase", "PairedRatio", "BenchRecord",
    "CLAIMS_SCHEMA_VERSION", "ClaimVerdictName", "CheckKind", "ProbeRole", "ProbeKind", "ClaimResult",
    "ClaimResultV1", "ClaimsRecord", "READABLE_VERSIONS", "Record", "LESSON_VERSION", "EnvName", "LessonProgram",
    "ResultRow", "Hardware", "PerfMetric", "PerfClaim", "ResUsageKernel", "ResUsageTable", "VerifiedRelease",
    "PlausibilitySignal", "PlausibilityNote", "LessonFront",
]
