"""Which records the lessons' verdicts can depend on, chosen from each record's facts: the full records of only
those need be read.

``status`` and ``publish`` judge lessons from a tree that may hold a fleet's records, of which a verdict looks at
a handful: the newest record of each row's class, a published lesson's cited records and what is newer than them.
:func:`facts_of` keeps what choosing needs of one record (a :class:`Facts`, small, kept in the verified-file
index beside the record's seal and signature outcome); :func:`needed` takes every record as an ``Examined`` of
its facts, with its standing already judged (so ``trust.refusal`` and ``standing.age`` answer exactly as for the
full record), and returns the run ids whose full records the decisions must see. Judged over those, every
decision is the one judged over all records; the reason, per rule that picks records:

- ``gate.decide_row`` takes the newest counted record of the row's program in one class: hardware below 8.0 or
  not (``RowClass.admits``), a GPU or none (a run without one decides only when nothing ran on a GPU), the
  cuda-tile release (``releases.decides_rows``, for the lock or, on the release axis, for each release): the
  newest of each (program, below 8.0, GPU, release) group is kept, and any newest the rule picks is the newest of
  one such group; past a newest whose verdict is ``unverified`` (a check tileproof could not recompute decides
  nothing, ``RunRecord.unverified``), every older one of its group down to the first that is not. A record
  that does not count is named in the row's reason: all of them are kept.
- a published lesson's cited records, and every counted record of its programs newer than the oldest of them
  (``gate.newer_failure`` looks at each newer one until one fails).
- bench, claims and compile records are all kept (performance claims, claims verdicts and the REG/SHARED table
  read them all; a fleet's records are almost all run records).
- plausibility signals (``plausibility.signals``) compare a record with its runner key's first counted GPU record
  and a GPU's first record: the first of each runner and of each GPU uuid are kept, so every kept record's
  signals are the ones computed over all. A signal is settled by an agreeing record of another key
  (``plausibility.agrees``): :func:`agreeing` names the candidates for the records found flagged, and the caller
  adds them (then the answer "is one of them agreeing and unflagged" is the same over the kept records as over
  all: each candidate's own signals are exact too).

Each rule above declares what it reads at the rule (``judge.selection.needs``), and :data:`CHOOSERS` holds its twin
here, one chooser per need; :func:`needed` is their union.

Adding a record that is not needed never changes a decision: every rule above takes a newest, or looks at all
newer records, and keeps none it did not pick. ``tests/conftest.py`` (``chosen_records_judge_alike``) compares
the verdicts over the selection with those over every record for every tree the suite loads;
``tests/test_preselect.py`` checks each rule, and every line ``status`` prints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from tileproof.judge import plausibility, trust
from tileproof.judge.releases import ReleaseKey, release_of
from tileproof.judge.selection import Need
from tileproof.judge.trust import standing
from tileproof.records.capability import below_tile
from tileproof.records.models import BenchRecord, ClaimsRecord, CompileRecord, LessonFront, RunRecord, share
from tileproof.records.store import Examined

EVIDENCE_KINDS = {"run": RunRecord, "bench": BenchRecord, "claims": ClaimsRecord, "compile": CompileRecord}
"""The record kinds a lesson's decision reads (``gather.tree.Tree`` keeps only these), by ``kind``."""


@dataclass(frozen=True, slots=True)
class Facts:
    """What choosing needs of one record (see the module docstring); ``kind``, ``created`` and ``run_id`` are the
    record's own, so ``judge.trust.standing`` judges a record's standing and age from its facts as from the record."""

    kind: str
    run_id: str
    created: datetime
    program: str | None = None
    """A run or bench record's program."""
    gpu_uuid: str | None = None
    """The GPU the record names (``plausibility.gpu_of``); None: none."""
    gpu_cc: str | None = None
    release: ReleaseKey | None = None
    """A run record's cuda-tile release (``releases.release_of``)."""
    verdict: str | None = None
    program_digest: str | None = None
    """The sha256 its sources give its program (what ``plausibility.agrees`` compares)."""

    def to_row(self) -> list:
        """The facts as JSON values, one per field in the fields' order (``release`` as its two values): what the
        verified-file index keeps, and :meth:`from_row` reads back."""
        return [self.kind, self.run_id, self.created.isoformat(), self.program, self.gpu_uuid, self.gpu_cc,
                list(self.release) if self.release is not None else None, self.verdict, self.program_digest]

    def of_record(self, run_id: str, created: datetime) -> Facts:
        """These facts for another record of the same kind, program, GPU, release, verdict and program digest (what
        many records share: the index keeps it once)."""
        return Facts(self.kind, run_id, created, self.program, self.gpu_uuid, self.gpu_cc, self.release, self.verdict,
                     self.program_digest)

    @classmethod
    def from_row(cls, row: Sequence) -> Facts:
        """The facts :meth:`to_row` wrote; TypeError, ValueError or IndexError when ``row`` is not such."""
        if not isinstance(row, (list, tuple)):
            raise TypeError(f"facts are a list, not {type(row).__name__}")
        kind, run_id, created, program, gpu_uuid, gpu_cc, release, verdict, program_digest = row
        return cls(str(kind), str(run_id), datetime.fromisoformat(created), program, gpu_uuid, gpu_cc,
                   ReleaseKey(str(release[0]), bool(release[1])) if release is not None else None, verdict,
                   program_digest)


