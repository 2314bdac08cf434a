"""Run records: one program's run, the environment its session captured once, and the session record
``run`` writes last."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import model_validator

from tileproof.records.base import Model
from tileproof.records.models.common import ADDED_FIELD, SCHEMA_VERSION, Versioned, counter
from tileproof.records.models.facts import (
    CudaTileRelease,
    OutsideCheck,
    OutsideVerdict,
    RecordBase,
    ReleaseFolder,
    Toolchain,
)
from tileproof.records.models.reports import CheckReport, ProgramFailure
from tileproof.records.models.steps import FileDigest, Step, Transcript
from tileproof.records.redact import RedactionRule
from tileproof.records.schemas import schema
from tileproof.records.tolerances import TABLE_PATHS

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
