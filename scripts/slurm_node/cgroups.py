"""cgroups: slurmd loads a cgroup plugin at every start, whatever else slurm.conf says, and stops when
its init fails; Slurm's default on a cgroup2 host asks systemd over D-Bus for a scope, which a host
without systemd cannot give (the "cgroups" section below has the sources). The node needs no cgroup:
its slurm.conf names no plugin that asks for one (``NO_CGROUP_USERS``). ``up`` reads the host's
cgroups (the mount at /sys/fs/cgroup, whether it is writable, systemd and D-Bus), rules out each
setup of ``CGROUP_SETUPS`` that cannot work there with one line saying why, and tries the others in
order (``slurmd -G``, then the daemons), one line for each that slurmd refuses, with the cause from
its log; ``--cgroup`` names the setups to try instead.

"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .common import NodeError

NO_CGROUP_USERS = ("ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none")
"""The slurm.conf plugins that use no cgroup (with no CoreSpecCount or MemSpecLimit): tasks are tracked through
/proc, confined by nothing, and accounted by nobody, so the cgroup plugin slurmd loads is never asked for a
cgroup. tileproof contains its own programs (runner/process.py) and Slurm's GRES sets the GPU a task sees."""


CGROUP_MOUNT = Path("/sys/fs/cgroup")
"""Where Slurm looks for cgroups (CgroupMountpoint's default; only meant to change for Slurm's own tests)."""


SYSTEMD_RUNNING = Path("/run/systemd/system")
"""The folder systemd makes when it is the init system (what ``sd_booted()`` tests)."""


DBUS_SOCKET = Path("/run/dbus/system_bus_socket")
"""The system bus, through which cgroup/v2 asks systemd for a scope."""


CGROUP_FILE = "host-cgroups.txt"
"""STATE/host-cgroups.txt: what ``up`` read about this host's cgroups (the mounts, /proc/self/cgroup, the root's
controllers), kept for whoever reads a failed ``up``."""


@dataclass(frozen=True)
class HostCgroups:
    """This host's cgroups as Slurm's cgroup plugins meet them (``host_cgroups``; judged by ``cgroup_plan``)."""

    mounted: str | None
    """The file system type at /sys/fs/cgroup: ``cgroup2`` (unified), ``tmpfs`` (cgroup v1 hierarchies below it), or
    None (nothing mounted)."""
    systemd_hierarchy: str | None
    """Below a tmpfs: the type at /sys/fs/cgroup/systemd (``cgroup``: v1; ``cgroup2``: systemd's unified tree)."""
    read_only: bool
    """/sys/fs/cgroup is mounted read-only."""
    writable: bool
    """This process may create a folder in /sys/fs/cgroup."""
    self_cgroup: tuple[str, ...]
    """/proc/self/cgroup: one line ``0::/PATH`` on a unified host, one per hierarchy otherwise."""
    systemd: bool
    """systemd is the init system (``SYSTEMD_RUNNING``)."""
    dbus: bool
    """The system bus's socket is there (``DBUS_SOCKET``)."""
    system_slice: bool
    """/sys/fs/cgroup/system.slice exists (cgroup/v2 puts its slurmstepd scope in it)."""

    @property
    def slurm_default(self) -> str | None:
        """The plugin Slurm's ``autodetect`` loads here, by its own rule (autodetect_cgroup_version, 22.05)."""
        if self.mounted == "cgroup2":
            return "cgroup/v2"
        if self.mounted == "tmpfs":
            return {"cgroup2": "cgroup/v2", "cgroup": "cgroup/v1"}.get(self.systemd_hierarchy or "")
        return None

    def line(self) -> str:
        if self.mounted is None:
            fs = f"nothing mounted at {CGROUP_MOUNT}"
        elif self.mounted == "cgroup2":
            fs = f"{CGROUP_MOUNT} is cgroup2"
        else:
            fs = f"{CGROUP_MOUNT} is {self.mounted} (systemd's hierarchy: {self.systemd_hierarchy or 'none'})"
        access = "read-only" if self.read_only else "writable" if self.writable else "not writable here"
        inside = self.self_cgroup[0] if len(self.self_cgroup) == 1 else f"{len(self.self_cgroup)} hierarchies"
        return (f"{fs}, {access}; this process in {inside}; "
                f"systemd {'running' if self.systemd else 'not running'}, D-Bus socket "
                f"{'present' if self.dbus else 'absent'}; Slurm's default here: {self.slurm_default or 'none'}")


