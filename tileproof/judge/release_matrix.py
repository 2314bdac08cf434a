"""The release axis: each Python program of a lesson x each cuda-tile release its records were made with.

A cell is what the publish decision's own row rule (``gate.decide_row``) says about the program's
required rows when that release's records are the only ones that decide (``releases.decides_rows``
with that release as the lock): ``passed`` when every row passes, ``failed`` with the exception the
program raised (``RunRecord.failure``, typed) or the failed check, ``stale`` when the record no
longer attests today's sources, ``not-run`` when no record of that release ran the program on a
GPU of compute capability 8.0 or newer. A release a lesson is ``verified`` on is one where every
Python program's cell passed; publish writes that list into the front matter
(``LessonFront.cuda_tile_verified``) and the audit re-derives it from here, the same way.

Columns are ``releases.ReleaseKey``s: a release run with a tileiras outside the range it declares is
its own column, marked ``*`` (``1.4.0*``). Only run records of ``kernels/*.py`` programs are on
the axis. Pure: records, today's digests and the tolerance table come in as arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from tileproof.judge import gate, trust
from tileproof.judge.releases import OUTSIDE_MARK, ReleaseKey, release_of, uses_cuda_tile
from tileproof.judge.selection import Need, needs
from tileproof.records.lessons import GATE_CHECK
from tileproof.records.models import LessonFront, ProgramFailure, RunRecord, VerifiedRelease

CellState = Literal["passed", "failed", "stale", "not-run"]
"""What one program did with one release."""

NOT_RUN_OUTCOMES: frozenset[str] = frozenset({"no-record", "gated", "missing-file", "toolchain-absent"})
"""Row outcomes that mean the program never ran its kernels with the release on a capable GPU."""


@dataclass(frozen=True)
class Cell:
    """One program on one release."""

    release: ReleaseKey
    state: CellState
    outcome: str
    """The gate's outcome for the first of the program's rows that did not pass (``passed`` when all did)."""
    reason: str
    record: RunRecord | None
    """The record that decided it (None: not run)."""

    @property
    def failure(self) -> ProgramFailure | None:
        """The exception the program raised with this release, as its record keeps it."""
        return self.record.failure if self.record is not None else None

    def text(self, width: int | None = None) -> str:
        """``passed``, ``failed: TypeError: ...`` (the failure's first line, else the gate's reason), ``stale``,
        ``not run``; cut to ``width`` characters when given."""
        if self.state == "failed":
            shown = f"failed: {self.failure}" if self.failure else f"failed: {self.reason}"
        else:
            shown = self.state.replace("-", " ")
        return shown if width is None or len(shown) <= width else shown[:width - 3] + "..."


@dataclass(frozen=True)
class ProgramRow:
    lesson: str
    program: str
    cells: dict[ReleaseKey, Cell]


@dataclass(frozen=True)
class LessonReleases:
    """One lesson's Python programs x releases."""

    lesson: str
    releases: tuple[ReleaseKey, ...]
    """Oldest first (``ReleaseKey.order``)."""
    rows: tuple[ProgramRow, ...]

    def verified(self) -> list[VerifiedRelease]:
        """Every release on which each Python program of the lesson passed, oldest first."""
        out = []
        for key in self.releases:
            cells = [row.cells[key] for row in self.rows]
            if cells and all(c.state == "passed" and c.record is not None for c in cells):
                recs = [c.record for c in cells if c.record is not None]
                out.append(VerifiedRelease(
                    cuda_tile=key.cuda_tile, tileiras=sorted({t for r in recs if (t := tileiras_of(r))}),
                    tileiras_in_range=key.in_range, run_ids=list(dict.fromkeys(r.run_id for r in recs))))
        return out

    def refused_before(self, key: ReleaseKey) -> Cell | None:
        """The newest release older than ``key`` on which a program failed: its first failed cell."""
        older = [k for k in self.releases if k.order() < key.order() and k.cuda_tile != key.cuda_tile]
        for k in reversed(older):
            failed = next((row.cells[k] for row in self.rows if row.cells[k].state == "failed"), None)
            if failed is not None:
                return failed
        return None

    def holds(self) -> str:
        """The lesson's range in words: the releases it was verified on, the oldest, and what the release
        before that refused, with the record."""
        verified = self.verified()
        if not verified:
            return f"{self.lesson}: verified on no cuda-tile release"
        keys = [ReleaseKey(v.cuda_tile, v.tileiras_in_range) for v in verified]
        text = f"{self.lesson}: verified on cuda-tile {', '.join(map(str, keys))}; the oldest is {keys[0]}"
        refused = self.refused_before(keys[0])
        if refused is None:
            return text + "; no older release refused it"
        rec = refused.record
        program = rec.program if rec is not None else "?"
        run = f" (run {rec.run_id})" if rec is not None else ""
        return text + f"; {refused.release} refused it: {program} {refused.text()}{run}"


def tileiras_of(rec: RunRecord) -> str | None:
    """The tileiras version a run used: its release facts, else its toolchain's tileiras (older records)."""
    if rec.cuda_tile is not None and rec.cuda_tile.tileiras:
        return rec.cuda_tile.tileiras
    return next((t.version for t in rec.environment.toolchain.tools if t.name == "tileiras" and t.version), None)


def python_programs(front: LessonFront) -> list[str]:
    """The lesson's programs that import cuda-tile, in front-matter order."""
    return [p.path for p in front.programs if p.path.endswith(".py")]


