"""Build a realistic tileproof tree (records + evidence + lessons) in a folder.

Used by tests/test_audit.py, tests/test_report.py and benchmarks/audit_bench.py;
imported by path (``tests/`` is not a package). Everything is written through
``tileproof.store`` so the records are sealed exactly as ``run``/``compile``
write them. The transcripts are real captures from an H200 host, trimmed.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tileproof.records import models as m
from tileproof.records import store

GPU_QUERY = (
    "index, name, uuid, compute_cap, driver_version, memory.total [MiB], "
    "clocks.current.sm [MHz], clocks.current.memory [MHz]\n"
    "0, NVIDIA H200, GPU-3f1c2b9e-7a4d-5e61-8c0f-2d9b6a1e4c77, 9.0, 580.95.05, 143771 MiB, 1980 MHz, 3201 MHz\n"
)

NVIDIA_SMI = """\
Sat Nov 29 11:02:14 2025
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.95.05              Driver Version: 580.95.05      CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H200                    On  |   00000000:19:00.0 Off |                    0 |
| N/A   31C    P0             76W /  700W |       0MiB / 143771MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
"""

PACKAGES = {
    "annotated-types": "0.7.0",
    "cuda-bindings": "13.0.3",
    "cuda-pathfinder": "1.3.2",
    "cuda-tile": "1.7.0",
    "cupy-cuda13x": "13.6.0",
    "fastrlock": "0.8.3",
    "iniconfig": "2.1.0",
    "numpy": "2.3.5",
    "nvidia-cuda-crt": "13.4.92",
    "nvidia-cuda-cuobjdump": "13.4.92",
    "nvidia-cuda-nvcc": "13.4.92",
    "nvidia-cuda-runtime": "13.4.92",
    "nvidia-cuda-tileiras": "13.4.92",
    "nvidia-nvvm": "13.4.92",
    "packaging": "25.0",
    "pip": "25.3",
    "pluggy": "1.6.0",
    "pydantic": "2.12.4",
    "pydantic-core": "2.41.5",
    "pytest": "9.0.1",
    "pyyaml": "6.0.3",
    "setuptools": "80.9.0",
    "typing-extensions": "4.15.0",
    "typing-inspection": "0.4.2",
}

PIP_FREEZE = "".join(
    f"{name.replace('pyyaml', 'PyYAML').replace('typing-extensions', 'typing_extensions')}=={v}\n"
    for name, v in PACKAGES.items()
) + "-e git+https://example.invalid/tileproof.git@0d1f2e3c#egg=tileproof\n"

TOOLS = {"nvcc": "13.4.92", "tileiras": "13.4.92", "ptxas": "13.4.92", "cuobjdump": "13.4.92"}
BIN = "/opt/venv/lib/python3.12/site-packages/nvidia/cu13/bin"
T0 = datetime(2025, 11, 29, 11, 0, 0, tzinfo=timezone.utc)

TOLERANCES_PY = """\
from typing import NamedTuple


class Tolerance(NamedTuple):
    rtol: float
    atol: float


TOLERANCES = {
    "vector_add": Tolerance(rtol=1.1920928955078125e-07, atol=0.0),
    "softmax": Tolerance(rtol=1e-05, atol=1e-06),
}
"""

VECTOR_ADD = '"""Lesson program: c = a + b."""\nprint("vector_add")\n'
SOFTMAX = '"""Lesson program: row softmax."""\nprint("softmax")\n'


COMMIT = "0d1f2e3c4b5a69788796a5b4c3d2e1f00d1f2e3c"
"""The commit records name (``synthetic_tree(..., commit=)`` sets it: a tree committed first names a real one)."""


def git() -> m.GitState:
    return m.GitState(commit=COMMIT, dirty=False)


def host() -> m.HostFacts:
    return m.HostFacts(system="Linux", release="6.8.0-85-generic", machine="x86_64", python="3.12.3", cpu_count=16)


def toolchain(tools: dict[str, str] | None = None) -> m.Toolchain:
    tools = tools or TOOLS
    return m.Toolchain(
        version=1, source="pip",
        tools=[m.ToolVersion(name=n, path=f"{BIN}/{n}", version=v) for n, v in tools.items()],
        packages={k: v for k, v in PACKAGES.items() if k.startswith(("nvidia-", "cuda-"))},
        major_minor="13.4",
        coherent=True,
        problems=[],
    )


GPUS = {
    "H200": ("NVIDIA H200", "GPU-3f1c2b9e-7a4d-5e61-8c0f-2d9b6a1e4c77", "9.0", 143771, 1980, 3201),
    "H200-second": ("NVIDIA H200", "GPU-c7e0a5d3-1f2b-4a96-8e3d-5b4f0c9a2e61", "9.0", 143771, 1980, 3201),
    "A100": ("NVIDIA A100-SXM4-80GB", "GPU-8a2d4c61-0b3e-4f57-9d21-6e0c5b7a3f18", "8.0", 81920, 1410, 1593),
    "T4": ("Tesla T4", "GPU-51e7c0d2-93ab-4c8e-b6f4-27d91a0e8c35", "7.5", 15360, 1590, 5000),
}
"""Synthetic hosts: (name, uuid, compute capability, MiB, SM MHz, memory MHz). ``H200-second`` is another
machine's board: a GPU uuid is per board, and one seen under two runner keys is a plausibility signal."""


