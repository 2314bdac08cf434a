"""``run --devices all|N,M``: one ``tileproof run`` per GPU on this host, all at once.

Each child is an ordinary run session pinned to one GPU (``--device N``, so
``CUDA_VISIBLE_DEVICES=N``): its own environment capture, one record per
program, its own closing session record. So a fan-out over k GPUs leaves one
record per (program, GPU) and k sessions, and a GPU that fails is that GPU's
records, not a lost run.
"""

from __future__ import annotations

from pathlib import Path

from tileproof.records.errors import TileproofError
from tileproof.runner import children, session
from tileproof.runner.capture import gpu_query
from tileproof.toolchain import cuda_tile


def plan_devices(spec: str, rows: list[dict] | None) -> list[int]:
    """The GPU indexes to use: ``all`` is every GPU nvidia-smi lists; ``0,2`` names them.

    Where nvidia-smi is absent (``rows`` None) there is nothing to list: ``all`` is
    device 0 alone, whose run then records its program's own no-GPU gate.
    """
    listed = None if rows is None else [int(r["index"]) for r in rows]
    if spec.strip() == "all":
        if listed is None:
            return [0]
        if not listed:
            raise TileproofError("--devices all: nvidia-smi lists no GPU (fix: check the driver with nvidia-smi)")
        return sorted(listed)
    try:
        wanted = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise TileproofError(f"--devices {spec}: expected 'all' or GPU indexes like 0,1,3") from None
    if not wanted or len(set(wanted)) != len(wanted) or min(wanted) < 0:
        raise TileproofError(f"--devices {spec}: expected distinct GPU indexes like 0,1,3, or 'all'")
    unknown = [] if listed is None else [i for i in wanted if i not in listed]
    if listed is not None and unknown:
        raise TileproofError(f"--devices {spec}: nvidia-smi lists no GPU {unknown[0]} "
                             f"(fix: one of {', '.join(map(str, listed))}, or 'all')")
    return wanted


def child_args(lessons: list[str], programs: list[str], timeout: float, root: Path, device: int,
               extra: list[str] | None = None) -> list[str]:
    """The ``tileproof run`` arguments of the child pinned to ``device`` (``extra``: flags passed on)."""
    return [*(extra or []), *lessons, *(a for p in programs for a in ("--program", p)), "--timeout", str(timeout),
            "--root", str(root), "--device", str(device)]


def fan_out(spec: str, request: session.Request, say=print) -> int:
    """Run every selected program on every chosen GPU at once; exit 0 only when every child did.

    Each child has the deadline of its session (``runner.session.deadline``): one still running
    then is killed, and its GPU fails."""
    chosen = session.select(request.root, request.lessons, request.programs,  # a bad name: one line, nothing run
                            request.python_only)
    indexes = plan_devices(spec, gpu_query().rows)
    extra = [flag for flag, on in (("--record-no-gpu", request.record_no_gpu), ("--python-only", request.python_only),
                                   (cuda_tile.OUTSIDE_FLAG, request.outside_range)) if on] + \
        (["--output-cap", str(request.cap)] if request.cap is not None else [])
    say(f"run: --devices {spec}: GPUs {', '.join(map(str, indexes))}, one run session each, at once")
    args = [["run", *child_args(list(request.lessons), list(request.programs), request.timeout, request.root, i,
                                extra)] for i in indexes]
    done = children.in_parallel([(a, request.root) for a in args], session.deadline(len(chosen.programs),
                                                                                   request.timeout))
    for i, d in zip(indexes, done, strict=True):  # in_parallel: one result per job
        for line in d.lines():
            say(f"[gpu {i}] {line}")
        if d.exit_code is None:
            say(f"[gpu {i}] {d.last_line()}")
    failed = [i for i, d in zip(indexes, done, strict=True) if d.exit_code != 0]
    say(f"run: --devices {spec}: {len(indexes) - len(failed)}/{len(indexes)} GPUs passed every program"
        + (f"; not GPU {', '.join(map(str, failed))}" if failed else ""))
    return 1 if failed else 0
