"""fleet.devices: ``tileproof run --devices`` on a host of four GPUs (two for the plan alone), faked by an
``nvidia-smi`` that answers with made-up transcripts of such hosts (tests/data/gpu/README.md): one real child
session per GPU, each record naming its GPU (index, uuid, PCI bus id, and ``CUDA_VISIBLE_DEVICES`` in
nvidia-smi's order) with the host's ``nvidia-smi topo -m`` in its session's evidence; a GPU whose session dies
mid-run, or that nvidia-smi reports broken, leaves its records and a named gap while the others complete. One
fan-out serves every test that reads what it left."""

import importlib.util
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from own_processes import fresh_name, in_proc

from tileproof.fleet import devices
from tileproof.records.models import RunRecord, SessionRecord
from tileproof.records.parsers import parse_gpu_query
from tileproof.records.store import load_records
from tileproof.runner import children, session

REPO = Path(__file__).resolve().parents[1]
GPU_DATA = REPO / "tests" / "data" / "gpu"
_spec = importlib.util.spec_from_file_location("fleet_course", REPO / "tests" / "data" / "fleet" / "course.py")
course = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(course)

_bench = importlib.util.spec_from_file_location("multi_gpu_wall", REPO / "tests" / "benchmarks" / "multi_gpu_wall.py")
bench = importlib.util.module_from_spec(_bench)
_bench.loader.exec_module(bench)

DIES = "kernels/p_dies.py"
"""Sorted between the course's two programs: on GPU 1 it asks ``SessionKiller`` to kill its session's process
(SIGKILL, as the OOM killer or a driver reset would) after one program was recorded and before the last."""
DIES_BODY = """AOT_SIGNATURES = {{}}  # a program (toolchain.build.is_program)
import os, signal, sys

if os.environ.get("CUDA_VISIBLE_DEVICES") == "1":
    open("/proc/self/comm", "w").write({request!r})  # behind the wall it can neither see its session nor write
    signal.pause()  # outside: it asks by its name, and the test kills the session; it dies with it
sys.exit(3)  # elsewhere: no report, an error record
"""


class SessionKiller:
    """Watches for the program's request (a process of the name ``request``); then SIGKILLs the ``tileproof run``
    pinned to GPU 1 under ``root``.

    The program runs behind the wall (its own PID namespace, nothing outside its scratch writable), so it cannot
    name its session's process; this process can: every process of the machine is in its ``/proc``."""

    def __init__(self, request: str, root: Path):
        self.request, self.root = request, root
        self.killed: list[int] = []
        """The pid it killed (one at most)."""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _session(self) -> int | None:
        pairs = [("--root", str(self.root)), ("--device", "1")]
        for entry in Path("/proc").iterdir():
            try:
                argv = (entry / "cmdline").read_bytes().decode().split("\0")
            except (OSError, ValueError):
                continue
            if argv[1:4] == ["-m", "tileproof", "run"] and all(
                    any(argv[i:i + 2] == [flag, value] for i in range(len(argv))) for flag, value in pairs):
                return int(entry.name)
        return None

    def _watch(self) -> None:
        while not self.stop.wait(0.05):
            if in_proc(self.request) and (pid := self._session()) is not None:
                os.kill(pid, signal.SIGKILL)
                self.killed.append(pid)
                return

    def __enter__(self) -> "SessionKiller":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def fake_host(tmp_path: Path, monkeypatch, gpus: int) -> Path:
    """``nvidia-smi`` first on PATH, answering as a host of ``gpus`` H200s; returns its query transcript."""
    query, topo = GPU_DATA / f"nvidia-smi-query-{gpus}gpu.csv", GPU_DATA / f"nvidia-smi-topo-{gpus}gpu.txt"
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\ncase "$1" in --query-gpu=*) cat {query} ;; topo) cat {topo} ;; '
                   '*) echo "FIXTURE nvidia-smi" ;; esac\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")  # a multi-GPU host's settings: every child keeps them
    monkeypatch.setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    monkeypatch.setenv("NVSHMEM_DISABLE_NVLS", "1")
    return query


def _course(tmp_path: Path) -> tuple[Path, SessionKiller]:
    repo = course.course_repo(tmp_path / "course")
    request = fresh_name()
    (repo / DIES).write_text(DIES_BODY.format(request=request))
    return repo, SessionKiller(request, repo)


def _request(repo: Path) -> session.Request:
    return session.Request(root=repo, lessons=(), programs=(), device=0, timeout=120.0, cap=None, record_no_gpu=True)


def _by_device(repo: Path) -> dict[int, list[RunRecord]]:
    out: dict[int, list[RunRecord]] = {}
    for r in load_records(repo):
        if isinstance(r, RunRecord):
            out.setdefault(int(r.environment.env["CUDA_VISIBLE_DEVICES"]), []).append(r)
    return out


