"""Plausibility signals: what a record made with a fake GPU tends to show, cheap to check and never proof.

A record signed by a registered runner key can still come from a machine whose ``nvidia-smi`` or ``cupy`` is a
shim, or be assembled from another machine's transcripts. :func:`signals` looks, over every record that counts
(``trust.admits``) and names a GPU, oldest first (``standing.age``), for five (``shim-path``, ``smi-clock``,
``launch-too-fast``, ``host-facts``, ``gpu-two-hosts``), each a :class:`Signal` whose words say it is not proof,
against the runner key's first record as its baseline. A signal is settled by an agreeing record of another
runner key (:func:`agrees`: the same pass, or the same failure of a cuda-tile release) or a lesson's
front-matter note (``PlausibilityNote``); ``gate.decide`` keeps a lesson
whose evidence has an unsettled one from publishing (:func:`doubts`) and the audit reports each no lesson explains.
What each signal catches, the baseline and how to settle one: docs/hostile-inputs.md.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from tileproof.judge import trust
from tileproof.judge.selection import Need, needs
from tileproof.judge.trust import standing
from tileproof.records.models import (
    BenchRecord,
    ClaimsRecord,
    Environment,
    GpuFacts,
    PlausibilityNote,
    PlausibilitySignal,
    RunRecord,
    Transcript,
    TranscriptRef,
    share,
)
from tileproof.records.store import Examined, run_id_time

SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
"""Folders anyone on a host may write to: a shim is cheapest there."""
SHIM_VARS = ("PATH", "PYTHONPATH")
"""The variables that decide which ``nvidia-smi`` runs and which ``cupy``/``cuda.tile`` is imported."""
HOST_FACTS = ("system", "machine", "release", "cpu_count")
"""``HostFacts`` fields a runner keeps from record to record (the Python version is chosen per session)."""
MIN_LAUNCH_S: dict[str, float] = {".py": 0.5, ".jl": 0.5, ".cu": 0.05}
"""Least seconds a program reporting GPU checks can take, by its source's suffix: an interpreter that
imports numpy and cupy and creates a CUDA context takes longer than 0.5 s (this project's H200
records: 2.98 s at least, and 0.40 s for a Python program that found no GPU at all); a C++ program's
CUDA context alone takes tens of milliseconds (its H200 records: 0.345 s at least)."""
CLOCK_EAST = timedelta(hours=14)
CLOCK_WEST = timedelta(hours=12)
"""The widest time zones east and west of UTC (UTC+14:00, UTC-12:00): nvidia-smi prints local time."""
CLOCK_SLACK = timedelta(minutes=10)
"""A host clock this far off is still plausible."""
NOT_PROOF = "a plausibility signal, not proof"

Runner = str | None
"""The key that signed a record; None for unsigned records."""


@dataclass(frozen=True)
class Signal:
    """One plausibility signal on one record."""

    kind: PlausibilitySignal
    subject: str
    """What it is about, as a ``PlausibilityNote`` names it: ``PATH=/tmp/x``, a transcript path, a run
    id, ``cpu_count=2``, a GPU uuid."""
    detail: str
    """One line: what was seen, against what."""

    def __str__(self) -> str:
        return f"{self.subject}: {self.detail} ({NOT_PROOF})"


def runner_of(item: Examined) -> Runner:
    """The key that vouches for the record: its signer when verified, else None."""
    return item.verification.keyid if item.trust == "verified" else None


def _runner_text(runner: Runner) -> str:
    return f"runner key {runner[:12]}" if runner else "the unsigned records"


def gpu_of(rec) -> GpuFacts | None:
    """The GPU a record names (run and bench records: their environment's; claims records: their own)."""
    if isinstance(rec, (RunRecord, BenchRecord)):
        return rec.environment.gpu
    return rec.gpu if isinstance(rec, ClaimsRecord) else None


def smi_transcript(rec) -> Transcript | None:
    """The record's raw ``nvidia-smi`` transcript, whose first line is the host's clock."""
    if isinstance(rec, (RunRecord, BenchRecord)):
        return rec.environment.nvidia_smi
    return rec.nvidia_smi if isinstance(rec, ClaimsRecord) else None


def _environment(rec) -> Environment | None:
    return rec.environment if isinstance(rec, (RunRecord, BenchRecord)) else None


def _entries(rec) -> list[tuple[str, str]]:
    env = _environment(rec)
    if env is None:
        return []
    return [(var, entry) for var in SHIM_VARS if var in env.env for entry in env.env[var].split(":")]


def checkout_of(rec) -> str | None:
    """The absolute folder the run was made from, as its argv shows it: the path ending in the
    program (or the C++ binary) it ran, less that relative path; None when no argument shows it."""
    if not isinstance(rec, (RunRecord, BenchRecord)):
        return None
    relative = [rec.program] + ([rec.binary.path] if isinstance(rec, RunRecord) and rec.binary else [])
    for arg in rec.step.argv:
        for rel in relative:
            if arg.startswith("/") and arg.endswith("/" + rel):
                return posixpath.normpath(arg[:-len(rel) - 1]) or "/"
    return None


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


Release = tuple[str, str, str]
"""(folder, sha256, cuda-tile version) of a run record's ``release_folder``: the digest-named folder it says its
cuda-tile release was imported from, and that release."""


def own_release(release: Release | None, wheels: frozenset[tuple[str, str]]) -> tuple[str, bool] | None:
    """(the folder, whether it is the release axis's own) of a record's :data:`Release`: its own when the folder's
    name is the digest of a wheel of that cuda-tile version the lock pins with its hash (``wheels``:
    ``records.lock.wheel_hashes``). None when the record names no such folder."""
    if release is None:
        return None
    folder, sha, version = release
    return folder, posixpath.basename(folder) == sha and (version, sha) in wheels


@functools.lru_cache(maxsize=1024)
def _shims(entries: tuple[tuple[str, str], ...], checkout: str | None, baseline: frozenset[tuple[str, str]],
           first: str, release: tuple[str, bool] | None = None) -> tuple[Signal, ...]:
    """The shim-path signals of one environment's entries (kept: a session's records share one). ``release``: the
    record's digest-named release folder (:func:`own_release`); under a scratch folder it is no signal when it is
    the release axis's own, and its signal says why it is not when it is not."""
    out = []
    for var, entry in entries:
        norm = posixpath.normpath(entry) if entry.startswith("/") else entry
        scratch = next((s for s in SCRATCH if _under(norm, s)), None)
        ours = release is not None and var == "PYTHONPATH" and entry.startswith("/") and norm == release[0]
        if ours and release is not None and release[1] and scratch is not None and not (
                checkout is not None and _under(norm, checkout)):
            continue  # the release axis's own folder: a wheel the lock pins, unpacked by its digest
        if not entry.startswith("/"):
            why = (f"{var} entry {entry!r} is relative: the working directory answers there, so a file in the "
                   f"checkout named nvidia-smi (or a cupy folder) is the one found")
        elif checkout is not None and _under(norm, checkout):
            why = (f"{var} entry {entry} is inside the checkout the run was made from ({checkout}): a file committed "
                   f"or dropped there answers before the system's")
        elif scratch is not None and (var, entry) not in baseline:
            why = (f"{var} entry {entry} is under {scratch}, which anyone on the host may write, and the first "
                   f"record of its runner ({first}) had no such entry")
            if ours:
                why += ("; its name is the digest of no cuda-tile wheel the lock pins with a hash "
                        "(constraints.txt, locks/: nox -s lock)")
        else:
            continue
        out.append(Signal("shim-path", f"{var}={entry}", why))
    return tuple(out)


def smi_clock(rec: Seen, clock: datetime | None) -> list[Signal]:
    """``smi-clock``: ``clock`` (the header of the record's nvidia-smi transcript, local and naive) against
    the record's session start and ``created`` (UTC), any time zone allowed."""
    t = rec.smi
    if t is None or clock is None:
        return []
    created = rec.created.astimezone(timezone.utc).replace(tzinfo=None)
    started = rec.started
    start = created if started is None else min(started.replace(tzinfo=None), created)
    earliest, latest = start - CLOCK_WEST - CLOCK_SLACK, created + CLOCK_EAST + CLOCK_SLACK
    if earliest <= clock <= latest:
        return []
    late = clock > latest
    hours = abs(clock - (created if late else start)) / timedelta(hours=1)
    when = f"{hours:.1f} h {'after the record was written' if late else 'before its session started'}"
    return [Signal("smi-clock", t.path, f"nvidia-smi's own clock reads {clock:%Y-%m-%d %H:%M:%S}, {when} "
                                        f"(UTC {start:%Y-%m-%d %H:%M:%S} to {created:%H:%M:%S}): no time zone "
                                        f"is that far")]


@functools.lru_cache(maxsize=1024)
def _id_time(run_id: str) -> datetime | None:
    """``run_id_time``, kept: a session's records share its id."""
    return run_id_time(run_id)


def too_fast(rec) -> list[Signal]:
    """``launch-too-fast``: GPU work reported in less time than its launch takes (:data:`MIN_LAUNCH_S`)."""
    if isinstance(rec, RunRecord):
        ran = rec.report is not None and rec.report.gate == "ok" and bool(rec.report.checks)
    elif isinstance(rec, BenchRecord):
        ran = bool(rec.cases)
    else:
        return []
    floor = MIN_LAUNCH_S.get(posixpath.splitext(rec.program)[1])
    took = rec.step.duration_s
    if not ran or floor is None or took >= floor:
        return []
    return [Signal("launch-too-fast", rec.run_id, f"{rec.program} reports work done on a GPU in {took:.3f} s; "
                                                  f"starting such a program on a GPU takes at least {floor} s")]


def host_facts(rec: Seen, first: Seen, runner: Runner) -> list[Signal]:
    """``host-facts``: each of :data:`HOST_FACTS` that differs from the runner's first record's."""
    return [Signal("host-facts", f"{name}={value}",
                   f"{_runner_text(runner)} recorded {name} {was!r} in its first record "
                   f"{first.run_id}; this record says {value!r}")
            for (name, value), (_, was) in zip(rec.host, first.host, strict=True) if value != was]


@dataclass(frozen=True, slots=True)
class Seen:
    """What the signals and the agreement between records read of one record (:func:`seen`), and nothing else:
    an audit keeps one per record, where the records themselves would not fit in memory at fleet scale."""

    kind: str
    run_id: str
    created: datetime
    """The record's own (``judge.trust.standing.age`` orders by them as for the record)."""
    gpu_uuid: str | None
    """The uuid of the GPU it names (:func:`gpu_of`), None: none."""
    smi: TranscriptRef | None
    """:func:`smi_transcript`."""
    started: datetime | None
    """When its session began (a run or bench record's session id, else its run id), None when the id says not."""
    entries: tuple[tuple[str, str], ...]
    """Its ``PATH`` and ``PYTHONPATH`` entries (:data:`SHIM_VARS`)."""
    checkout: str | None
    """:func:`checkout_of`."""
    fast: tuple[Signal, ...]
    """Its ``launch-too-fast`` signal (:func:`too_fast`), which needs no other record."""
    host: tuple[tuple[str, object], ...]
    """(name, value) of each of :data:`HOST_FACTS`."""
    agreement: tuple | None
    """:func:`agreement`."""
    release: Release | None = None
    """Its ``release_folder`` (:data:`Release`), None: none."""

    def to_rows(self) -> tuple[list, list]:
        """Its values as JSON values, in two rows (datetimes in ISO form, a signal as its three values): what the
        records of one session share (its kind, GPU, nvidia-smi transcript, start, entries, checkout and host), and
        its own (run id, date, ``fast``, ``agreement``). What the audit's verified entries keep
        (``gather.audit_read``), and :meth:`from_rows` reads back."""
        return ([self.kind, self.gpu_uuid, self.smi, self.started.isoformat() if self.started is not None else None,
                 self.entries, self.checkout, self.host, self.release],
                [self.run_id, self.created.isoformat(), [(s.kind, s.subject, s.detail) for s in self.fast],
                 self.agreement])

    @classmethod
    def shared_of_row(cls, row: list) -> Seen:
        """The first row :meth:`to_rows` wrote, as a :class:`Seen` whose own values are placeholders: what
        :meth:`from_rows` completes (one for all the records of a session)."""
        kind, gpu_uuid, smi, started, entries, checkout, host, release = row
        return cls(kind, "", _EPOCH, gpu_uuid, share(TranscriptRef(*smi)) if smi is not None else None,
                   datetime.fromisoformat(started) if started is not None else None,
                   share(tuple(map(tuple, entries))), share(checkout), (), share(tuple(map(tuple, host))), None,
                   share(tuple(release)) if release is not None else None)

    def from_rows(self, own: list) -> Seen:
        """``self`` (:meth:`shared_of_row`) with the second row :meth:`to_rows` wrote: equal to the value both were
        made from; TypeError, ValueError or IndexError when ``own`` is not such."""
        run_id, created, fast, agreement = own
        return Seen(self.kind, run_id, datetime.fromisoformat(created), self.gpu_uuid, self.smi, self.started,
                    self.entries, self.checkout, tuple(Signal(k, subject, detail) for k, subject, detail in fast),
                    self.host, share(tuple(agreement)) if agreement is not None else None, self.release)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def seen(rec) -> Seen:
    """What the signals read of ``rec`` (any kind; a :class:`Seen` is returned as it is)."""
    if isinstance(rec, Seen):
        return rec
    env, gpu, smi = _environment(rec), gpu_of(rec), smi_transcript(rec)
    return Seen(rec.kind, rec.run_id, rec.created, gpu.uuid if gpu is not None else None,
                share(smi.ref()) if smi is not None else None,
                _id_time(env.session_id if env is not None else rec.run_id),
                share(tuple(_entries(rec))), share(checkout_of(rec)), tuple(too_fast(rec)),
                share(tuple((name, getattr(rec.host, name)) for name in HOST_FACTS)), share(agreement(rec)),
                share(_release(rec)))


def _release(rec) -> Release | None:
    folder = rec.release_folder if isinstance(rec, RunRecord) else None
    if folder is None or rec.cuda_tile is None:
        return None
    return posixpath.normpath(folder.path), folder.sha256, rec.cuda_tile.version


@needs(Need.FIRST_OF_RUNNER_AND_GPU)
def signals(items: Iterable[Examined], clocks: Mapping[str, datetime | None],
            wheels: frozenset[tuple[str, str]] = frozenset()) -> dict[str, tuple[Signal, ...]]:
    """Run id → its signals, for every record that counts and names a GPU (only those with one); ``items``: the
    records, or what they are :func:`seen` as.
    ``clocks``: transcript path → the header time of each nvidia-smi transcript whose digest matched
    its record (``parsers.smi_clock``); a path missing or None is not compared. ``wheels``: (version, sha256) of
    the cuda-tile wheels the lock pins with hashes (``records.lock.wheel_hashes``; :func:`own_release`)."""
    chosen = sorted(((i, seen(i.record)) for i in items if trust.admits(i)), key=lambda pair: standing.age(pair[0]))
    first: dict[Runner, Seen] = {}
    baselines: dict[Runner, frozenset[tuple[str, str]]] = {}
    boards: dict[str, tuple[Runner, str]] = {}
    out: dict[str, tuple[Signal, ...]] = {}
    for item, rec in chosen:
        if rec.gpu_uuid is None:
            continue
        runner = runner_of(item)
        base = first.setdefault(runner, rec)
        if runner not in baselines:
            baselines[runner] = frozenset(base.entries)
        t = rec.smi
        found = [*_shims(rec.entries, rec.checkout, baselines[runner], base.run_id, own_release(rec.release, wheels)),
                 *smi_clock(rec, clocks.get(t.path) if t else None), *rec.fast, *host_facts(rec, base, runner)]
        uuid = rec.gpu_uuid
        owner, seen_in = boards.setdefault(uuid, (runner, rec.run_id))
        if owner != runner:
            found.append(Signal("gpu-two-hosts", uuid, f"{_runner_text(owner)} recorded this GPU first (run "
                                                       f"{seen_in}); this record is from {_runner_text(runner)}"))
        if found:
            out[rec.run_id] = tuple(found)
    return out


# --- settling ----------------------------------------------------------------------------


def explained(signal: Signal, notes: Iterable[PlausibilityNote]) -> bool:
    """Whether a front-matter note names this signal and its subject."""
    return any(n.signal == signal.kind and n.subject == signal.subject for n in notes)


def program_digest(rec) -> str | None:
    """The sha256 a run or bench record's sources give its program; None when they do not name it."""
    return next((s.sha256 for s in rec.sources if s.path == rec.program), None)


AGREED_FAILURE = "failed"
"""What marks a failure's agreement (:func:`agreement_class`), so that it never equals a pass's."""


def agreement_class(kind: str, program: str | None, digest: str | None, cc: str | None, verdict: str | None,
                    release: str | None) -> tuple | None:
    """The part of :func:`agreement` a record's ``judge.preselect.Facts`` already tell (``release``: its cuda-tile
    version): a pass (run or bench) as (kind, program, its sha256, compute capability); a failed run record of a
    cuda-tile release as the same followed by ``failed`` and the release; None for anything else."""
    if verdict == "passed":
        return kind, program, digest, cc
    if kind == "run" and verdict == "failed" and release is not None:
        return kind, program, digest, cc, AGREED_FAILURE, release
    return None


def agreement(rec) -> tuple | None:
    """What two records must share to agree (:func:`agrees`); None for a record no other can agree with. ``rec``: a
    record, or what it is :func:`seen` as.

    - a passed run or bench record on a GPU: (kind, program, its program's sha256, the GPU's compute capability);
    - a failed run record on a GPU whose program an exception ended (``failure``), under a named cuda-tile release:
      the same, then ``failed``, the cuda-tile version, the exception's class and the tileiras it ran with. That
      the same source fails the same way under the same release and compiler on a second runner key's GPU is what
      settles a failure: a failed check (no ``failure``), or a failure of another class, release or tileiras,
      agrees with nothing."""
    if isinstance(rec, Seen):
        return rec.agreement
    gpu = gpu_of(rec)
    if not isinstance(rec, (RunRecord, BenchRecord)) or gpu is None:
        return None
    tile = rec.cuda_tile if isinstance(rec, RunRecord) else None
    base = agreement_class(rec.kind, rec.program, program_digest(rec), gpu.compute_capability, rec.verdict,
                           tile.version if tile is not None else None)
    if base is None or rec.verdict == "passed":
        return base
    failure = rec.failure if isinstance(rec, RunRecord) else None
    if failure is None or tile is None:
        return None
    return (*base, failure.type, tile.tileiras)


def agrees(item: Examined, other: Examined, flagged: Mapping[str, object]) -> bool:
    """Whether ``other`` is a second runner key's record agreeing with ``item``'s: it counts, is signed
    by another key, has no signal itself (``flagged``: run ids with one), and ran the same program, from
    the same source, on a GPU of the same compute capability, to a pass, or to the same failure under the same
    cuda-tile release and tileiras (:func:`agreement`)."""
    mine = agreement(item.record)
    if mine is None:
        return False
    theirs = runner_of(other)
    return (theirs is not None and theirs != runner_of(item) and other.record.run_id not in flagged
            and trust.admits(other) and agreement(other.record) == mine)


@needs(Need.AGREEING)
def corroborated(item: Examined, items: Iterable[Examined], flagged: Mapping[str, object]) -> bool:
    """Whether any record of ``items`` :func:`agrees` with ``item``."""
    return any(agrees(item, other, flagged) for other in items)


def unsettled(item: Examined, items: Iterable[Examined], flagged: Mapping[str, tuple[Signal, ...]],
              notes: Iterable[PlausibilityNote]) -> list[Signal]:
    """``item``'s signals that no note explains, unless a second runner key's record agrees with it."""
    mine = flagged.get(item.record.run_id, ())
    if not mine or corroborated(item, items, flagged):
        return []
    notes = list(notes)
    return [s for s in mine if not explained(s, notes)]


@dataclass(frozen=True)
class Doubt:
    """An unsettled signal on a record a lesson's decision rests on."""

    run_id: str
    signal: Signal


def doubts(records: Iterable[Examined], evidence: Iterable[str], flagged: Mapping[str, tuple[Signal, ...]],
           notes: Iterable[PlausibilityNote]) -> tuple[Doubt, ...]:
    """The unsettled signals of the records ``evidence`` names (run ids a decision accepted), judged
    among ``records`` with the lesson's own ``notes``."""
    items = list(records)
    by_id = {i.record.run_id: i for i in items}
    notes = list(notes)
    return tuple(Doubt(run_id, s) for run_id in dict.fromkeys(evidence) if run_id in by_id
                 for s in unsettled(by_id[run_id], items, flagged, notes))
