"""The command line: ``gather``, ``up`` and ``down`` (the package's docstring says what each does)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .cgroups import SETUP_BY_NAME
from .common import NodeError, say
from .daemons import down, logs_tail, up
from .manifest import DEBS
from .packages import gather

DESCRIPTION = "A single-node Slurm cluster (munged, slurmctld, slurmd) on a host that has no network."
"""The first line of the package's docstring: what ``--help`` says it is."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="slurm_node", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="action", required=True)
    g = sub.add_parser("gather", help="download the packages and their libraries (needs apt and the registry)")
    g.add_argument("--out", type=Path, required=True, help="a new folder: debs/ and manifest.json")
    u = sub.add_parser("up", help="unpack, configure and start a single-node cluster")
    where = u.add_mutually_exclusive_group(required=True)
    where.add_argument("--debs", type=Path, help="the folder gather wrote")
    where.add_argument("--prefix", type=Path, help="where Slurm and munge are installed (/ for the system's)")
    u.add_argument("--state", type=Path, required=True, help="a new folder: prefix, configs, logs, sockets")
    u.add_argument("--cluster-file", type=Path, default=None, help="write a tileproof cluster file for this node")
    u.add_argument("--time-limit", default="00:10:00", help="the cluster file's time_limit (default 00:10:00)")
    u.add_argument("--cluster-name", default="tileproof-node")
    u.add_argument("--feature", action="append", default=[], help="a node feature beyond the GPUs' (repeatable)")
    u.add_argument("--gpu-query", type=Path, default=None,
                   help="an nvidia-smi --query-gpu transcript to read instead of asking nvidia-smi (tests)")
    u.add_argument("--device-dir", type=Path, default=Path("/dev"), help="where the nvidiaN device files are")
    u.add_argument("--cgroup", default=None, metavar="NAME[,NAME]",
                   help=f"the cgroup setups to try, in order ({', '.join(SETUP_BY_NAME)}); default: the ones that "
                        "can work on this host, least intrusive first")
    d = sub.add_parser("down", help="stop the daemons up started")
    d.add_argument("--state", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.action == "gather":
            manifest = gather(args.out.resolve())
            size = sum((args.out / DEBS / p.file).stat().st_size for p in manifest.packages)
            say(f"gather: {len(manifest.packages)} packages ({size / 1e6:.1f} MB) into {args.out / DEBS}; "
                f"left out: {', '.join(x.name for x in manifest.left_out)}; glibc >= {manifest.glibc_at_least}")
            return 0
        if args.action == "up":
            up(args.state.resolve(), debs=args.debs.resolve() if args.debs else None,
               system_prefix=args.prefix.resolve() if args.prefix else None,
               gpu_query=args.gpu_query, device_dir=args.device_dir, extra_features=args.feature,
               cluster=args.cluster_name, cluster_file=args.cluster_file, time_limit=args.time_limit,
               cgroup=None if args.cgroup is None else [n.strip() for n in args.cgroup.split(",")])
            return 0
        for line in down(args.state.resolve()):
            say(f"down: {line}")
        say("down: stopped")
        return 0
    except NodeError as e:
        print(f"slurm-node: FAILED: {e}", file=sys.stderr, flush=True)
        state = getattr(args, "state", None)
        for line in logs_tail(state.resolve()) if args.action == "up" and state and state.is_dir() else []:
            print(f"slurm-node:   {line}", file=sys.stderr, flush=True)
        return 1