def gpu(which: str = "H200") -> m.GpuFacts:
    name, uuid, cc, mib, sm, mem = GPUS[which]
    return m.GpuFacts(
        index=0, name=name, uuid=uuid, compute_capability=cc, runtime_compute_capability=cc,
        driver_version="580.95.05", memory_total_mib=mib, clocks_sm_mhz=sm, clocks_mem_mhz=mem,
    )


def gpu_query(which: str = "H200") -> str:
    name, uuid, cc, mib, sm, mem = GPUS[which]
    header = GPU_QUERY.splitlines(keepends=True)[0]
    return header + f"0, {name}, {uuid}, {cc}, 580.95.05, {mib} MiB, {sm} MHz, {mem} MHz\n"


def smi_at(session_id: str) -> str:
    """The nvidia-smi transcript as captured at the session's start: its first line is the host's clock."""
    t = store.run_id_time(session_id) or T0
    return f"{t:%a %b} {t.day:2d} {t:%H:%M:%S %Y}\n" + NVIDIA_SMI.split("\n", 1)[1]


def environment(root: Path, session_id: str, *, freeze: str = PIP_FREEZE, which: str = "H200") -> m.Environment:
    """Captured once per session: the transcripts go under evidence/<session id>/."""
    return m.Environment(
        environment_version=1, session_id=session_id,
        gpu=gpu(which),
        toolchain=toolchain(),
        toolchain_env="clean",
        versions={"cuda-tile": "1.7.0", "cupy": "13.6.0", "numpy": "2.3.5", "python": "3.12.3",
                  "os": "Ubuntu 24.04.3 LTS", "kernel": "6.8.0-85-generic"},
        packages=dict(PACKAGES),
        env={"CUDA_VISIBLE_DEVICES": "0", "PATH": f"{BIN}:/usr/bin:/bin", "VIRTUAL_ENV": "/opt/venv"},
        pip_freeze=store.write_evidence(root, session_id, "pip-freeze.txt", freeze),
        nvidia_smi=store.write_evidence(root, session_id, "nvidia-smi.txt",
                                        smi_at(session_id).replace("NVIDIA H200", GPUS[which][0][:18].ljust(11))),
        nvidia_smi_query=store.write_evidence(root, session_id, "nvidia-smi-query.csv", gpu_query(which)),
    )


def check(name: str, passed: bool = True) -> m.Check:
    return m.Check(
        name=name, shape=[4096], dtype="float32", rtol=1.1920928955078125e-07, atol=0.0, checked=4096,
        mismatches=0 if passed else 3, max_abs_err=0.0 if passed else 0.25, max_rel_err=0.0 if passed else 0.5,
        first_failure=None if passed else m.FirstFailure(index=[17], got=1.25, want=1.0), passed=passed,
    )


def report_json(program: str, checks: list[m.Check], gpu: m.GpuFacts) -> str:
    """What kernels/harness.py writes (indent=2, its own key order)."""
    gated = float(gpu.compute_capability) < 8.0
    passed = not gated and bool(checks) and all(c.passed for c in checks)
    body = {
        "report_version": 1, "program": program, "seed": 1234,
        "device": {"name": gpu.name, "compute_capability": gpu.compute_capability},
        "gate": "below-sm80" if gated else "ok",
        "gate_message": (f"{gpu.name} has compute capability {gpu.compute_capability}; cuTile needs 8.0+"
                         if gated else ""),
        "checks": [c.model_dump(mode="json") for c in checks], "passed": passed,
    }
    return json.dumps(body, indent=2) + "\n"


def program_digests(root: Path, program: str) -> list[m.FileDigest]:
    return [store.digest(root, root / program)]


def program_list_digest(root: Path, lesson_id: str) -> str:
    """Today's digest of a lesson's program list (what ``run`` records)."""
    from tileproof.records import lessons

    return lessons.program_list_digest(lessons.load(root, lesson_id).front)


