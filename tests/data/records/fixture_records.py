"""Builders for FIXTURE run records: made by hand for tests, never produced by a GPU.

Every record built here has a run id starting with ``FIXTURE-``, host system
``fixture`` and a reason that says so. They live under tests/ only; a test fails if
one ever appears in the repository's runs/. ``make_fixtures.py`` uses these
builders to (re)write the committed day-79 tree next to this file.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone

from tileproof.records.lessons import program_list_digest
from tileproof.records.models import (
    CLAIMS_SCHEMA_VERSION,
    Check,
    CheckReport,
    ClaimResult,
    ClaimsRecord,
    CudaTileRelease,
    DeviceId,
    Environment,
    FileDigest,
    GitState,
    GpuFacts,
    HostFacts,
    LessonFront,
    OutsideVerdict,
    ProbeKind,
    ProgramFailure,
    RunRecord,
    Step,
    Toolchain,
    ToolchainProblem,
    ToolVersion,
    Transcript,
)
from tileproof.records.store import seal_of

PREFIX = "FIXTURE-"
COMMIT = "f1c7ee00" + "0" * 32
T0 = datetime(2026, 9, 1, 12, 0, 0, tzinfo=timezone.utc)
QUERY_HEADER = ("index, name, uuid, compute_cap, driver_version, memory.total [MiB], "
                "clocks.current.sm [MHz], clocks.current.memory [MHz]\n")
H200 = dict(name="NVIDIA H200", uuid="GPU-f1c7ee00-0000-4000-8000-000000000090", cc="9.0",
            driver="580.95.05", memory="143771 MiB", sm="1980 MHz", mem="3201 MHz")
T4 = dict(name="Tesla T4", uuid="GPU-f1c7ee00-0000-4000-8000-000000000075", cc="7.5",
          driver="595.84", memory="15360 MiB", sm="585 MHz", mem="5000 MHz")


def sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def query_csv(gpu: dict, cc: str | None = None) -> str:
    """An ``nvidia-smi --query-gpu=... --format=csv`` transcript for one GPU."""
    g = dict(gpu, cc=cc or gpu["cc"])
    return QUERY_HEADER + (f"0, {g['name']}, {g['uuid']}, {g['cc']}, {g['driver']}, {g['memory']}, "
                           f"{g['sm']}, {g['mem']}\n")


def transcript(path: str, data: bytes | str) -> Transcript:
    data = data.encode() if isinstance(data, str) else data
    return Transcript(path=path, sha256=sha(data), bytes=len(data))


def toolchain(nvcc: str = "13.4.92", tileiras: str = "13.4.92", nvvm: str = "13.4.92", coherent: bool = True,
              problems: tuple[ToolchainProblem | str, ...] = ()) -> Toolchain:
    """Typed problems make a version-2 toolchain; text ones a version-1 (old) one."""
    return Toolchain(
        version=1 if any(isinstance(p, str) for p in problems) else 2,
        source="pip",
        tools=[ToolVersion(name=n, path=f"/fixture/nvidia/cu13/bin/{n}", version=v)
               for n, v in (("tileiras", tileiras), ("ptxas", nvcc), ("nvvm", nvvm), ("nvcc", nvcc))],
        packages={"cuda-tile": "1.7.0", "nvidia-cuda-nvcc": nvcc, "nvidia-cuda-tileiras": tileiras,
                  "nvidia-nvvm": nvvm},
        major_minor=".".join(nvcc.split(".")[:2]) if coherent else None,
        coherent=coherent,
        problems=list(problems),
    )


def problem(kind: str, subject: str, detail: str) -> ToolchainProblem:
    return ToolchainProblem(kind=kind, subject=subject, detail=detail)


def check(name: str, rtol: float, atol: float, passed: bool = True, err: float = 2.5e-5) -> Check:
    return Check(name=name, shape=[256, 128], dtype="float32", rtol=rtol, atol=atol, checked=256 * 128,
                 mismatches=0 if passed else 3, max_abs_err=err, max_rel_err=err / 2, first_failure=None,
                 passed=passed)


def run_record(*, n: int, program: str, front: LessonFront | None, sources: dict[str, str],
               checks: list[Check], query: Transcript | None, gpu: dict | None = H200, session: str = "FIXTURE-session",
               runtime_cc: str | None = "same", report_cc: str | None = "same", verdict: str = "passed",
               exit_code: int | None = None, tc: Toolchain | None = None, toolchain_env: str = "clean",
               lesson_programs: dict[str, str] | None = None, binary: FileDigest | None = None,
               seal: bool = True, tolerances: dict[str, str] | None = None,
               cuda_tile: CudaTileRelease | None = None, failure: ProgramFailure | None = None,
               outside: OutsideVerdict | None = None) -> RunRecord:
    """One sealed FIXTURE run record (n orders records in time: larger is newer); run_version 4 (a cuda-tile
    release and a failure named) when ``cuda_tile`` or ``failure`` is given, else 3 (entries attested one by
    one) when ``tolerances`` is given, else run_version 1; run_version 5 (checked outside the program) when
    ``outside`` is given."""
    run_id = f"{PREFIX}{(T0 + timedelta(minutes=n)).strftime('%Y%m%dT%H%M%SZ')}-run-{n:08x}"
    created = T0 + timedelta(minutes=n)
    facts = None
    if gpu is not None:
        facts = GpuFacts(index=0, name=gpu["name"], uuid=gpu["uuid"], compute_capability=gpu["cc"],
                         runtime_compute_capability=gpu["cc"] if runtime_cc == "same" else runtime_cc,
                         driver_version=gpu["driver"], memory_total_mib=int(gpu["memory"].split()[0]),
                         clocks_sm_mhz=int(gpu["sm"].split()[0]), clocks_mem_mhz=int(gpu["mem"].split()[0]))
    gate_ok = gpu is not None and tuple(map(int, gpu["cc"].split("."))) >= (8, 0)
    report = CheckReport(
        report_version=1, program=program, seed=1234,
        device=DeviceId(name=gpu["name"], compute_capability=gpu["cc"] if report_cc == "same" else report_cc)
        if gpu and report_cc is not None else None,
        gate="ok" if gate_ok else ("below-sm80" if gpu else "no-gpu"),
        gate_message="FIXTURE gate line",
        checks=checks if gate_ok else [],
        passed=gate_ok and bool(checks) and all(c.passed for c in checks),
    )
    if exit_code is None:
        exit_code = 0 if verdict == "passed" else 1
    out = transcript(f"evidence/{run_id}/run.stdout.txt", "FIXTURE\n")
    version = 5 if outside is not None else 4 if cuda_tile is not None or failure is not None \
        else 1 if tolerances is None else 3
    installed = cuda_tile.version if cuda_tile is not None else "1.7.0"
    rec = RunRecord(
        schema_version=1, run_version=version, kind="run", run_id=run_id, created=created,
        tileproof_version="0.1.0", tolerances=tolerances or {}, cuda_tile=cuda_tile, failure=failure,
        git=GitState(commit=COMMIT, dirty=False),
        host=HostFacts(system="fixture", release="fixture", machine="x86_64", python="3.11.7", cpu_count=16),
        environment=Environment(
            environment_version=1,
            session_id=session, gpu=facts, toolchain=tc or toolchain(), toolchain_env=toolchain_env,
            versions={"cuda-tile": installed, "cupy": "14.2.0", "numpy": "2.4.6", "python": "3.11.7"},
            packages={"cuda-tile": installed}, env={},
            pip_freeze=transcript(f"evidence/{session}/pip-freeze.txt", f"cuda-tile=={installed}\n"),
            nvidia_smi=None, nvidia_smi_query=query,
        ),
        program=program,
        lessons=[front.id] if front else [],
        lesson_programs=lesson_programs if lesson_programs is not None else
        ({front.id: program_list_digest(front)} if front else {}),
        sources=[FileDigest(path=p, sha256=d) for p, d in sources.items()],
        binary=binary,
        step=Step(step_version=1,
                  name="run", argv=["python", program], started=created, ended=created + timedelta(seconds=3),
                  duration_s=3.0, exit_code=exit_code, stdout=out, stderr=out),
        report=report, report_file=None, verdict=verdict,
        reason="FIXTURE: hand-made test record, never produced by a GPU", outside=outside,
    )
    return rec.model_copy(update={"seal": seal_of(rec)}) if seal else rec


def cuda_tile(version: str, tileiras: str = "13.4.92", in_range: bool = True) -> CudaTileRelease:
    """A run's cuda-tile release facts (a tileiras outside the range only as --tileiras-outside-range records it)."""
    requires = "cuda-toolkit[nvcc,nvvm,tileiras]<13.5,>=13.2" if in_range else "nvidia-cuda-tileiras<13.3,>=13.2"
    return CudaTileRelease(version=version, requires=requires, tileiras=tileiras, in_range=in_range,
                           outside_range_allowed=not in_range)


def claims_record(*, n: int, document: str, claim: str, tc: Toolchain | None = None,
                  verdict: str = "unverifiable-here", why: str = "FIXTURE: not checkable by a program") -> ClaimsRecord:
    """One sealed FIXTURE claims record holding one result for ``document`` (n orders records in time)."""
    run_id = f"{PREFIX}{(T0 + timedelta(minutes=n)).strftime('%Y%m%dT%H%M%SZ')}-claims-{n:08x}"
    result = ClaimResult(id=claim, document=document, statement=f"FIXTURE: {claim}", verdict=verdict, why=why,
                         check=[ProbeKind(role="check", kind="not-checkable")], toolchain=None, steps=[])
    rec = ClaimsRecord(
        schema_version=CLAIMS_SCHEMA_VERSION, kind="claims", run_id=run_id, created=T0 + timedelta(minutes=n),
        tileproof_version="0.1.0", git=GitState(commit=COMMIT, dirty=False),
        host=HostFacts(system="fixture", release="fixture", machine="x86_64", python="3.11.7", cpu_count=16),
        toolchain=tc or toolchain(), gpu=None, claims_files=[], results=[result])
    return rec.model_copy(update={"seal": seal_of(rec)})