def mounts(mountinfo: str) -> dict[str, tuple[str, set[str]]]:
    """``/proc/self/mountinfo`` -> mount point -> (file system type, mount options); the last mount wins (it hides
    the ones below it)."""
    out = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if len(fields) > dash + 1 and len(fields) > 5:
            point = fields[4].replace("\\040", " ")
            out[point] = (fields[dash + 1], set(fields[5].split(",")))
    return out


def host_cgroups(mountinfo: str, self_cgroup: str, present: Iterable[Path], writable: bool) -> HostCgroups:
    """What ``read_cgroups`` reads, from its texts: ``present`` holds those of SYSTEMD_RUNNING, DBUS_SOCKET and
    /sys/fs/cgroup/system.slice that exist; ``writable``: access(2) of /sys/fs/cgroup for writing."""
    table = mounts(mountinfo)
    at = table.get(str(CGROUP_MOUNT))
    below = table.get(str(CGROUP_MOUNT / "systemd"))
    there = set(present)
    read_only = at is not None and "ro" in at[1]
    return HostCgroups(
        mounted=at[0] if at else None, systemd_hierarchy=below[0] if below and at and at[0] == "tmpfs" else None,
        read_only=read_only, writable=at is not None and writable and not read_only,
        self_cgroup=tuple(ln.strip() for ln in self_cgroup.splitlines() if ln.strip()) or ("(none)",),
        systemd=SYSTEMD_RUNNING in there, dbus=DBUS_SOCKET in there,
        system_slice=CGROUP_MOUNT / "system.slice" in there)


def read_cgroups(state: Path | None = None) -> HostCgroups:
    """This host's cgroups; with ``state``, what was read is kept in STATE/host-cgroups.txt."""
    mountinfo = Path("/proc/self/mountinfo").read_text()
    self_cgroup = Path("/proc/self/cgroup").read_text()
    found = host_cgroups(mountinfo, self_cgroup,
                         [p for p in (SYSTEMD_RUNNING, DBUS_SOCKET, CGROUP_MOUNT / "system.slice") if p.exists()],
                         os.access(CGROUP_MOUNT, os.W_OK))
    if state is not None:
        controllers = CGROUP_MOUNT / "cgroup.controllers"
        (state / CGROUP_FILE).write_text("\n".join([
            "# Read by scripts/slurm_node up: the cgroup mounts, this process's cgroups, the root's controllers.",
            *(ln for ln in mountinfo.splitlines() if "cgroup" in ln), "# /proc/self/cgroup", self_cgroup.rstrip(),
            f"# {controllers}", controllers.read_text().strip() if controllers.is_file() else "(none)",
            f"# {found.line()}", ""]))
    return found


@dataclass(frozen=True)
class CgroupSetup:
    """One cgroup.conf ``up`` may start slurmd with."""

    name: str
    settings: tuple[str, ...] | None
    """cgroup.conf's lines; None: no cgroup.conf at all (Slurm's default)."""
    what: str


CGROUP_SETUPS = (
    CgroupSetup("disabled", ("CgroupPlugin=disabled",), "no cgroup plugin (Slurm 24.05 and later)"),
    CgroupSetup("v1-inert", ("CgroupPlugin=cgroup/v1",),
                "cgroup/v1, whose init touches no file, and no plugin that asks it for a cgroup"),
    CgroupSetup("v2-no-systemd", ("CgroupPlugin=cgroup/v2", "IgnoreSystemd=yes"),
                "cgroup/v2 making its own folders under /sys/fs/cgroup/system.slice, without systemd"),
    CgroupSetup("autodetect", None, "Slurm's default: autodetect (cgroup2: cgroup/v2 through systemd over D-Bus)"),
)
"""In the order ``up`` tries them: the ones that touch the host's cgroups least first."""


SETUP_BY_NAME = {s.name: s for s in CGROUP_SETUPS}


@dataclass(frozen=True)
class Planned:
    """A setup of the plan, or why it is not tried here."""

    setup: CgroupSetup
    skipped: str | None = None