@dataclass(frozen=True)
class FanOut:
    """What one ``tileproof run --devices all`` did on a host of four GPUs (``fan_out``): GPU 1's session killed
    mid-run, GPU 2 reported broken by nvidia-smi."""

    repo: Path
    query: Path
    killed: list[int]
    code: int
    said: list[str]
    sessions: list[devices.DeviceSession]
    """What ``fan_out_sessions`` read back of each GPU's session, in GPU order."""


@pytest.fixture(scope="module")
def four_gpus(tmp_path_factory) -> FanOut:
    """One real fan-out over four child sessions for the module's tests (each only reads what it left)."""
    tmp_path = tmp_path_factory.mktemp("four-gpus")
    with pytest.MonkeyPatch.context() as monkeypatch:
        query = fake_host(tmp_path, monkeypatch, 4)
        repo, killer = _course(tmp_path)
        read_back: list[devices.DeviceSession] = []
        sessions_of = devices.fan_out_sessions
        monkeypatch.setattr(devices, "fan_out_sessions",
                            lambda *a, **kw: read_back.extend(sessions_of(*a, **kw)) or list(read_back))
        said: list[str] = []
        with killer:
            code = devices.fan_out("all", _request(repo), say=said.append)
    return FanOut(repo, query, killer.killed, code, said, read_back)


@pytest.mark.slow(reason="real child sessions, one killed mid-run: what a dying process leaves is the point (the "
                         "module's one fan-out, run by whichever of its two tests comes first)")
def test_one_session_each_gpu_and_a_session_that_dies_is_a_named_gap(four_gpus):
    repo = four_gpus.repo
    assert four_gpus.code == 1  # never a pass without a GPU
    assert len(four_gpus.killed) == 1
    rows = {r["index"]: r for r in parse_gpu_query(four_gpus.query.read_text())}
    runs = _by_device(repo)
    programs = sorted(course.PROGRAMS) + [DIES]
    for healthy in (0, 2, 3):
        assert sorted(r.program for r in runs[healthy]) == sorted(programs)  # the whole course
    assert [r.program for r in runs[1]] == ["kernels/online_softmax.py"]  # GPU 1: what ran before its session died
    for device, records in runs.items():
        for r in records:
            env = r.environment
            assert env.environment_version == 3
            assert env.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # CUDA numbers the GPUs as nvidia-smi does
            assert (env.env["NCCL_NVLS_ENABLE"], env.env["TORCH_SYMM_MEM_DISABLE_MULTICAST"],
                    env.env["NVSHMEM_DISABLE_NVLS"]) == ("0", "1", "1")
            if device == 2:
                continue  # reported broken: no GPU facts (test_four_gpus_... below)
            assert env.gpu is not None
            assert (env.gpu.index, env.gpu.uuid, env.gpu.pci_bus_id) == (
                device, rows[device]["uuid"], rows[device]["pci_bus_id"])
            assert env.nvidia_smi_topo is not None
            topo = (repo / env.nvidia_smi_topo.path).read_bytes()
            assert topo == (GPU_DATA / "nvidia-smi-topo-4gpu.txt").read_bytes()
    closed = [r for r in load_records(repo) if isinstance(r, SessionRecord)]
    assert sorted(s.session_id for s in closed) == sorted(runs[d][0].environment.session_id for d in (0, 2, 3))
    sid = runs[1][0].environment.session_id  # GPU 1 never closed
    said = four_gpus.said
    assert f"[gpu 1] gap: session {sid} wrote no session record (killed by signal 9): 1 of 3 programs recorded; " \
           f"no record of {DIES}, kernels/vector_add.py" in said
    first = runs[0][0].environment.session_id
    assert f"[gpu 0] session {first}: 1 error, 2 no-gpu" in said
    assert said[-1] == "run: --devices all: 0/4 GPUs passed every program; not GPU 0, 1, 2, 3 (1 a gap: GPU 1)"


@pytest.mark.slow(reason="four real child sessions (one killed mid-run): what a dying process leaves is the point "
                         "(the module's one fan-out, run by whichever of its two tests comes first)")
