"""scripts/slurm_node: the single-node Slurm a GPU host without network is stood up with.

The pure half (which packages, features, gres.conf, slurm.conf, the cluster file) on real transcripts
from this CPU machine's Debian (tests/data/fleet/slurm/) and the H200's nvidia-smi query; then, where
the packages were gathered (tests/slurm_cluster.py), what was gathered, and Slurm's own reading of the
generated configuration for one and for four GPUs (``slurmd -G``, no daemon started). The daemons and
the fleet on them are tests/test_fleet_slurm.py.
"""

import json
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import slurm_cluster as sc

from tileproof.fleet.matrix import Matrix, render
from tileproof.records.cluster import GpuKind, load_cluster
from tileproof.records.store import sha256_file

node = sc.slurm_node
DATA = Path(__file__).parent / "data" / "fleet" / "slurm"
needs_gathered = pytest.mark.skipif(not sc.GATHERED, reason=sc.NO_SLURM)


def test_depends_fields_read_as_entries_of_alternatives():
    libpam, munge, _ = (DATA / "depends.txt").read_text().splitlines()
    entries = node.parse_depends(libpam)
    assert entries[0] == [node.Dependency("libaudit1", ">=", "1:2.2.1")]
    assert entries[2] == [node.Dependency("debconf", ">=", "0.5"), node.Dependency("debconf-2.0")]
    assert node.glibc_version_asked(node.parse_depends(munge)) == "2.34"
    with pytest.raises(node.NodeError, match="not 'name \\(op version\\)'"):
        node.parse_depends("libfoo (>= 1")


def test_a_package_is_carried_for_its_shared_libraries_only():
    libs = node.listed_libraries((DATA / "libmunge2-contents.txt").read_text())
    assert libs == ["./usr/lib/x86_64-linux-gnu/libmunge.so.2.0.0", "./usr/lib/x86_64-linux-gnu/libmunge.so.2"]
    assert node.listed_libraries((DATA / "munge-contents.txt").read_text()) == []  # the daemon: asked for by name


def test_apts_candidates_leave_out_virtual_packages():
    """A real ``apt-cache policy`` of two packages, a purely virtual one and an unknown one."""
    text = (DATA / "apt-cache-policy.txt").read_text()
    proc = subprocess.CompletedProcess([], 0, stdout=text, stderr="")
    original = node.run
    node.run = lambda argv, **kw: proc
    try:
        got = node.candidates(["libaudit1", "debconf", "debconf-2.0", "no-such-package-x"])
    finally:
        node.run = original
    assert got == {"libaudit1": "1:3.0.9-1", "debconf": "1.5.82"}
    with pytest.raises(node.NodeError, match="libfoo depends on debconf-2.0: apt has no such package"):
        node.packages._choose([node.Dependency("debconf-2.0")], "libfoo", got)


@pytest.mark.parametrize("name, feature", [
    ("NVIDIA H200", "h200"),  # the lent H200's own name (tests/data/gpu/nvidia-smi-query.csv)
    ("NVIDIA H100 80GB HBM3", "h100_80gb_hbm3"),
    ("NVIDIA GeForce RTX 4090", "rtx_4090"),
    ("Tesla T4", "t4"),
    ("NVIDIA A100-SXM4-40GB", "a100_sxm4_40gb"),
])
def test_a_gpus_model_feature_is_its_name_without_the_vendors_words(name, feature):
    assert node.model_feature(name) == feature


def test_features_gres_and_the_cluster_file_come_from_the_h200s_own_query(tmp_path):
    gpus = node.gpus_of(sc.H200_QUERY.read_text())
    assert gpus == [node.Gpu(0, "NVIDIA H200", "9.0")]
    assert node.features(gpus, ["extra"]) == ["h200", "sm_90", "extra"]
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    assert node.gres_conf(gpus, plugins, Path("/dev")).splitlines()[-1] == "Name=gpu File=/dev/nvidia0"
    four = node.gpus_of(sc.gpu_query(4))
    assert [ln for ln in node.gres_conf(four, plugins, Path("/dev")).splitlines() if ln.startswith("Name=")] == [
        f"Name=gpu File=/dev/nvidia{i}" for i in range(4)]
    (plugins / "gpu_nvml.so").write_bytes(b"")  # a Slurm built with NVML: it finds the GPUs itself
    assert "AutoDetect=nvml" in node.gres_conf(four, plugins, Path("/dev")).splitlines()
    cluster = node.write_cluster_file(tmp_path / "cluster.yaml", "n", four, "00:05:00")
    assert cluster == load_cluster(tmp_path / "cluster.yaml")
    assert cluster.kinds["h200"].model_dump() == {"constraint": "h200", "gres": "gpu:1", "compute_capability": "9.0",
                                                  "partition": None}
    assert node.write_cluster_file(tmp_path / "cpu.yaml", "n", [], "1").kinds == {"cpu": GpuKind()}


