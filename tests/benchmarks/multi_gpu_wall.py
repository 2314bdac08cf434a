"""Benchmark: the whole course on one GPU against the whole course on every GPU of this host at once.

In one call, from the project root of a host with N >= 2 GPUs (docs/fleet-multi-gpu.md):

    python tests/benchmarks/multi_gpu_wall.py [--out tests/benchmarks/multi_gpu_wall.txt] [--timeout 900]

1. the course on GPU 0 alone: a fan-out over that one GPU (what ``tileproof run --devices 0`` does: one child
   session);
2. the course on every GPU at once: ``tileproof run --devices all`` (N child sessions).

Both go through ``tileproof.fleet.devices.fan_out_sessions`` (the code ``run --devices`` runs), each timed
around its call, so the two wall times differ by the number of GPUs and nothing else; every session's
records land in runs/ and evidence/ as any run's do (signed with ``TILEPROOF_SIGNING_KEY`` when it is set).

What it writes (``--out``, and the same lines on stdout): the two wall times and N times the first (N courses
one after another on one GPU); every program's duration (its record's ``step.duration_s``) on the one-GPU run
and on each GPU of the fan-out side by side, with the spread across GPUs (min, median, max, and max - min as a
% of the median: cross-device variance shown, not averaged away); each GPU's index, uuid, PCI bus id, session
and verdicts, or its gap; the NVLink-multicast settings the children ran with and the topology transcript.

On a host with fewer than two GPUs it says so and exits 2 without writing anything. Exit 1 when a session has
a gap or a program did not pass (the output is still written: those are results too), else 0.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from tileproof.fleet import devices
from tileproof.runner import session
from tileproof.runner.capture import gpu_query

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
"""What a shared multi-GPU host wants in every child's environment (docs/fleet-multi-gpu.md)."""


def timed(spec: str, request: session.Request) -> tuple[float, list[devices.DeviceSession]]:
    t0 = time.perf_counter()
    done = devices.fan_out_sessions(spec, request, say=lambda line: print(f"  {line}", flush=True))
    return time.perf_counter() - t0, done


def _seconds(s: devices.DeviceSession) -> dict[str, float]:
    return {r.program: r.step.duration_s for r in s.runs}


def report(one_wall: float, one: devices.DeviceSession, all_wall: float, fanned: list[devices.DeviceSession],
           environ: dict[str, str]) -> list[str]:
    """The benchmark's lines, from the two calls' sessions (pure: tests/test_fleet_devices.py feeds it made-up
    sessions)."""
    n = len(fanned)
    walls = [(f"wall, the course on GPU {one.device} alone (1 session)", one_wall),
             (f"wall, the course on all {n} GPUs at once ({n} sessions)", all_wall),
             (f"{n} x the first: the course {n} times in a row on one GPU", n * one_wall)]
    width = max(len(label) for label, _ in walls)
    out = [f"# tileproof run --devices: the course on 1 GPU, then on all {n} GPUs at once (one call)",
           *(f"{label.ljust(width)}  {seconds:8.1f} s" for label, seconds in walls),
           f"{n} courses at once took {all_wall / one_wall:.2f} x one course's wall: {n * one_wall / all_wall:.2f} "
           f"courses per course-time (ideal {n})",
           "NVLink multicast settings the children ran with: "
           + ", ".join(f"{k}={environ.get(k, '(unset)')}" for k in MULTICAST_OFF), ""]
    header = ["program", f"1gpu:{one.device}", *(f"gpu{s.device}" for s in fanned), "min", "median", "max",
              "spread"]
    rows = [header]
    per = [_seconds(s) for s in fanned]
    for program in one.expected:
        times = [p[program] for p in per if program in p]
        cells = [program, _cell(_seconds(one).get(program)), *(_cell(p.get(program)) for p in per)]
        if times:
            mid = statistics.median(times)
            spread = f"{(max(times) - min(times)) / mid * 100:.1f}%" if mid > 0 else "-"
            cells += [_cell(min(times)), _cell(mid), _cell(max(times)), spread]
        else:
            cells += ["-", "-", "-", "-"]
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    out += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
            for r in rows]
    out += ["", "durations in s (each record's step.duration_s); '-': no record (a gap); spread: (max - min) / "
            "median across the fan-out's GPUs", ""]
    for s in [one, *fanned]:
        gpu = next((r.environment.gpu for r in s.runs if r.environment.gpu is not None), None)
        named = f"{gpu.uuid} at {gpu.pci_bus_id or '(no bus id)'}" if gpu else "(no usable GPU recorded)"
        role = "1 GPU " if s is one else f"{n} GPUs"
        out.append(f"{role} gpu {s.device}: {named}: {s.line().split('] ', 1)[1]}")
    topo = next((r.environment.nvidia_smi_topo.path for s in fanned for r in s.runs
                 if r.environment.nvidia_smi_topo is not None), None)
    out.append(f"topology: {topo or '(none recorded)'}")
    return out


def _cell(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("tests/benchmarks/multi_gpu_wall.txt"))
    parser.add_argument("--timeout", type=float, default=900.0, help="per-program timeout, as tileproof run's")
    parser.add_argument("--root", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    rows = gpu_query().rows
    listed = sorted(int(r["index"]) for r in rows or [] if r["index"] is not None)
    if len(listed) < 2:
        where = "no nvidia-smi answered" if rows is None else f"nvidia-smi lists {len(listed)} GPU(s)"
        print(f"multi_gpu_wall: {where}; the N-vs-1 measurement needs at least 2: nothing run, nothing written",
              file=sys.stderr)
        return 2
    missing = [k for k, v in MULTICAST_OFF.items() if os.environ.get(k) != v]
    if missing:
        print(f"multi_gpu_wall: note: {', '.join(missing)} not set as docs/fleet-multi-gpu.md says "
              f"({', '.join(f'{k}={MULTICAST_OFF[k]}' for k in missing)})", file=sys.stderr)
    request = session.Request(root=args.root.resolve(), lessons=(), programs=(), device=listed[0],
                              timeout=args.timeout, cap=None, record_no_gpu=False)
    print(f"multi_gpu_wall: the course on GPU {listed[0]} alone", flush=True)
    one_wall, (one,) = timed(str(listed[0]), request)
    print(f"multi_gpu_wall: the course on all {len(listed)} GPUs at once", flush=True)
    all_wall, fanned = timed("all", request)
    lines = report(one_wall, one, all_wall, fanned, dict(os.environ))
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if one.passed and all(s.passed for s in fanned) else 1


if __name__ == "__main__":
    sys.exit(main())
