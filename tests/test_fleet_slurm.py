"""``tileproof fleet submit`` against a real Slurm: a single-node cluster this module starts and stops.

No mock of Slurm. ``scripts/slurm_node up`` (the script a GPU node without network is stood up
with) unpacks the gathered packages into a temporary prefix, or uses the installed ones
(tests/slurm_cluster.py), generates slurm.conf for this host (its name, CPUs and memory as
``slurmd -C`` reports them) and gres.conf from the H200's real ``nvidia-smi --query-gpu``
transcript with a second GPU added, each GPU's device file a harmless character device; so the
node has the features ``h200`` and ``sm_90`` and the GRES ``gpu:2``, and no GPU. munged,
slurmctld and slurmd run as root with their state in a temporary folder.

The course of tests/data/fleet/course.py is submitted with the committed ``.ci/slurm-cluster.yaml``
(a job array per GPU kind: no GPU here, so every task records its programs' ``no-gpu`` gate, plus
the ``afterany`` merge job; ``sm_100`` has no node: sbatch refuses it at once and the matrix says
so), and with the cluster file ``up`` wrote (kind ``h200``: one GPU each, both tasks at once on the
two GPUs, each record naming its Slurm job and the GPU Slurm gave it, signed by the task's key). A
task killed at its time limit is a gap named TIMEOUT. Skips where there is no Slurm or the test is
not root.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import signing_keys
import slurm_cluster as sc
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tileproof.records import store
from tileproof.records.trust import signing

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("fleet_course", REPO / "tests" / "data" / "fleet" / "course.py")
course = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(course)

pytestmark = [
    pytest.mark.skipif(sc.SOURCE is None, reason=sc.NO_SLURM),
    pytest.mark.skipif(not sc.IS_ROOT, reason="starting slurmctld/slurmd/munged needs root"),
    pytest.mark.slow(reason="a real single-node Slurm cluster (munged, slurmctld, slurmd) runs real jobs; one task "
                            "must outlive Slurm's smallest time limit, a minute"),
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The running node (``slurm_node.Node``); its client commands first on PATH while the module runs.

    The daemons are this process's own children, reaped by ``slurm_node.stop``: had they been
    daemonized, they would be reparented to the nearest subreaper, which tileproof's runner makes
    this pytest process (runner/process.py) once any test has run a program in it, and an exited
    daemon would stay a zombie nobody reaps."""
    d = tmp_path_factory.mktemp("slurm")
    query = d / "nvidia-smi-query.csv"
    query.write_text(sc.gpu_query(2))
    node = sc.slurm_node.up(d / "state", gpu_query=query, device_dir=sc.fake_devices(d / "dev", 2),
                            cluster_file=d / "cluster.yaml", cluster="tileproof-test", **sc.where())
    saved = os.environ["PATH"]
    os.environ["PATH"] = os.pathsep.join([str(node.bin), saved])  # sbatch, scontrol for tileproof and the tests
    try:
        yield node
    finally:
        os.environ["PATH"] = saved
        for line in sc.slurm_node.stop(node):
            print(f"slurm-node: stop: {line}")
        assert not sc.slurm_node.steps_of(node.conf)  # no slurmstepd of this cluster outlives it


@pytest.mark.usefixtures("slow_fleet")  # starts the one-minute fleet first: its minute passes while the tests run
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
    assert "sm_100: REFUSED by sbatch" in proc.stdout
    assert "Invalid feature specification" in proc.stdout
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
    assert {r["git"]["commit"] for r in runs} == {commit}
    assert not any(r["git"]["dirty"] for r in runs)
    # the sm_90 array asked for the node feature, and Slurm ran it on the node that has it
    submitted = json.loads((folder / "submitted.json").read_text())
    sm90 = next(a["job_id"] for a in submitted["arrays"] if a["kind"] == "sm_90")
    shown = [ln for ln in subprocess.run(["scontrol", "show", "job", "-o", sm90], capture_output=True,
                                         text=True).stdout.splitlines() if ln.strip()]
    assert len(shown) == len(course.LESSONS), shown  # one line per array task
    node = cluster.name
    assert all("Features=sm_90" in ln and f"BatchHost={node}" in ln for ln in shown), shown
    assert "#SBATCH --constraint=sm_90" in (folder / "scripts" / "sm_90.sbatch").read_text()
    assert "no-gpu" in proc.stdout
    assert "LESSON" in proc.stdout


def _submit(repo: Path, cluster_file: Path, folder: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "tileproof", "fleet", "submit", "--cluster", str(cluster_file), "--root", str(repo),
            "--out", str(folder), "--wait", "--timeout", "240", "--poll", "0.2", *args]