def cgroup_plan(host: HostCgroups, version: tuple[int, ...], plugins: Iterable[str]) -> list[Planned]:
    """Every setup in order, each with why it cannot work on this host and Slurm (None: try it). ``plugins``:
    the file names in PluginDir."""
    have = set(plugins)
    shown = f"{version[0]}.{version[1]:02d}" + "".join(f".{v}" for v in version[2:])

    def why_not(setup: CgroupSetup, earlier: list[Planned]) -> str | None:
        if setup.name == "disabled":
            return None if version[:2] >= (24, 5) else f"Slurm {shown} has no CgroupPlugin=disabled (from 24.05)"
        if setup.name == "v1-inert":
            return None if "cgroup_v1.so" in have else "no cgroup_v1.so in PluginDir"
        if setup.name == "v2-no-systemd":
            if "cgroup_v2.so" not in have:
                return "no cgroup_v2.so in PluginDir"
            if host.mounted != "cgroup2":
                return f"{CGROUP_MOUNT} is {host.mounted or 'not mounted'}, not cgroup2"
            if host.read_only or not host.writable:
                return f"{CGROUP_MOUNT} is {'mounted read-only' if host.read_only else 'not writable here'}"
            if host.systemd:
                return "systemd runs here (IgnoreSystemd is for hosts without it: it would fight systemd's tree)"
            return None
        default = host.slurm_default
        if default is None:
            return f"Slurm's autodetect finds no cgroup file system at {CGROUP_MOUNT}"
        if default == "cgroup/v1" and any(p.setup.name == "v1-inert" and p.skipped is None for p in earlier):
            return "it loads cgroup/v1 here, as v1-inert does"
        if default == "cgroup/v2" and host.mounted == "tmpfs":
            return "cgroup/v2 on cgroup v1 hierarchies: Slurm stops (\"Hybrid mode is not supported\")"
        if default == "cgroup/v2" and not (host.systemd and host.dbus):
            missing = "systemd is not running" if not host.systemd else f"{DBUS_SOCKET} is missing"
            return f"on cgroup2 it asks systemd over D-Bus for a scope, and {missing}"
        return None

    plan: list[Planned] = []
    for setup in CGROUP_SETUPS:
        plan.append(Planned(setup, why_not(setup, plan)))
    return plan


def cgroup_conf(setup: CgroupSetup) -> str:
    return "\n".join(["# Generated by scripts/slurm_node: " + setup.what + ".", *(setup.settings or ()), ""])


_SLURM_VERSION = re.compile(r"\b(\d+)\.(\d+)\.(\d+)\b")


def slurm_version(text: str) -> tuple[int, int, int]:
    """``slurmd -V`` (``slurm-wlm 22.05.8``, ``slurm 24.05.1``) -> (22, 5, 8)."""
    m = _SLURM_VERSION.search(text)
    if m is None:
        raise NodeError(f"slurmd -V: no version in {text.strip()[:100]!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


_CHAIN = re.compile(r"Unable to initialize cgroup plugin|slurmd initialization failed|cannot create \S+ context for|"
                    r"Couldn't load specified plugin name for|Controller \S+ is not enabled")
"""slurmd.log's lines that follow from a failed plugin init (or only say a cgroup controller is off), not its cause."""


def daemon_failure(log: str, output: str, name: str = "slurmd") -> str:
    """Why a daemon (slurmd, slurmctld) stopped, in one line: its log's first fatal line, else its first error
    line that is not a consequence of an earlier one (``_CHAIN``), else its own output's last line."""
    said = [re.sub(r"^\[[^]]*\]\s*", "", ln.strip()) for ln in log.splitlines()]
    errors = [ln for ln in said if re.match(rf"({name}: )?(error|fatal): ", ln)]
    causes = [ln for ln in errors if not _CHAIN.search(ln)]
    causes.sort(key=lambda ln: not re.match(rf"({name}: )?fatal: ", ln))  # stable: the first fatal line first
    if causes:
        return re.sub(rf"^({name}: )?", "", causes[0]) + (f" (+{len(causes) - 1} more)" if len(causes) > 1 else "")
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return errors[-1] if errors else lines[-1] if lines else "no error logged"


class SlurmdError(NodeError):
    """slurmd (or ``slurmd -G``) stopped while starting: another cgroup setup may let it start."""


class PortTaken(NodeError):
    """A daemon stopped because its port was taken after ``free_ports`` found it free: new ports may let it start."""
