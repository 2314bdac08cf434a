"""``tileproof fleet submit`` against a real Slurm: a single-node cluster this test starts and stops.

No mock of Slurm. The test generates a slurm.conf for this host (its name, CPUs
and memory as ``slurmd -C`` reports them, the node feature ``sm_90``), starts
munged, slurmctld and slurmd as root with their state in a temporary folder,
waits until ``sinfo`` shows the node idle, then submits the course of
tests/data/fleet/course.py with the committed ``.ci/slurm-cluster.yaml``: a real
job array per GPU kind (no GPU here, so every task records its programs'
``no-gpu`` gate) plus the ``afterany`` merge job, and checks the merged records,
the audit and the matrix. The kind ``sm_100`` has no node: sbatch refuses it at
once and the matrix says so (nothing hangs). Skips where Slurm is not installed
or the test is not root; ``.ci/run`` installs it.
"""

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("fleet_course", REPO / "tests" / "data" / "fleet" / "course.py")
course = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(course)

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol")
MISSING = [d for d in DAEMONS if shutil.which(d) is None and not Path(f"/usr/sbin/{d}").exists()]
if MISSING and os.environ.get("CI") == "true":  # .ci/run installs them: a skip there would hide a broken install
    raise RuntimeError(f"CI=true but {', '.join(MISSING)} missing: .ci/run's fleet block did not install Slurm")
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=f"Slurm/munge not installed ({', '.join(MISSING)}); "
                       "CI installs them: apt-get install slurm-wlm munge"),
    pytest.mark.skipif(os.geteuid() != 0, reason="starting slurmctld/slurmd/munged needs root"),
]


def _bin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_line() -> str:
    """``slurmd -C``'s NodeName line for this host, with the feature sm_90."""
    out = subprocess.run([_bin("slurmd"), "-C"], capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("NodeName="))
    return f"{line} Features=sm_90 State=UNKNOWN"


def slurm_conf(d: Path, node: str) -> str:
    name = node.split()[0].split("=", 1)[1]
    return "\n".join([
        "ClusterName=tileproof-test", f"SlurmctldHost={name}", "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", f"AuthInfo=socket={d / 'munge.socket'}",
        f"StateSaveLocation={d / 'state'}", f"SlurmdSpoolDir={d / 'spool'}",
        f"SlurmctldPidFile={d / 'slurmctld.pid'}", f"SlurmdPidFile={d / 'slurmd.pid'}",
        f"SlurmctldLogFile={d / 'slurmctld.log'}", f"SlurmdLogFile={d / 'slurmd.log'}",
        f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "ReturnToService=2",
        "SchedulerType=sched/builtin", "SchedulerParameters=sched_min_interval=100000",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        node, f"PartitionName=debug Nodes={name} Default=YES MaxTime=INFINITE State=UP", "",
    ])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    d = tmp_path_factory.mktemp("slurm")
    d.chmod(0o700)
    (d / "state").mkdir()
    (d / "spool").mkdir()
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    conf = d / "slurm.conf"
    conf.write_text(slurm_conf(d, _node_line()))
    env = dict(os.environ, SLURM_CONF=str(conf))
    subprocess.run([_bin("munged"), "--force", f"--socket={d / 'munge.socket'}", f"--key-file={key}",
                    f"--log-file={d / 'munged.log'}", f"--pid-file={d / 'munged.pid'}",
                    f"--seed-file={d / 'munged.seed'}"], check=True, env=env)
    subprocess.run([_bin("slurmctld"), "-f", str(conf)], check=True, env=env)
    subprocess.run([_bin("slurmd"), "-f", str(conf)], check=True, env=env)
    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)  # the client commands (sbatch, scontrol) read it
    try:
        deadline = time.monotonic() + 60
        while True:
            state = subprocess.run(["sinfo", "--noheader", "--format=%t"], capture_output=True, text=True, env=env)
            if state.stdout.strip() == "idle":
                break
            assert time.monotonic() < deadline, f"node never idle: {state.stdout}{state.stderr}" \
                + (d / "slurmctld.log").read_text()[-2000:] + (d / "slurmd.log").read_text()[-2000:]
            time.sleep(0.5)
        yield d
    finally:
        subprocess.run(["scontrol", "shutdown"], env=env, capture_output=True)
        subprocess.run([_bin("munged"), "--stop", f"--socket={d / 'munge.socket'}"], capture_output=True)
        for pidfile in ("slurmctld.pid", "slurmd.pid"):
            _wait_gone(d / pidfile)
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved


def _wait_gone(pidfile: Path, seconds: float = 20) -> None:
    """Wait for the daemon we started to exit; kill it by its own pid if it lingers."""
    if not pidfile.is_file():
        return
    pid = int(pidfile.read_text().split()[0])
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(pid, 9)


def test_real_array_and_afterany_merge_job_on_a_single_node_cluster(tmp_path, cluster):
    repo = course.course_repo(tmp_path / "course")
    folder = tmp_path / "fleet"
    proc = subprocess.run(
        [sys.executable, "-m", "tileproof", "fleet", "submit", "--cluster", str(REPO / ".ci" / "slurm-cluster.yaml"),
         "--root", str(repo), "--out", str(folder), "--wait", "--timeout", "180", "--run-arg=--record-no-gpu"],
        cwd=repo, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    logs = "".join(f"\n--- {p.name}\n{p.read_text()}" for p in sorted((folder / "logs").glob("*")))
    assert proc.returncode == 1, proc.stdout + proc.stderr + logs  # no-gpu cells: never a pass
    assert "sm_100: REFUSED by sbatch" in proc.stdout and "Invalid feature specification" in proc.stdout
    matrix = json.loads((folder / "matrix.json").read_text())
    at = {(c["lesson"], c["kind"]): c for c in matrix["cells"]}
    assert set(at) == {(lid, k) for lid in course.LESSONS for k in ("cpu", "sm_90", "sm_100")}
    for lesson in course.LESSONS:
        for kind in ("cpu", "sm_90"):
            assert at[(lesson, kind)]["outcome"] == "no-gpu", (at[(lesson, kind)], logs)
            assert at[(lesson, kind)]["detail"] == "1 no-gpu"
        assert at[(lesson, "sm_100")]["outcome"] == "refused"
    assert matrix["audit_exit"] == 0, matrix["audit_line"] + logs
    # every task's records are now in the repository's runs/ and evidence/, each run once per (lesson, kind)
    runs = [json.loads(p.read_text()) for p in (repo / "runs").glob("*-run-*.json")]
    assert sorted((r["program"], r["verdict"]) for r in runs) == sorted(
        (p, "no-gpu") for progs in course.LESSONS.values() for p in progs for _ in ("cpu", "sm_90"))
    assert len(list((repo / "runs").glob("*-session-*.json"))) == 4
    commit = course.git(repo, "rev-parse", "HEAD").strip()
    assert {r["git"]["commit"] for r in runs} == {commit} and not any(r["git"]["dirty"] for r in runs)
    # the sm_90 array asked for the node feature, and Slurm ran it on the node that has it
    submitted = json.loads((folder / "submitted.json").read_text())
    sm90 = next(a["job_id"] for a in submitted["arrays"] if a["kind"] == "sm_90")
    shown = [ln for ln in subprocess.run(["scontrol", "show", "job", "-o", sm90], capture_output=True,
                                         text=True).stdout.splitlines() if ln.strip()]
    assert len(shown) == len(course.LESSONS), shown  # one line per array task
    node = _node_line().split()[0].split("=", 1)[1]
    assert all("Features=sm_90" in ln and f"BatchHost={node}" in ln for ln in shown), shown
    assert "#SBATCH --constraint=sm_90" in (folder / "scripts" / "sm_90.sbatch").read_text()
    assert "no-gpu" in proc.stdout and "LESSON" in proc.stdout