def run_record(root: Path, env: m.Environment, program: str, *, checks: list[str], lessons: list[str],
               when: datetime, passed: bool = True, lesson_programs: dict[str, str] | None = None,
               sources: list[m.FileDigest] | None = None) -> m.RunRecord:
    """One program run with its three transcripts, verdict chosen as ``execute`` does."""
    run_id = store.new_run_id("run", when)
    gated = float(env.gpu.compute_capability) < 8.0
    results = [] if gated else [check(c, passed) for c in checks]
    stdout = env.gpu.name + " is below sm_80: skipped\n" if gated else \
        "".join(f"check {c.name}: {'ok' if c.passed else 'FAILED'}\n" for c in results)
    report_text = report_json(program, results, env.gpu)
    report_file = store.write_evidence(root, run_id, "check-report.json", report_text)
    exit_code = 0 if passed and not gated else 1
    step = m.Step(
        step_version=1, name="run", argv=["python", program, "--report", f"evidence/{run_id}/check-report.json"],
        started=when, ended=when + timedelta(seconds=2), duration_s=2.0, exit_code=exit_code,
        stdout=store.write_evidence(root, run_id, "run.stdout.txt", stdout),
        stderr=store.write_evidence(root, run_id, "run.stderr.txt", ""),
    )
    verdict = "gated" if gated else ("passed" if passed else "failed")
    return m.RunRecord(
        run_version=1, schema_version=1, run_id=run_id, created=when, tileproof_version="0.1.0", git=git(), host=host(),
        kind="run", environment=env, program=program, lessons=lessons,
        lesson_programs=lesson_programs if lesson_programs is not None
        else {lid: program_list_digest(root, lid) for lid in lessons},
        sources=sources if sources is not None else program_digests(root, program), binary=None, step=step,
        report=m.CheckReport.model_validate_json(report_text), report_file=report_file, verdict=verdict,
        reason={"passed": "every check passed", "failed": "1 check failed", "gated": "GPU below sm_80"}[verdict],
    )


def session_record(session_id: str, runs: list[m.RunRecord], when: datetime) -> m.SessionRecord:
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    return m.SessionRecord(
        schema_version=1, run_id=session_id, created=when, tileproof_version="0.1.0", git=git(), host=host(),
        kind="session", session_id=session_id, runs=[r.run_id for r in runs], verdict_counts=counts,
    )


def compile_record(root: Path, programs: list[str], when: datetime) -> m.CompileRecord:
    run_id = store.new_run_id("compile", when)
    builds = []
    for i, program in enumerate(programs):
        stem = Path(program).stem
        step = m.Step(
            step_version=1, name=f"aot-{stem}-sm_90",
            argv=["python", "-m", "tileproof.toolchain.aot", program, stem, "sm_90", f"build/{stem}.cubin"],
            started=when, ended=when + timedelta(seconds=1), duration_s=1.0, exit_code=0,
            stdout=store.write_evidence(root, run_id, f"aot-{stem}-sm_90.stdout.txt", f"exported {stem}\n"),
            stderr=store.write_evidence(root, run_id, f"aot-{stem}-sm_90.stderr.txt", ""),
        )
        builds.append(m.BuildResult(
            program=program, target="sm_90", artifact_kind="cubin", key=f"{i:064x}", reused_from=None, step=step,
            artifact=m.FileDigest(path=f"build/{stem}.cubin", sha256=f"{i + 1:064x}"), res_usage=[], diagnoses=[],
            verdict="built",
        ))
    return m.CompileRecord(
        compile_version=1,
        schema_version=1, run_id=run_id, created=when, tileproof_version="0.1.0", git=git(), host=host(),
        kind="compile", toolchain=toolchain(), targets=["sm_90"],
        sources=[store.digest(root, root / p) for p in programs], builds=builds, api=None, passed=True,
    )


def write_lesson(root: Path, lesson_id: str, programs: dict[str, list[str]], status: str = "draft",
                 results: list[m.ResultRow] | None = None, hardware: m.Hardware | None = None) -> Path:
    """A lesson as an author writes it (draft: every result ``?``)."""
    import yaml

    rows = results or [m.ResultRow(program=p, check=c, bound="float32, rtol 1.2e-07, atol 0")
                       for p, checks in programs.items() for c in checks]
    front = m.LessonFront(
        lesson_version=1, id=lesson_id, title=f"Lesson {lesson_id}", status=status,
        programs=[m.LessonProgram(path=p, checks=c) for p, c in programs.items()],
        hardware=hardware or m.Hardware(), results=rows,
    )
    path = root / "lessons" / f"{lesson_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = f"\n# {front.title}\n\n<!-- results:begin -->\n<!-- results:end -->\n"
    path.write_text("---\n" + yaml.safe_dump(front.model_dump(mode="json"), sort_keys=False) + "---\n" + body)
    return path