def test_slurm_conf_names_the_prefix_the_node_and_its_gpus(tmp_path):
    hw = node.node_line((DATA / "slurmd-C.txt").read_text())
    assert hw == node.NodeLine("vm", "CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 "
                                     "RealMemory=24105")
    prefix = node.Prefix(tmp_path)
    with pytest.raises(node.NodeError, match="no usr/lib/<arch>/slurm-wlm"):
        node.slurm_conf(Path("/s"), prefix, hw, 2, [], "c", (1, 2))
    (tmp_path / "usr" / "lib" / "x86_64-linux-gnu" / "slurm-wlm").mkdir(parents=True)
    conf = node.slurm_conf(Path("/s"), prefix, hw, 2, ["h200", "sm_90"], "c", (1, 2)).splitlines()
    assert "GresTypes=gpu" in conf
    assert "SlurmctldHost=vm(127.0.0.1)" in conf
    assert f"PluginDir={tmp_path}/usr/lib/x86_64-linux-gnu/slurm-wlm" in conf
    assert f"NodeName=vm NodeAddr=127.0.0.1 {hw.hardware} Gres=gpu:2 Features=h200,sm_90 State=UNKNOWN" in conf
    with pytest.raises(node.NodeError, match="slurmd -C: no NodeName line"):
        node.node_line("UpTime=0-00:25:45\n")


def test_ports_are_drawn_outside_the_range_connections_take_theirs_from_and_a_taken_one_is_passed_over(tmp_path):
    """The CI failure of stop 37 (slurmctld: Address already in use): a port the kernel may give any connection
    is never chosen, and one something listens on is never returned."""
    assert node.port_choices((32768, 60999)) == range(10000, 32768)
    assert node.port_choices((1024, 60999)) == range(61000, 65536)
    assert node.port_choices((1024, 65535)) == range(1024, 1024)  # nothing left: free_ports says so
    (tmp_path / "range").write_text("40000\t50000\n")
    assert node.ephemeral_range(tmp_path / "range") == (40000, 50000)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        for _ in range(20):
            ports = node.free_ports(2, range(taken, taken + 3))
            assert taken not in ports and len(set(ports)) == 2
        with pytest.raises(node.NodeError, match=f"ports: fewer than 2 free among 200 tried in {taken}-{taken}"):
            node.free_ports(2, range(taken, taken + 1))


def test_slurm_conf_names_no_plugin_that_asks_for_a_cgroup(tmp_path):
    """What makes v1-inert safe: nothing in slurm.conf asks the cgroup plugin slurmd loads for a cgroup."""
    (tmp_path / "usr" / "lib" / "x86_64-linux-gnu" / "slurm-wlm").mkdir(parents=True)
    conf = node.slurm_conf(Path("/s"), node.Prefix(tmp_path), node.NodeLine("vm", "CPUs=2"), 1, [], "c", (1, 2))
    lines = conf.splitlines()
    assert set(node.NO_CGROUP_USERS) <= set(lines)
    assert not [ln for ln in lines if "cgroup" in ln.lower() or ln.startswith(("CoreSpecCount", "MemSpecLimit"))]


# Hosts for the cgroup plan. The CPU machine's are real (its /proc/self/mountinfo's cgroup lines and
# /proc/self/cgroup); the H200's cgroup2 tree is made up from what its slurmd.log says (cgroup/v2 chosen by
# autodetect, so /sys/fs/cgroup is cgroup2; no D-Bus socket; slurmd not started by systemd).
CGROUP2_MOUNTINFO = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
PLUGINS = ("cgroup_v1.so", "cgroup_v2.so", "gres_gpu.so")


def _host(mountinfo: str, self_cgroup: str = "0::/\n", present=(), writable: bool = True):
    return node.host_cgroups(mountinfo, self_cgroup, present, writable)