def test_four_gpus_one_reported_broken_and_one_dying_leave_the_other_two_complete(four_gpus):
    """GPU 2 answers nvidia-smi with ``[Unknown Error]`` (fallen off the bus): its session records each program's
    gate without a GPU and closes; GPU 1's session dies mid-run; GPUs 0 and 3 run the whole course."""
    sessions = four_gpus.sessions
    assert len(four_gpus.killed) == 1
    assert [s.device for s in sessions] == [0, 1, 2, 3]
    assert len({s.session_id for s in sessions}) == 4
    assert [s.gap() is None for s in sessions] == [True, False, True, True]
    assert [len(s.runs) for s in sessions] == [3, 1, 3, 3]
    assert sessions[1].missing == [DIES, "kernels/vector_add.py"]
    assert sessions[1].closed is None
    broken = sessions[2]
    assert all(r.environment.gpu is None and r.environment.env["CUDA_VISIBLE_DEVICES"] == "2" for r in broken.runs)
    assert broken.closed is not None
    assert {r.verdict for r in broken.runs} <= {"no-gpu", "error"}
    for s, bus in ((sessions[0], "00000000:18:00.0"), (sessions[3], "00000000:5D:00.0")):
        assert {r.environment.gpu.pci_bus_id for r in s.runs if r.environment.gpu} == {bus}
        assert len(s.runs) == 3
    assert not any(s.passed for s in sessions)
    # the benchmark's table from these sessions: every GPU side by side, the gap's programs '-', the spread shown
    lines = bench.report(10.0, sessions[0], 12.5, sessions, {"NCCL_NVLS_ENABLE": "0"})
    assert lines[1].endswith(" 10.0 s")
    assert lines[2].endswith(" 12.5 s")
    assert lines[3].endswith(" 40.0 s")
    assert lines[4] == "4 courses at once took 1.25 x one course's wall: 3.20 courses per course-time (ideal 4)"
    assert "NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=(unset)" in lines[5]
    table = {ln.split()[0]: ln.split() for ln in lines if ln.startswith(("program", "kernels/"))}
    assert table["program"] == ["program", "1gpu:0", "gpu0", "gpu1", "gpu2", "gpu3", "min", "median", "max", "spread"]
    assert table["kernels/vector_add.py"][3] == "-"
    assert table["kernels/online_softmax.py"][3] != "-"
    assert all(row[-1].endswith("%") for row in list(table.values())[1:])
    assert lines[-1] == f"topology: evidence/{sessions[0].session_id}/nvidia-smi-topo.txt"
    assert any(ln.startswith("4 GPUs gpu 1: GPU-5a1c0d2e") and " gap: " in ln for ln in lines)


def test_devices_all_on_a_host_of_two_gpus_is_both(tmp_path, monkeypatch):
    """The two-GPU host's nvidia-smi, as the fan-out asks it: ``--devices all`` is GPUs 0 and 1."""
    fake_host(tmp_path, monkeypatch, 2)
    assert devices.plan_devices("all", devices.gpu_query().rows) == [0, 1]


def test_a_gap_says_how_the_session_ended():
    """Killed at its deadline (a GPU that hangs: the child is still running when the fan-out's deadline comes),
    by a signal, or exiting without its session record; a closed session with every program recorded is none."""
    def gap(exit_code, closed=None, runs=()):
        child = children.Child(("run",), exit_code, 1900.0, "", "tileproof run: boom\n" if exit_code else "")
        return devices.DeviceSession(1, "S", child, ("a.py", "b.py"), runs, closed).gap()

    assert gap(None) == "session S wrote no session record (killed at its deadline, 1900 s): 0 of 2 programs " \
                        "recorded; no record of a.py, b.py"
    assert gap(-signal.SIGKILL).startswith("session S wrote no session record (killed by signal 9)")
    assert gap(2).startswith("session S wrote no session record (exit 2: tileproof run: boom)")


def test_a_session_id_is_one_tileproof_makes_and_never_one_already_used(tmp_path):
    (tmp_path / "runs").mkdir()
    with pytest.raises(Exception, match="expected <UTC yyyymmddThhmmssZ>-session-<8 hex>"):
        session.check_session_id(tmp_path, "../../etc")
    used = "20261201T000000Z-session-0123abcd"
    (tmp_path / "runs" / f"{used}.json").write_text("{}")
    with pytest.raises(Exception, match="already used"):
        session.check_session_id(tmp_path, used)
    session.check_session_id(tmp_path, "20261201T000000Z-session-0123abce")


def test_the_benchmark_refuses_a_host_with_fewer_than_two_gpus_and_writes_nothing(tmp_path, monkeypatch, capsys):
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\ncat {GPU_DATA / 'nvidia-smi-query.csv'}\n")  # the lent H200
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    out = tmp_path / "multi_gpu_wall.txt"
    assert bench.main(["--out", str(out), "--root", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == ("multi_gpu_wall: nvidia-smi lists 1 GPU(s); the N-vs-1 measurement "
                                               "needs at least 2: nothing run, nothing written")
    assert not out.exists()
    assert not (tmp_path / "runs").exists()
