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
        # Schedule at the next event, not up to 3 s later (batch_sched_delay's default), and let the two
        # kinds' arrays share the node's cores (OverSubscribe): the test waits on Slurm, not on idle cores.
        "SchedulerType=sched/builtin", "SchedulerParameters=sched_min_interval=100000,batch_sched_delay=0",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        node, f"PartitionName=debug Nodes={name} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4", "",
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
    saved = os.environ.get("SLURM_CONF")
    daemons: dict[str, subprocess.Popen] = {}
    try:
        # In the foreground (-F, -D): each daemon is this process's own child, waited for at the end.
        # Daemonized, they would be reparented to the nearest subreaper, and tileproof's runner makes
        # this pytest process one (runner/process.py) once any test has run a program in it: an exited
        # daemon then stays a zombie nobody reaps, and `munged --stop` waits 10 s for it to vanish.
        daemons["munged"] = _daemon(d, [_bin("munged"), "--foreground", "--force", f"--socket={d / 'munge.socket'}",
                                        f"--key-file={key}", f"--pid-file={d / 'munged.pid'}",
                                        f"--seed-file={d / 'munged.seed'}"], env)
        _wait_for(lambda: (d / "munge.socket").exists(), daemons, d, "munged never made its socket")
        daemons["slurmctld"] = _daemon(d, [_bin("slurmctld"), "-D", "-f", str(conf)], env)
        daemons["slurmd"] = _daemon(d, [_bin("slurmd"), "-D", "-f", str(conf)], env)
        os.environ["SLURM_CONF"] = str(conf)  # the client commands (sbatch, scontrol) read it

        def idle() -> bool:
            state = subprocess.run(["sinfo", "--noheader", "--format=%t"], capture_output=True, text=True, env=env)
            return state.stdout.strip() == "idle"

        _wait_for(idle, daemons, d, "node never idle")
        yield d
    finally:
        shut = "slurmctld" in daemons and subprocess.run(["scontrol", "shutdown"], env=env,  # stops slurmd too
                                                         capture_output=True).returncode == 0
        for name in ("slurmctld", "slurmd", "munged"):  # munge last: slurmctld's shutdown message to slurmd needs it
            if name in daemons:
                _stop(daemons[name], terminate=name == "munged" or not shut)
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved


def _daemon(d: Path, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start one daemon in the foreground, its stdout and stderr in ``d``."""
    name = Path(argv[0]).name
    with open(d / f"{name}.out", "wb") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)


def _logs(d: Path) -> str:
    return "".join(f"\n--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in sorted(d.glob("*.log")) +
                   sorted(d.glob("*.out")))


def _wait_for(ready, daemons: dict[str, subprocess.Popen], d: Path, what: str, seconds: float = 60) -> None:
    """Poll ``ready`` until true; fail at once with the logs if a daemon exited, or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not ready():
        dead = {n: p.returncode for n, p in daemons.items() if p.poll() is not None}
        assert not dead, f"{what}: exited {dead}" + _logs(d)
        assert time.monotonic() < deadline, what + _logs(d)
        time.sleep(0.1)


def _stop(proc: subprocess.Popen, terminate: bool, seconds: float = 20) -> None:
    """Wait for a daemon we started to exit (SIGTERM first if ``terminate``); kill it if it lingers."""
    if terminate and proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_real_array_and_afterany_merge_job_on_a_single_node_cluster(tmp_path, cluster):
    repo = course.course_repo(tmp_path / "course")
    folder = tmp_path / "fleet"
    proc = subprocess.run(
        [sys.executable, "-m", "tileproof", "fleet", "submit", "--cluster", str(REPO / ".ci" / "slurm-cluster.yaml"),
         "--root", str(repo), "--out", str(folder), "--wait", "--timeout", "180",
         "--poll", "0.2", "--run-arg=--record-no-gpu"],
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