def _plan(host, version=(22, 5, 8), plugins=PLUGINS):
    return [(p.setup.name, p.skipped) for p in node.cgroup_plan(host, version, plugins)]


def test_the_cpu_machines_cgroups_are_v1_hierarchies_and_v1_inert_is_the_plan():
    host = _host((DATA / "cpu-mountinfo.txt").read_text(), (DATA / "cpu-proc-self-cgroup.txt").read_text())
    assert (host.mounted, host.systemd_hierarchy, host.slurm_default) == ("tmpfs", "cgroup", "cgroup/v1")
    assert len(host.self_cgroup) == 10
    assert not host.read_only
    assert _plan(host) == [
        ("disabled", "Slurm 22.05.8 has no CgroupPlugin=disabled (from 24.05)"),
        ("v1-inert", None),
        ("v2-no-systemd", "/sys/fs/cgroup is tmpfs, not cgroup2"),
        ("autodetect", "it loads cgroup/v1 here, as v1-inert does"),
    ]


def test_a_cgroup2_host_without_systemd_is_never_given_slurms_default():
    """The H200: Slurm's default there (cgroup/v2 through systemd over D-Bus) is what failed; v1-inert comes first,
    then cgroup/v2 making its own folders."""
    host = _host(CGROUP2_MOUNTINFO)
    assert (host.mounted, host.slurm_default, host.writable, host.systemd, host.dbus) == (
        "cgroup2", "cgroup/v2", True, False, False)
    assert _plan(host) == [
        ("disabled", "Slurm 22.05.8 has no CgroupPlugin=disabled (from 24.05)"),
        ("v1-inert", None),
        ("v2-no-systemd", None),
        ("autodetect", "on cgroup2 it asks systemd over D-Bus for a scope, and systemd is not running"),
    ]
    assert [n for n, why in _plan(host, (24, 5, 1)) if why is None] == ["disabled", "v1-inert", "v2-no-systemd"]
    assert _plan(host, plugins=["cgroup_v2.so"])[1] == ("v1-inert", "no cgroup_v1.so in PluginDir")


@pytest.mark.parametrize("mountinfo, present, writable, v2, default", [
    (CGROUP2_MOUNTINFO.replace(" rw,nosuid", " ro,nosuid"), (), True, "/sys/fs/cgroup is mounted read-only",
     "on cgroup2 it asks systemd over D-Bus for a scope, and systemd is not running"),
    (CGROUP2_MOUNTINFO, (), False, "/sys/fs/cgroup is not writable here",
     "on cgroup2 it asks systemd over D-Bus for a scope, and systemd is not running"),
    (CGROUP2_MOUNTINFO, (node.SYSTEMD_RUNNING,), True, "systemd runs here (IgnoreSystemd is for hosts without it: "
     "it would fight systemd's tree)", "on cgroup2 it asks systemd over D-Bus for a scope, and "
     "/run/dbus/system_bus_socket is missing"),
    (CGROUP2_MOUNTINFO, (node.SYSTEMD_RUNNING, node.DBUS_SOCKET), True, "systemd runs here (IgnoreSystemd is for "
     "hosts without it: it would fight systemd's tree)", None),
    ("", (), True, "/sys/fs/cgroup is not mounted, not cgroup2",
     "Slurm's autodetect finds no cgroup file system at /sys/fs/cgroup"),
    ((DATA / "cpu-mountinfo.txt").read_text().replace("cgroup cgroup rw,name=systemd", "cgroup2 cgroup2 rw"), (), True,
     "/sys/fs/cgroup is tmpfs, not cgroup2",
     "cgroup/v2 on cgroup v1 hierarchies: Slurm stops (\"Hybrid mode is not supported\")"),
], ids=["read-only", "not-writable", "systemd-no-dbus", "systemd-and-dbus", "no-cgroup-fs", "hybrid-systemd-v2"])
def test_what_each_host_rules_out(mountinfo, present, writable, v2, default):
    plan = dict(_plan(_host(mountinfo, present=present, writable=writable)))
    assert (plan["v1-inert"], plan["v2-no-systemd"], plan["autodetect"]) == (None, v2, default)