def releases_of(records: Iterable, programs: Sequence[str]) -> tuple[ReleaseKey, ...]:
    """Every release a counted run record of one of ``programs`` was made with, oldest first."""
    seen = {k for r in trust.split(trust.examined(records))[0] if isinstance(r, RunRecord) and uses_cuda_tile(r)
            and r.program in programs and (k := release_of(r)) is not None}
    return tuple(sorted(seen, key=ReleaseKey.order))


def on_release(today: Mapping[str, str | None], key: ReleaseKey) -> gate.Today:
    """``today`` with ``key`` as the release whose records decide (``releases.decides_rows``)."""
    if isinstance(today, gate.Today):
        return gate.Today(today, today.claims, today.tables_at, cuda_tile=key)
    return gate.Today(today, cuda_tile=key)


def cell(front: LessonFront, program: str, key: ReleaseKey, records: list, today: Mapping[str, str | None],
         table: Mapping[str, gate.Bound], read_evidence: gate.EvidenceReader) -> Cell:
    """``program`` on ``key``: the gate's decision of each of its required rows from that release's records."""
    day = on_release(today, key)
    rows = [r for r in front.results if r.program == program and not r.optional and r.check != GATE_CHECK]
    decisions = [gate.decide_row(front, row, records, day, table, read_evidence) for row in rows]
    first = next((d for d in decisions if d.outcome != "passed"), None)
    if first is None:
        rec = decisions[0].record if decisions else None
        return Cell(key, "passed" if rec is not None else "not-run", "passed", "every row passed", rec)
    rec = first.record
    not_run = first.outcome in NOT_RUN_OUTCOMES or (rec is not None and rec.verdict == "no-gpu")
    if not_run:
        return Cell(key, "not-run", first.outcome, first.reason, rec)
    if first.outcome == "stale" or (rec is not None and gate.staleness(rec, front, program, day, table,
                                                                       first.row.check)):
        return Cell(key, "stale", "stale", first.reason, rec)
    return Cell(key, "failed", first.outcome, first.reason, rec)


def lesson_releases(front: LessonFront, records: Iterable, today: Mapping[str, str | None],
                    table: Mapping[str, gate.Bound], read_evidence: gate.EvidenceReader) -> LessonReleases:
    """The lesson's Python programs x every release their records were made with."""
    records = trust.examined(records)
    programs = python_programs(front)
    keys = releases_of(records, programs)
    rows = tuple(ProgramRow(front.id, p, {k: cell(front, p, k, records, today, table, read_evidence) for k in keys})
                 for p in programs)
    return LessonReleases(front.id, keys, rows)


def verified(front: LessonFront, records: Iterable, today: Mapping[str, str | None],
             table: Mapping[str, gate.Bound], read_evidence: gate.EvidenceReader) -> tuple[VerifiedRelease, ...]:
    """What publish writes as ``cuda_tile_verified``, from the newest evidence of each release."""
    return tuple(lesson_releases(front, records, today, table, read_evidence).verified())


@needs(Need.CITED)
def cited_verified(front: LessonFront, records: Iterable, today: Mapping[str, str | None],
                   table: Mapping[str, gate.Bound], read_evidence: gate.EvidenceReader) -> tuple[VerifiedRelease, ...]:
    """What a published lesson's stated releases still give (the audit re-derives its list from this): each
    release it lists, from exactly the run records it cites for it; a release drops out when one of them no
    longer counts, holds or passes, or a newer counted record of the same release, row and hardware class
    failed (``gate.newer_failure``). Newer passing evidence changes nothing here: ``verified`` is what a
    republish writes. A lesson that lists none gives none."""
    records = trust.examined(records)
    stated = {run_id for v in front.cuda_tile_verified for run_id in v.run_ids}
    cited = [e for e in records if isinstance(e.record, RunRecord) and e.record.run_id in stated]
    counted = [r for r in trust.split(records)[0] if isinstance(r, RunRecord)]  # oldest first (standing.age)
    lr = lesson_releases(front, cited, today, table, read_evidence)
    out = []
    for v in lr.verified():
        key = ReleaseKey(v.cuda_tile, v.tileiras_in_range)
        same = [r for r in counted if release_of(r) == key]
        day = on_release(today, key)
        overturned = any(gate.newer_failure(cell.record, front, r, same, day, table, read_evidence)
                         for row in lr.rows if (cell := row.cells[key]).record is not None
                         for r in front.results if r.program == row.program and not r.optional)
        if not overturned:
            out.append(v)
    return tuple(out)


CELL_WIDTH = 48
"""How much of a failed cell's line the status table shows (the record keeps all of it)."""


def lines(lessons: Sequence[LessonReleases]) -> list[str]:
    """The status table: one row per lesson and Python program, one column per release (every lesson's
    releases together), then each lesson's range in words (``LessonReleases.holds``); [] when no lesson has a
    record on the axis."""
    keys = sorted({k for lr in lessons for k in lr.releases}, key=ReleaseKey.order)
    if not keys:
        return []
    rows = [["LESSON", "PROGRAM", *map(str, keys)]]
    for lr in lessons:
        for row in lr.rows:
            rows.append([lr.lesson, row.program,
                         *(row.cells[k].text(CELL_WIDTH) if k in row.cells else "not run" for k in keys)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if any(not k.in_range for k in keys):
        out.append(f"{OUTSIDE_MARK}: run with a tileiras outside the range that release declares "
                   "(--tileiras-outside-range)")
    return out + [lr.holds() for lr in lessons if lr.rows and lr.releases]
