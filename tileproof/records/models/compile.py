"""Compile records: the builds one ``tileproof compile`` made, what each was made from, and what they cost."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import model_validator

from tileproof.records.base import Model
from tileproof.records.models.common import ADDED_FIELD, SCHEMA_VERSION, Versioned, counter
from tileproof.records.models.facts import CudaTileRelease, Diagnosis, RecordBase, Toolchain
from tileproof.records.models.reports import ProgramFailure
from tileproof.records.models.steps import FileDigest, Step
from tileproof.records.schemas import schema
from tileproof.records.tolerances import TABLE_PATHS

ArtifactKind = Literal["executable", "tilefatbin", "cubin"]
"""What a build produces: a C++ executable, a tile fatbin, or an AOT-exported cubin."""


BuildVerdict = Literal["built", "failed", "refused"]
"""``refused``: the build exited 0 but cannot be used (e.g. no tile code)."""


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