def test_why_slurmd_stopped_is_the_first_cause_its_log_names():
    """The H200's real slurmd.log (slurmd -G under Slurm's default), and this machine's with cgroup/v2 forced."""
    assert node.daemon_failure((DATA / "h200-slurmd-cgroup-v2.log").read_text(), "") == (
        "error: cgroup_dbus_attach_to_scope: cannot connect to dbus system daemon: Failed to connect to socket "
        "/run/dbus/system_bus_socket: No such file or directory (+2 more)")
    assert node.daemon_failure((DATA / "cpu-slurmd-cgroup-v2-hybrid.log").read_text(), "") == (
        "fatal: Hybrid mode is not supported. Mounted cgroups are: 9:name=systemd:/")
    chain = "[t] error: Unable to initialize cgroup plugin\n[t] error: slurmd initialization failed\n"
    assert node.daemon_failure(chain, "") == "error: slurmd initialization failed"  # nothing but the chain
    assert node.daemon_failure("", "slurmd: something\nlast words\n") == "last words"
    # slurmctld's real log when its port was taken (the CI failure of stop 37): its fatal line, not its first error
    assert node.daemon_failure((DATA / "slurmctld-port-taken.log").read_text(), "", "slurmctld") == (
        "fatal: slurm_init_msg_engine_port error Address already in use (+12 more)")
    assert node.slurm_version("slurm-wlm 22.05.8\n") == (22, 5, 8) == node.slurm_version("slurm 22.05.8")
    with pytest.raises(node.NodeError, match="slurmd -V: no version"):
        node.slurm_version("slurmd: error: oops")


def test_a_gpus_device_file_must_be_a_character_device(tmp_path):
    (tmp_path / "nvidia0").write_text("")
    with pytest.raises(node.NodeError, match="nvidia0: not a character device, for GPU 0 \\(NVIDIA H200\\)"):
        node.check_devices(node.gpus_of(sc.H200_QUERY.read_text()), tmp_path)


def test_each_failure_of_up_is_one_line_before_anything_starts(tmp_path, capsys):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("")
    assert node.main(["up", "--debs", str(tmp_path / "none"), "--state", str(tmp_path / "busy")]) == 1
    assert node.main(["up", "--debs", str(tmp_path / "none"), "--state", str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"slurm-node: FAILED: {tmp_path / 'busy'}: not empty (fix: a new folder for each cluster; " \
                     "down stops an old one)"
    assert err[1].startswith(f"slurm-node: FAILED: {tmp_path / 'none' / 'manifest.json'}: missing (fix: gather")
    assert len(err) == 2


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """This machine's Slurm: the gathered packages unpacked (once for the module), else the installed ones."""
    if not sc.GATHERED:
        return node.Prefix(Path("/"))
    return node.unpack(sc.DEBS, node.read_manifest(sc.DEBS), tmp_path_factory.mktemp("prefix"))


@needs_gathered
def test_what_was_gathered_is_the_library_closure_beyond_glibc(prefix):
    manifest = node.read_manifest(sc.DEBS)
    carried = {p.name for p in manifest.packages}
    assert set(node.PACKAGES) <= carried
    assert node.GLIBC not in carried
    assert {x.name: x.why for x in manifest.left_out}[node.GLIBC].startswith("glibc: the node's own")
    assert "libc.so.6" in manifest.glibc_libraries
    assert "libm.so.6" in manifest.glibc_libraries
    for pkg in manifest.packages:  # every dependency of a carried package is carried, or left out with a reason
        deb = sc.DEBS / node.DEBS / pkg.file
        assert sha256_file(deb) == pkg.sha256
        fields = ", ".join(filter(None, (node.deb_field(deb, "Pre-Depends"), node.deb_field(deb, "Depends"))))
        left = {x.name for x in manifest.left_out}
        for alternatives in node.parse_depends(fields):
            assert {d.name for d in alternatives} & (carried | left), (pkg.name, alternatives)
    report = node.check_libraries(prefix, set(manifest.glibc_libraries))
    assert report.checked > 100
    assert report.loader
    assert (report.missing, report.outside, report.errors) == ({}, {}, [])  # nothing from this host but glibc
    assert (prefix.root / "usr" / "sbin" / "slurmd").resolve().name == "slurmd-wlm"


def test_a_python_without_tarfile_s_filters_is_refused_before_the_package_is_read(tmp_path, monkeypatch):
    monkeypatch.delattr(tarfile, "tar_filter", raising=False)  # absent before 3.10.12 and 3.11.4
    with pytest.raises(node.NodeError, match=r"x\.deb: unpacking without dpkg-deb needs tarfile's extraction "
                                             r"filters, which Python [0-9.]+ lacks \(fix: install dpkg"):
        node.extract_deb(tmp_path / "x.deb", tmp_path / "into")
    assert not (tmp_path / "into").exists()


@needs_gathered
@pytest.mark.skipif(not hasattr(tarfile, "tar_filter"),
                    reason="this Python's tarfile has no extraction filters: extract_deb refuses (the test above)")
def test_a_package_unpacks_the_same_without_dpkg(tmp_path):
    manifest = node.read_manifest(sc.DEBS)
    deb = sc.DEBS / node.DEBS / next(p.file for p in manifest.packages if p.name == "libmunge2")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "dpkg")], check=True)
    node.extract_deb(deb, tmp_path / "python")

    def tree(root: Path) -> dict:
        return {p.relative_to(root).as_posix(): (p.is_symlink(), p.read_bytes() if p.is_file() else None)
                for p in sorted(root.rglob("*"))}

    assert tree(tmp_path / "dpkg") == tree(tmp_path / "python") != {}