def facts_of(record) -> Facts:
    """The facts of one record (any kind)."""
    gpu = plausibility.gpu_of(record)
    is_run = isinstance(record, RunRecord)
    program = record.program if isinstance(record, (RunRecord, BenchRecord)) else None
    return Facts(kind=share(record.kind), run_id=record.run_id, created=record.created, program=share(program),
                 gpu_uuid=share(gpu.uuid) if gpu is not None else None,
                 gpu_cc=share(gpu.compute_capability) if gpu else None,
                 release=share(release_of(record)) if is_run else None,
                 verdict=share(getattr(record, "verdict", None)) if is_run or isinstance(record, BenchRecord) else None,
                 program_digest=share(plausibility.program_digest(record)) if program is not None else None)


Chooser = Callable[[Sequence[Examined[Facts]], Sequence[LessonFront]], set[str]]
"""Chooses, from every record's facts and every lesson's front matter, the run ids one need covers."""


def needed(items: Sequence[Examined[Facts]], fronts: Iterable[LessonFront]) -> set[str]:
    """The run ids whose full records the decisions on ``fronts`` (every lesson of the tree) can depend on, among
    ``items`` (every record, as its facts, with its standing judged): the union of what each need's chooser
    (:data:`CHOOSERS`) keeps (see the module docstring)."""
    fronts = list(fronts)
    keep: set[str] = set()
    for choose in CHOOSERS.values():
        keep |= choose(items, fronts)
    return keep


def _other_kinds(items: Sequence[Examined[Facts]], fronts: Sequence[LessonFront]) -> set[str]:
    """``Need.OTHER_KINDS``: every bench, claims and compile record."""
    return {e.record.run_id for e in items if e.record.kind in EVIDENCE_KINDS and e.record.kind != "run"}


def _cited(items: Sequence[Examined[Facts]], fronts: Sequence[LessonFront]) -> set[str]:
    """``Need.CITED``: each lesson's cited records (its results' and its verified releases')."""
    return {run_id for front in fronts for run_id in _cited_by(front)}


def _cited_by(front: LessonFront) -> set[str]:
    return {row.run_id for row in front.results if row.run_id} | {
        run_id for v in front.cuda_tile_verified for run_id in v.run_ids}


def _rows_runs(items: Sequence[Examined[Facts]], fronts: Sequence[LessonFront]
               ) -> Iterator[tuple[LessonFront, list[Examined[Facts]]]]:
    """(lesson, the run records of one program its rows name), for each program of each lesson."""
    by_program: dict[str, list[Examined[Facts]]] = {}
    for e in items:
        if e.record.kind == "run":
            by_program.setdefault(e.record.program or "", []).append(e)
    for front in fronts:
        for program in {row.program for row in front.results}:
            yield front, by_program.get(program, [])


def _uncounted(items: Sequence[Examined[Facts]], fronts: Sequence[LessonFront]) -> set[str]:
    """``Need.UNCOUNTED``: every run record of a row's program that does not count (named in the row's reason)."""
    return {e.record.run_id for _front, mine in _rows_runs(items, fronts) for e in mine if not trust.admits(e)}


def _newest_of_class(items: Sequence[Examined[Facts]], fronts: Sequence[LessonFront]) -> set[str]:
    """``Need.NEWEST_OF_CLASS``: the newest counted record of each (program, below 8.0, GPU, release) group, and
    past it while the newer ones are unverified."""
    keep: set[str] = set()
    for _front, mine in _rows_runs(items, fronts):
        groups: dict[tuple, list[Examined[Facts]]] = {}
        for e in mine:
            if trust.admits(e):
                f = e.record
                gpu = f.gpu_cc is not None  # GpuFacts always names both uuid and compute capability
                groups.setdefault((below_tile(f.gpu_cc) if gpu else False, gpu, f.release), []).append(e)
        for members in groups.values():
            for e in sorted(members, key=standing.age, reverse=True):
                keep.add(e.record.run_id)
                if e.record.verdict != "unverified":
                    break
    return keep