def _logs(folder: Path) -> str:
    return "".join(f"\n--- {p.name}\n{p.read_text()}" for p in sorted((folder / "logs").glob("*")))


SLEEPER = "kernels/sleeper.py"
SLEEPER_LESSON = "fleet-sleeper"


@pytest.fixture(scope="module")
def slow_fleet(tmp_path_factory, cluster):
    """A fleet whose one task outlives its time limit (Slurm's smallest, one minute), submitted as soon as the
    cluster is up (without waiting for it) so that the minute passes while the other tests run."""
    d = tmp_path_factory.mktemp("slow")
    repo = course.course_repo(d / "course")
    (repo / SLEEPER).write_text("AOT_SIGNATURES = {}  # a program (toolchain.build.is_program) that never ends\n"
                                "import time\n\ntime.sleep(3600)\n")
    course.audit_tree().write_lesson(repo, SLEEPER_LESSON, {SLEEPER: ["vector_add"]})
    course.git(repo, "add", "-A")
    course.git(repo, "commit", "-q", "-m", "a lesson whose program outlives its task")
    cluster_file = d / "one-minute.yaml"
    cluster_file.write_text(yaml.safe_dump({"cluster_version": 1, "name": "tileproof-test", "time_limit": "1",
                                            "kinds": {"cpu": {}}}))
    folder = d / "fleet"
    with open(d / "submit.out", "w") as out:
        proc = subprocess.Popen(_submit(repo, cluster_file, folder, "--lesson", SLEEPER_LESSON), cwd=repo,
                                stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONPATH=str(REPO)))
    yield proc, folder, d / "submit.out"
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_gpu_kind_tasks_get_one_gpu_each_and_their_signed_records_name_the_slurm_job(tmp_path, cluster):
    repo = course.course_repo(tmp_path / "course")
    private = Ed25519PrivateKey.generate()
    signer = signing.Signer(private)
    signing_keys.write_registry(repo, signing_keys.registry_of(signing_keys.entry(signer, owner="fleet test node")))
    course.git(repo, "add", "-A")
    course.git(repo, "commit", "-q", "-m", "the node's runner key")
    key = tmp_path / "node-key.pem"  # outside the repository: the key stays on the node
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    key.chmod(0o600)
    folder = tmp_path / "fleet"
    kinds = yaml.safe_load(cluster.cluster_file.read_text())["kinds"]
    assert kinds == {"h200": {"constraint": "h200", "gres": "gpu:1", "compute_capability": "9.0"}}
    # no --run-arg=--record-no-gpu: a task records its programs' gates on a node without a usable GPU by itself
    proc = subprocess.run(_submit(repo, cluster.cluster_file, folder), cwd=repo, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO), TILEPROOF_SIGNING_KEY=str(key)))
    logs = _logs(folder)
    assert proc.returncode == 1, proc.stdout + proc.stderr + logs  # no-gpu cells: never a pass
    assert "#SBATCH --gres=gpu:1" in (folder / "scripts" / "h200.sbatch").read_text()
    matrix = json.loads((folder / "matrix.json").read_text())
    assert matrix["matrix_version"] == 2, matrix["audit_line"] + logs
    assert matrix["audit_exit"] == 0, matrix["audit_line"] + logs
    assert {(c["lesson"], c["kind"], c["outcome"], c["detail"], c["task_state"]) for c in matrix["cells"]} == {
        (lid, "h200", "no-gpu", "1 no-gpu", "FAILED") for lid in course.LESSONS}, logs  # run exits 1
    array = json.loads((folder / "submitted.json").read_text())["arrays"][0]["job_id"]
    runs = [p for p in (repo / "runs").glob("*.json")]
    assert len(runs) == 2 * len(course.LESSONS)  # a run and a session record per task
    gpus, jobs = set(), set()
    for path in runs:
        raw = json.loads(path.read_text())
        assert [s["keyid"] for s in raw["signatures"]] == [signer.keyid], path  # signed by the task's key
        record = store.load_record(path)
        if record.kind != "run":
            continue
        job = record.environment.slurm
        assert record.environment.environment_version == 3, path
        assert job is not None, path
        assert (job.array_job_id, job.cluster, job.node) == (array, "tileproof-test", cluster.name)
        assert job.array_task_id in range(len(course.LESSONS))
        assert len(job.job_gpus) == 1, job
        assert job.cuda_visible_devices == str(job.job_gpus[0]), job
        # the task ran its programs on the GPU Slurm gave it, and they got the submitter's libraries, not Slurm's
        assert record.environment.env["CUDA_VISIBLE_DEVICES"] == job.cuda_visible_devices
        assert record.environment.env.get("LD_LIBRARY_PATH") == os.environ.get("LD_LIBRARY_PATH")
        gpus.add(job.job_gpus[0])
        jobs.add(job.job_id)
    assert gpus == {0, 1}, logs  # two GPUs, two tasks: each had one of its own
    assert len(jobs) == len(course.LESSONS)  # each task its own job id (the last one keeps the array's)