@needs_gathered
def test_a_node_with_an_older_glibc_than_the_packages_need_is_refused(tmp_path):
    copy = tmp_path / "gathered"
    shutil.copytree(sc.DEBS, copy)
    raw = json.loads((copy / node.MANIFEST).read_text())
    (copy / node.MANIFEST).write_text(json.dumps({**raw, "glibc_at_least": "99.1"}))
    with pytest.raises(node.NodeError, match=r"glibc \S+ here; the packages from .* need >= 99.1"):
        node.up(tmp_path / "state", debs=copy)
    (copy / node.MANIFEST).write_text(json.dumps(raw))
    first = raw["packages"][0]["file"]
    (copy / node.DEBS / first).write_bytes(b"changed")
    with pytest.raises(node.NodeError, match=re.escape(f"{first}: sha256 differs from manifest.json's")):
        node.up(tmp_path / "state2", debs=copy)


@pytest.mark.skipif(sc.SOURCE is None, reason=sc.NO_SLURM)
@pytest.mark.skipif(not sc.IS_ROOT, reason="device files (mknod) need root")
@pytest.mark.parametrize("gpus", [1, 4])
def test_slurm_reads_every_gpu_of_the_generated_gres_conf(tmp_path, prefix, gpus):
    """``slurmd -G`` (Slurm's GRES reading of this node, then exit: no daemon) on what ``up`` generates."""
    found = node.gpus_of(sc.gpu_query(gpus))
    devices = sc.fake_devices(tmp_path / "dev", gpus)
    env = prefix.daemon_env()
    hw = node.node_line(subprocess.run([str(prefix.program("sbin", "slurmd")), "-C"], env=env, capture_output=True,
                                       text=True, check=True).stdout)
    (tmp_path / "slurm.conf").write_text(node.slurm_conf(tmp_path, prefix, hw, gpus, node.features(found), "c",
                                                         (1, 2)))
    (tmp_path / "gres.conf").write_text(node.gres_conf(found, prefix.plugin_dir, devices))
    shown = subprocess.run([str(prefix.program("sbin", "slurmd")), "-G"], env={**env, "SLURM_CONF": str(
        tmp_path / "slurm.conf")}, capture_output=True, text=True)
    lines = [ln for ln in (shown.stdout + shown.stderr).splitlines() if "Gres Name=gpu" in ln]
    assert [ln.split("File=")[1].split()[0] for ln in lines] == [str(devices / f"nvidia{i}") for i in range(gpus)], \
        shown.stdout + shown.stderr
    assert "WARNING" not in shown.stdout + shown.stderr, shown.stdout + shown.stderr  # none left out


