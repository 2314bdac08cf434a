"""``run --devices all|N,M``: one ``tileproof run`` per GPU on this host, all at once.

Each child is an ordinary run session pinned to one GPU (``--device N``, so
``CUDA_VISIBLE_DEVICES=N`` in nvidia-smi's order): its own environment capture
(the GPU's index, uuid and PCI bus id, and the host's ``nvidia-smi topo -m``),
one record per program, its own closing session record. So a fan-out over k
GPUs leaves one record per (program, GPU) and k sessions, and a GPU that fails
is that GPU's records, not a lost run.

The fan-out names each child's session (``--session-id``) and reads back what
it wrote, so what it reports is the records, never a child's printed words: a
session without its session record (its GPU hung or fell off mid-run and the
child was killed at its deadline, or it died) is a named gap, with the
programs it recorded and the ones it did not, while the other GPUs' sessions
complete on their own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from tileproof.records.errors import TileproofError
from tileproof.records.models import RunRecord, SessionRecord
from tileproof.records.store import load_record, new_run_id, record_files
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
               extra: list[str] | None = None, session_id: str | None = None) -> list[str]:
    """The ``tileproof run`` arguments of the child pinned to ``device`` (``extra``: flags passed on)."""
    return [*(extra or []), *lessons, *(a for p in programs for a in ("--program", p)), "--timeout", str(timeout),
            "--root", str(root), "--device", str(device), *(["--session-id", session_id] if session_id else [])]


@dataclass(frozen=True)
class DeviceSession:
    """One GPU's session of a fan-out, as its records say (read back by its session id)."""

    device: int
    session_id: str
    child: children.Child
    expected: tuple[str, ...]
    """The programs the fan-out chose (repository-relative): one run record each is expected."""
    runs: tuple[RunRecord, ...]
    """The run records the session wrote, oldest first."""
    closed: SessionRecord | None
    """Its session record; None: the session never finished (a gap)."""

    @property
    def missing(self) -> list[str]:
        recorded = {r.program for r in self.runs}
        return [p for p in self.expected if p not in recorded]

    @property
    def passed(self) -> bool:
        return self.closed is not None and not self.missing and all(r.verdict == "passed" for r in self.runs)

    def gap(self) -> str | None:
        """Why this GPU's part of the course is not all recorded, in one line; None when it is."""
        if self.closed is not None and not self.missing:
            return None
        code = self.child.exit_code
        how = (f"killed at its deadline, {self.child.deadline_s:g} s" if code is None
               else f"killed by signal {-code}" if code < 0 else f"exit {code}: {self.child.last_line()}")
        head = (f"session {self.session_id} wrote no session record ({how})" if self.closed is None
                else f"session {self.session_id} closed without a record of every program")
        return (f"{head}: {len(self.expected) - len(self.missing)} of {len(self.expected)} programs recorded"
                + (f"; no record of {', '.join(self.missing)}" if self.missing else ""))

    def line(self) -> str:
        gap = self.gap()
        if gap is not None:
            return f"[gpu {self.device}] gap: {gap}"
        counts = Counter(r.verdict for r in self.runs)
        return f"[gpu {self.device}] session {self.session_id}: " + ", ".join(
            f"{n} {v}" for v, n in sorted(counts.items()))


def sessions_written(root: Path, since: str, ids: set[str]) -> dict[str, tuple[list[RunRecord], SessionRecord | None]]:
    """Session id -> (its run records, its session record) for the sessions ``ids``, from the records written
    at or after ``since`` (a record file's name starts with its UTC time, so older ones are not read)."""
    found: dict[str, tuple[list[RunRecord], SessionRecord | None]] = {i: ([], None) for i in ids}
    for path in record_files(root):
        if path.name[:16] < since:
            continue
        record = load_record(path, root)
        if isinstance(record, RunRecord) and record.environment.session_id in found:
            found[record.environment.session_id][0].append(record)
        elif isinstance(record, SessionRecord) and record.session_id in found:
            found[record.session_id] = (found[record.session_id][0], record)
    return found


def fan_out_sessions(spec: str, request: session.Request, say: Callable[[str], None] = print) -> list[DeviceSession]:
    """Run every selected program on every chosen GPU at once, and read back each GPU's session.

    Each child has the deadline of its session (``runner.session.deadline``): one still running
    then is killed, and its GPU's session is a gap."""
    chosen = session.select(request.root, request.lessons, request.programs,  # a bad name: one line, nothing run
                            request.python_only)
    indexes = plan_devices(spec, gpu_query().rows)
    extra = [flag for flag, on in (("--record-no-gpu", request.record_no_gpu), ("--python-only", request.python_only),
                                   (cuda_tile.OUTSIDE_FLAG, request.outside_range)) if on] + \
        (["--output-cap", str(request.cap)] if request.cap is not None else [])
    since = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    ids = {i: new_run_id("session") for i in indexes}
    say(f"run: --devices {spec}: GPUs {', '.join(map(str, indexes))}, one run session each, at once")
    args = [["run", *child_args(list(request.lessons), list(request.programs), request.timeout, request.root, i,
                                extra, ids[i])] for i in indexes]
    done = children.in_parallel([(a, request.root) for a in args], session.deadline(len(chosen.programs),
                                                                                   request.timeout))
    written = sessions_written(request.root, since, set(ids.values()))
    expected = tuple(p.relative_to(request.root).as_posix() for p in chosen.programs)
    out = []
    for i, d in zip(indexes, done, strict=True):  # in_parallel: one result per job
        for line in d.lines():
            say(f"[gpu {i}] {line}")
        runs, closed = written[ids[i]]
        out.append(DeviceSession(i, ids[i], d, expected, tuple(runs), closed))
    return out


def fan_out(spec: str, request: session.Request, say=print) -> int:
    """``fan_out_sessions``, one line per GPU (its verdicts, or its gap) and a summary; exit 0 only when every
    GPU's session closed with every program passed."""
    sessions = fan_out_sessions(spec, request, say)
    for s in sessions:
        say(s.line())
    failed = [s.device for s in sessions if not s.passed]
    gaps = [s.device for s in sessions if s.gap() is not None]
    say(f"run: --devices {spec}: {len(sessions) - len(failed)}/{len(sessions)} GPUs passed every program"
        + (f"; not GPU {', '.join(map(str, failed))}" if failed else "")
        + (f" ({len(gaps)} a gap: GPU {', '.join(map(str, gaps))})" if gaps else ""))
    return 1 if failed else 0