def clean_tree(root: Path) -> dict:
    """A small clean tree: one compile record, one H200 session running two
    programs (both pass) closed by its session record, a published lesson whose
    evidence is complete and a draft lesson (02-softmax) whose evidence is not:
    its program never ran on an sm_80+ GPU... it ran, but only on a T4 (gated).
    Returns the records a test needs."""
    (root / "kernels").mkdir(parents=True, exist_ok=True)
    (root / "kernels" / "vector_add.py").write_text(VECTOR_ADD)
    (root / "kernels" / "softmax.py").write_text(SOFTMAX)
    (root / "kernels" / "tolerances.py").write_text(TOLERANCES_PY)
    write_lesson(root, "01-vector-add", {"kernels/vector_add.py": ["vector_add"]})
    write_lesson(root, "02-softmax", {"kernels/softmax.py": ["softmax"]}, status="draft")
    compiled = compile_record(root, ["kernels/vector_add.py", "kernels/softmax.py"], T0)
    store.write_record(root, compiled)

    def session(which: str, programs: dict[str, tuple[list[str], list[str]]], when: datetime):
        sid = store.new_run_id("session", when)
        env = environment(root, sid, which=which)
        runs = []
        for i, (program, (checks, lessons)) in enumerate(programs.items()):
            runs.append(run_record(root, env, program, checks=checks, lessons=lessons,
                                   when=when + timedelta(seconds=10 * (i + 1))))
            store.write_record(root, runs[-1])
        closing = session_record(sid, runs, when + timedelta(minutes=1))
        store.write_record(root, closing)
        return env, runs, closing

    env, runs, closing = session("H200", {"kernels/vector_add.py": (["vector_add"], ["01-vector-add"])},
                                 T0 + timedelta(minutes=5))
    t4_env, t4_runs, t4_closing = session("T4", {"kernels/softmax.py": (["softmax"], ["02-softmax"]),
                                                 "kernels/vector_add.py": (["vector_add"], ["01-vector-add"])},
                                          T0 + timedelta(minutes=10))
    _publish(root, "01-vector-add")
    return {"compile": compiled, "run": runs[0], "session": closing, "env": env,
            "gated": t4_runs[0], "t4_session": t4_closing}


def _publish(root: Path, lesson_id: str) -> None:
    """Publish the lesson with ``tileproof publish`` itself (the gate decides)."""
    from tileproof.commands import publish

    code, lines = publish.publish(root, lesson_id)
    assert code == 0, "\n".join(lines)


def synthetic_tree(root: Path, n_records: int, runs_per_session: int = 49, commit: str | None = None) -> int:
    """``n_records`` records (runs, their sessions, a compile record per 50
    sessions) across H200/A100/T4 hosts, 3 transcripts per run and 3 per session.
    ``commit``: the commit the records name (one holding the course this writes, for a tree that is a git
    checkout); 0 records writes the course alone. Returns the number of evidence files written."""
    global COMMIT
    if commit is not None:
        COMMIT = commit
    programs = {f"kernels/prog{i:02d}.py": f"check{i:02d}" for i in range(12)}
    (root / "kernels").mkdir(parents=True, exist_ok=True)
    for path, name in programs.items():
        (root / path).write_text(f'"""Synthetic program {name}."""\n')
    lesson_ids = []
    for i in range(0, len(programs), 3):
        lid = f"{i // 3 + 1:02d}-synthetic"
        write_lesson(root, lid, {p: [c] for p, c in list(programs.items())[i:i + 3]})
        lesson_ids.append(lid)
    lesson_of = {p: lesson_ids[i // 3] for i, p in enumerate(programs)}
    list_digest = {lid: program_list_digest(root, lid) for lid in lesson_ids}
    sources = {p: program_digests(root, p) for p in programs}
    written = evidence = 0
    when = T0
    s = 0
    while written < n_records:
        if s % 50 == 0:
            store.write_record(root, compile_record(root, list(programs)[:4], when))
            written += 1
            evidence += 8
        which = ("H200", "H200", "A100", "T4")[s % 4]
        sid = store.new_run_id("session", when)
        env = environment(root, sid, which=which)
        evidence += 3
        runs = []
        for k in range(min(runs_per_session, max(n_records - written - 1, 1))):
            program = list(programs)[k % len(programs)]
            lid = lesson_of[program]
            when += timedelta(seconds=7)
            run = run_record(root, env, program, checks=[programs[program]], lessons=[lid], when=when,
                             passed=(s + k) % 23 != 0, lesson_programs={lid: list_digest[lid]},
                             sources=sources[program])
            store.write_record(root, run)
            runs.append(run)
            evidence += 3
        store.write_record(root, session_record(sid, runs, when))
        written += len(runs) + 1
        s += 1
        when += timedelta(minutes=3)
    return evidence


def aged(files) -> None:
    """Every file of ``files`` made ten seconds old, then the racy window waited out (the ctime ``utime`` sets must
    age too), as time does: a first read may index them (``catalog.index``)."""
    from tileproof.catalog import index as file_index

    old = time.time() - 10
    for path in files:
        os.utime(path, (old, old))
    time.sleep(file_index.RACY_NS / 1e9 + 0.1)