@pytest.mark.skipif(sc.SOURCE is None, reason=sc.NO_SLURM)
@pytest.mark.skipif(not sc.IS_ROOT, reason="starting slurmctld/slurmd/munged needs root")
@pytest.mark.slow(reason="a real cluster started, a job left running, then the cluster stopped")
def test_down_cancels_what_still_runs_and_leaves_no_process_of_the_cluster(tmp_path):
    """``down`` (by the pids ``up`` wrote, as run on a node) with a job still running: the job is cancelled, its
    processes end, and no daemon or slurmstepd of the cluster is left."""
    cluster = node.up(tmp_path / "state", **sc.where())  # no GPU query: a node without GPUs
    pid_file = tmp_path / "job.pid"
    try:
        done = cluster.client("sbatch", f"--output={tmp_path / 'job.out'}", "--wrap",
                              f"echo $$ > {pid_file}; exec sleep 600")
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + 60
        while not (pid_file.is_file() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.2)
        job = int(pid_file.read_text())
        assert node.daemons._alive(job)
        lines = node.down(cluster.state)
    finally:
        node.stop(cluster)  # this process started the daemons: reap them (and stop them, had down not run)
    assert lines[0].startswith("cancelled the jobs still queued or running: "), lines
    assert not node.daemons._alive(job)
    assert not node.steps_of(cluster.conf)
    assert [p.returncode is not None for p in cluster.daemons.values()] == [True, True, True]


@pytest.mark.skipif(sc.SOURCE is None, reason=sc.NO_SLURM)
@pytest.mark.skipif(not sc.IS_ROOT, reason="starting slurmctld/slurmd/munged needs root")
@pytest.mark.slow(reason="the real daemons started twice: once onto a taken port, then on new ones")
def test_a_port_taken_after_it_was_chosen_starts_the_daemons_again_on_new_ones(tmp_path, monkeypatch, capsys):
    """The race CI lost: slurmctld's port is taken between ``free_ports`` and its start (here by a listener made
    first). slurmctld stops on it; ``up`` says so in one line and starts the cluster on new ports, with the same
    cgroup setup (a taken port is no cgroup failure)."""
    with socket.socket() as held:
        held.bind(("", 0))
        held.listen()
        taken = held.getsockname()[1]
        cluster_ports = (taken, node.free_ports()[1])
        drawn = iter([cluster_ports])
        real = node.free_ports
        monkeypatch.setattr(node.daemons, "free_ports", lambda *a: next(drawn, None) or real(*a))
        cluster = node.up(tmp_path / "state", **sc.where())
        try:
            out = capsys.readouterr().out.splitlines()
            said = [ln for ln in out if ln.startswith("slurm-node: ports ")]
            assert len(said) == 1 and re.fullmatch(
                rf"slurm-node: ports {taken}, {cluster_ports[1]}: slurmctld exited 1 before the node is idle in sinfo: "
                rf"fatal: slurm_init_msg_engine_port error Address already in use( \(\+\d+ more\))?; starting again "
                rf"with ports {cluster.ports[0]}, {cluster.ports[1]}", said[0]), said
            assert taken not in cluster.ports
            assert f"SlurmctldPort={cluster.ports[0]}" in cluster.conf.read_text().splitlines()
            assert cluster.client("srun", "true").returncode == 0
            assert not [ln for ln in out if ln.startswith("slurm-node: cgroup: attempt")]
        finally:
            node.stop(cluster)