def test_an_arrays_gpu_tasks_run_at_once_one_gpu_each(tmp_path, cluster):
    """The fleet's own #SBATCH options for the node's kind (--array, --gres=gpu:1, --constraint, --cpus-per-task,
    --time), one task per GPU, each of which ends only once every task has started: the array passes only if Slurm
    ran its tasks at the same time, each on a GPU of its own."""
    from tileproof.fleet import sbatch
    from tileproof.fleet.plan import Checkout, make_plan
    from tileproof.records.cluster import load_cluster

    gpus = len(cluster.gpus)
    plan = make_plan(cluster=load_cluster(cluster.cluster_file), lesson_programs={
        f"lesson-{i}": ["kernels/x.py"] for i in range(gpus)}, kinds=["h200"],
        source=Checkout(tmp_path, "0" * 40, sys.executable), folder=tmp_path / "fleet", fleet_id="concurrent")
    (tmp_path / "fleet" / "logs").mkdir(parents=True)
    met = tmp_path / "met"
    met.mkdir()
    # each task leaves its name and GPU, then waits (30 s at most) until all have; one left waiting alone fails
    body = (f'touch {met}/"$SLURM_ARRAY_TASK_ID.$CUDA_VISIBLE_DEVICES"; i=0; '
            f'while [ "$(ls {met} | wc -l)" -lt {gpus} ]; do i=$((i+1)); [ $i -gt 300 ] && exit 3; sleep 0.1; done')
    script = tmp_path / "together.sbatch"
    script.write_text(sbatch.script(sbatch.array_options(plan, plan.arrays[0]), ["sh", "-c", body]))
    done = subprocess.run(["sbatch", "--wait", str(script)], capture_output=True, text=True, cwd=tmp_path)
    logs = "".join(p.read_text() for p in (tmp_path / "fleet" / "logs").glob("*"))
    assert done.returncode == 0, done.stdout + done.stderr + logs
    assert "#SBATCH --gres=gpu:1" in script.read_text()
    assert f"#SBATCH --array=0-{gpus - 1}" in script.read_text()
    seen = sorted(p.name.split(".") for p in met.iterdir())
    assert [task for task, _ in seen] == [str(i) for i in range(gpus)]
    assert sorted(gpu for _, gpu in seen) == [str(i) for i in range(gpus)]  # a GPU each, none shared


def test_jobs_get_the_submitters_environment_never_the_daemons_libraries(tmp_path, cluster):
    slurmd = cluster.daemons["slurmd"].pid
    daemon_env = dict(kv.split("=", 1) for kv in Path(f"/proc/{slurmd}/environ").read_text().split("\0") if "=" in kv)
    assert str(cluster.prefix.plugin_dir) in daemon_env["LD_LIBRARY_PATH"]  # slurmd has them (slurmstepd needs them)
    out = tmp_path / "env.txt"
    done = subprocess.run(["sbatch", "--wait", f"--output={out}", "--wrap", "env"], capture_output=True, text=True,
                          cwd=tmp_path, env=dict(os.environ, LD_LIBRARY_PATH="/submitters/own"))
    assert done.returncode == 0, done.stderr
    job_env = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert job_env["LD_LIBRARY_PATH"] == "/submitters/own"
    assert job_env["SLURM_CONF"] == str(cluster.conf)


def test_a_task_killed_at_its_time_limit_is_a_gap_named_timeout(slow_fleet):
    proc, folder, output = slow_fleet
    proc.wait(timeout=240)
    said = output.read_text()
    assert proc.returncode == 1, said + _logs(folder)
    [c] = json.loads((folder / "matrix.json").read_text())["cells"]
    assert (c["lesson"], c["kind"], c["outcome"], c["task_state"]) == (SLEEPER_LESSON, "cpu", "gap", "TIMEOUT"), c
    assert c["detail"].startswith("Slurm ended the task TIMEOUT (its time limit): "), c
    assert f"{SLEEPER_LESSON} x cpu: gap: Slurm ended the task TIMEOUT" in said
