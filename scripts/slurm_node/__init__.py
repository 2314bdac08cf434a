"""A single-node Slurm cluster (munged, slurmctld, slurmd) on a host that has no network.

Two halves (docs/fleet-slurm-gpu.md is the walk-through):

  gather --out DIR    on a Debian/Ubuntu machine with apt and the registry: Debian's Slurm and munge
                      packages and the shared libraries they need, as .debs plus DIR/manifest.json
  up --debs DIR --state DIR [--cluster-file FILE]
                      on the node: unpack them into DIR's prefix (``dpkg-deb -x``), check that every
                      binary and plugin finds its libraries, write slurm.conf and gres.conf (the GPUs
                      nvidia-smi lists), start munged, slurmctld and slurmd, wait for the node, and
                      write the Slurm client commands and a tileproof cluster file for this node
  down --state DIR    stop the daemons ``up`` started (by their process ids)

``up --prefix /`` uses Slurm and munge as installed from the distribution's packages instead.

Run as ``python scripts/slurm_node gather|up|down ...`` (the folder is the program: ``__main__.py``). One module
per step: ``manifest`` and ``packages`` (``gather``), ``prefix`` (the unpacked packages and their libraries),
``gpus``, ``cgroups``, ``conf`` (slurm.conf), ``daemons`` (``up``, ``down``) and ``cli``; this module hands
their names on.
"""

from __future__ import annotations

from .cgroups import (
    CGROUP_FILE,
    CGROUP_MOUNT,
    CGROUP_SETUPS,
    DBUS_SOCKET,
    NO_CGROUP_USERS,
    SETUP_BY_NAME,
    SYSTEMD_RUNNING,
    CgroupSetup,
    HostCgroups,
    Planned,
    PortTaken,
    SlurmdError,
    cgroup_conf,
    cgroup_plan,
    daemon_failure,
    host_cgroups,
    mounts,
    read_cgroups,
    slurm_version,
)
from .cli import main
from .common import CLIENTS, DAEMONS, NodeError, last_line, run, say
from .conf import (
    PORT_RANGE_FILE,
    PORT_TRIES,
    NodeLine,
    ephemeral_range,
    free_ports,
    node_line,
    port_choices,
    slurm_conf,
)
from .daemons import (
    NODE_FILE,
    SOCKET_PATH_MAX,
    WAIT_S,
    Node,
    client_script,
    down,
    logs_tail,
    steps_of,
    stop,
    up,
    write_cluster_file,
)
from .gpus import VENDOR_WORDS, Gpu, check_devices, cluster_kinds, features, gpus_of, gres_conf, has_nvml, model_feature
from .manifest import DEBS, GLIBC, MANIFEST, Carried, Left, Manifest, read_manifest
from .packages import (
    PACKAGES,
    Dependency,
    candidates,
    deb_field,
    download,
    gather,
    glibc_version_asked,
    highest,
    listed_libraries,
    parse_depends,
    version_satisfies,
)
from .prefix import (
    LibraryReport,
    Prefix,
    check_libraries,
    elf_files,
    extract_deb,
    glibc_here,
    link_alternatives,
    unpack,
    version_tuple,
)

__all__ = [
    "PACKAGES", "Dependency", "parse_depends", "listed_libraries", "version_satisfies", "candidates", "download",
    "deb_field", "glibc_version_asked", "highest", "gather", "GLIBC", "MANIFEST", "DEBS", "Carried", "Left",
    "Manifest", "read_manifest", "CLIENTS", "DAEMONS", "NodeError", "say", "run", "last_line", "NODE_FILE",
    "WAIT_S", "client_script", "Node", "logs_tail", "up", "SOCKET_PATH_MAX", "write_cluster_file", "steps_of",
    "stop", "down", "VENDOR_WORDS", "Gpu", "gpus_of", "model_feature", "features", "has_nvml", "gres_conf",
    "check_devices", "cluster_kinds", "Prefix", "unpack", "link_alternatives", "extract_deb", "LibraryReport",
    "elf_files", "check_libraries", "glibc_here", "version_tuple", "NO_CGROUP_USERS", "CGROUP_MOUNT",
    "SYSTEMD_RUNNING", "DBUS_SOCKET", "CGROUP_FILE", "HostCgroups", "mounts", "host_cgroups", "read_cgroups",
    "CgroupSetup", "CGROUP_SETUPS", "SETUP_BY_NAME", "Planned", "cgroup_plan", "cgroup_conf", "slurm_version",
    "daemon_failure", "SlurmdError", "PortTaken", "PORT_RANGE_FILE", "PORT_TRIES", "port_choices",
    "ephemeral_range", "free_ports", "NodeLine", "node_line", "slurm_conf", "main",
]