@pytest.mark.skipif(sc.SOURCE is None, reason=sc.NO_SLURM)
@pytest.mark.skipif(not sc.IS_ROOT, reason="starting slurmctld/slurmd/munged needs root")
@pytest.mark.slow(reason="a real slurmd refused, then a real cluster started")
def test_a_cgroup_setup_slurmd_refuses_is_one_line_and_the_next_one_starts_the_cluster(tmp_path, prefix, capsys):
    """A real refusal: ``CgroupPlugin=disabled`` is a plugin Slurm before 24.05 does not have, so ``slurmd -G``
    stops (as the H200's did with Slurm's default); ``up`` keeps its log, says why in one line and starts the
    cluster with v1-inert."""
    version = node.slurm_version(subprocess.run([str(prefix.program("sbin", "slurmd")), "-V"],
                                                env=prefix.daemon_env(), capture_output=True, text=True).stdout)
    if version[:2] >= (24, 5):
        pytest.skip(f"Slurm {version} has CgroupPlugin=disabled: no setup here that it refuses on every host")
    cluster = node.up(tmp_path / "state", cgroup=["disabled", "v1-inert"], **sc.where())
    try:
        said = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("slurm-node: cgroup: ")]
        assert said[0].startswith("slurm-node: cgroup: /sys/fs/cgroup is ")  # what this host is, first
        assert said[1].startswith("slurm-node: cgroup: attempt 1 of 2, disabled ("), said
        assert (said[1].endswith(
            "slurmd -G exited 1: error: Couldn't find the specified plugin name for disabled looking at all files "
            "(+1 more) (log: slurmd.cgroup-1.log)")), said
        assert len(said) == 2
        assert (cluster.cgroup, json.loads((cluster.state / node.NODE_FILE).read_text())["cgroup"]) == (
            "v1-inert", "v1-inert")
        assert (cluster.state / "cgroup.conf").read_text().splitlines()[1:] == ["CgroupPlugin=cgroup/v1"]
        assert "plugin name for disabled" in (cluster.state / "slurmd.cgroup-1.log").read_text()
        assert "disabled" not in (cluster.state / "slurmd.log").read_text()  # the running slurmd's log is its own
        assert (cluster.state / node.CGROUP_FILE).read_text().startswith("# Read by scripts/slurm_node up")
        assert cluster.client("sinfo", "--noheader", "--format=%t").stdout.strip() == "idle"
    finally:
        node.stop(cluster)
    with pytest.raises(node.NodeError, match=r"cgroup: slurmd starts with none of the setups tried here: disabled "
                                             r"\(slurmd -G exited 1: "):
        node.up(tmp_path / "state2", cgroup=["disabled"], **sc.where())
    with pytest.raises(node.NodeError, match="--cgroup nope: expected names among disabled, v1-inert"):
        node.up(tmp_path / "state3", cgroup=["nope"], **sc.where())


H200_RUN = DATA / "h200-20261201"
"""What the lent H200's Slurm run of 2026-12-01 left (docs/fleet-slurm-gpu.md): the host's cgroups as ``up``
read them, the node file, the merge job's matrix and log, the array tasks' logs."""


def test_the_h200_s_real_cgroups_give_v1_inert_first_and_rule_out_slurms_default():
    lines = (H200_RUN / "host-cgroups.txt").read_text().splitlines()
    mountinfo = lines[1] + "\n"
    self_cgroup = lines[lines.index("# /proc/self/cgroup") + 1] + "\n"
    host = _host(mountinfo, self_cgroup)
    assert host.line() == lines[-1].removeprefix("# ")  # the line `up` printed there, re-derived from its reading
    assert _plan(host) == [
        ("disabled", "Slurm 22.05.8 has no CgroupPlugin=disabled (from 24.05)"),
        ("v1-inert", None),
        ("v2-no-systemd", None),
        ("autodetect", "on cgroup2 it asks systemd over D-Bus for a scope, and systemd is not running"),
    ]
    started = json.loads((H200_RUN / "node.json").read_text())
    assert started["cgroup"] == "v1-inert"  # the first setup not ruled out is the one slurmd ran with
    assert started["cgroup_folders"] == []  # v1-inert makes none, so `down` had nothing to remove


def test_the_h200_merge_job_s_matrix_reads_back_and_prints_what_its_log_shows():
    m = Matrix.model_validate_json((H200_RUN / "matrix.json").read_text())
    assert m.kinds == ["h200"]
    assert [(c.lesson, c.outcome, c.task_state) for c in m.cells] == [
        ("day79-cutile", "passed", "COMPLETED"), ("tile-reduction-spike", "passed", "COMPLETED")]
    assert render(m) == (H200_RUN / "merge-2.out").read_text().splitlines()
    assert m.audit_exit == 1  # the node's runner key was not in the committed registry yet
    for log, cell in zip(("h200-1_0.out", "h200-1_1.out"), m.cells, strict=True):
        text = (H200_RUN / log).read_text()
        assert all(f"[{run}]" in text for run in cell.runs)  # each cell's runs are the ones its task printed


def test_the_folder_runs_as_the_docs_say(tmp_path):
    """``python scripts/slurm_node ACTION ...`` (docs/fleet-slurm-gpu.md): the folder is the program, from any
    working directory."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "slurm_node"
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "{gather,up,down}" in done.stdout
    done = subprocess.run([sys.executable, str(script), "up", "--debs", str(tmp_path / "none"), "--state",
                           str(tmp_path / "state")], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith(f"slurm-node: FAILED: {tmp_path / 'none' / 'manifest.json'}: missing"), done.stderr