def _newer_than_cited(items: Sequence[Examined[Facts]], fronts: Sequence[LessonFront]) -> set[str]:
    """``Need.NEWER_THAN_CITED``: every counted record of a lesson's programs newer than the oldest it cites."""
    keep: set[str] = set()
    for front, mine in _rows_runs(items, fronts):
        cited = _cited_by(front)
        ages = [standing.age(e) for e in mine if trust.admits(e) and e.record.run_id in cited]
        if ages:
            oldest = min(ages)
            keep |= {e.record.run_id for e in mine if trust.admits(e) and standing.age(e) > oldest}
    return keep


def _baselines(items: Sequence[Examined[Facts]], fronts: Sequence[LessonFront]) -> set[str]:
    """``Need.FIRST_OF_RUNNER_AND_GPU``: :func:`baselines`."""
    return baselines(items)


def baselines(items: Iterable[Examined[Facts]]) -> set[str]:
    """The run ids of each runner key's first counted GPU record and of each GPU uuid's first (oldest first by
    ``standing.age``, as ``plausibility.signals`` orders them)."""
    chosen = sorted((e for e in items if e.record.kind in EVIDENCE_KINDS and e.record.gpu_uuid is not None
                     and trust.admits(e)), key=standing.age)
    runners: dict[plausibility.Runner, str] = {}
    boards: dict[str, str] = {}
    for e in chosen:
        runners.setdefault(plausibility.runner_of(e), e.record.run_id)
        boards.setdefault(e.record.gpu_uuid or "", e.record.run_id)
    return set(runners.values()) | set(boards.values())


def agreeing(flagged: Iterable[Examined], items: Iterable[Examined[Facts]]) -> set[str]:
    """The run ids of every record among ``items`` (facts) that could settle a signal of a ``flagged`` record (a
    full one) by agreeing with it (``plausibility.agrees``, less the "has no signal itself" part, which is judged
    on the full record): counted, of the same kind, passed, signed by another runner key, the same program from
    the same source, on a GPU of the same compute capability, to a pass or (a run record) to a failure under the
    same cuda-tile release (``plausibility.agreement_class``; the exception's class and the tileiras are compared
    on the full records)."""
    wanted: dict[tuple, set[plausibility.Runner]] = {}
    for item in flagged:
        rec = item.record
        gpu = plausibility.gpu_of(rec)
        if plausibility.agreement(rec) is None or gpu is None:
            continue
        tile = rec.cuda_tile if isinstance(rec, RunRecord) else None
        key = plausibility.agreement_class(rec.kind, rec.program, plausibility.program_digest(rec),
                                           gpu.compute_capability, rec.verdict, tile.version if tile else None)
        if key is not None:
            wanted.setdefault(key, set()).add(plausibility.runner_of(item))
    out: set[str] = set()
    for e in items:
        f = e.record
        key = plausibility.agreement_class(f.kind, f.program, f.program_digest, f.gpu_cc, f.verdict,
                                           f.release.cuda_tile if f.release is not None else None)
        mine = wanted.get(key) if key is not None else None
        theirs = plausibility.runner_of(e)
        if mine and theirs is not None and (mine - {theirs}) and trust.admits(e):
            out.add(f.run_id)
    return out


def flagged_unsettled(kept: Sequence[Examined], signals: Mapping[str, object]) -> list[Examined]:
    """The kept records with a signal that no kept record settles by agreeing (``plausibility.corroborated``)."""
    return [e for e in kept if e.record.run_id in signals and not plausibility.corroborated(e, kept, signals)]


CHOOSERS: dict[Need, Chooser] = {
    Need.OTHER_KINDS: _other_kinds,
    Need.CITED: _cited,
    Need.UNCOUNTED: _uncounted,
    Need.NEWEST_OF_CLASS: _newest_of_class,
    Need.NEWER_THAN_CITED: _newer_than_cited,
    Need.FIRST_OF_RUNNER_AND_GPU: _baselines,
}
"""Each need a rule declares (``judge.selection``) and the one chooser that keeps its records, of which
:func:`needed` is the union; ``Need.AGREEING`` is :func:`agreeing`'s, asked for the records found flagged."""
TWINS: dict[Need, Callable] = {**CHOOSERS, Need.AGREEING: agreeing}
"""Every need's twin here: what ``tests/test_preselect.py`` holds to the rules' declarations."""
