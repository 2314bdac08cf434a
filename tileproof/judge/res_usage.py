"""Compile-derived tables: a lesson's REG/SHARED table from the compile records, as a pure function.

A lesson whose front matter declares ``res_usage`` gets its body table filled from the ``cuobjdump -res-usage``
numbers compile records hold, the way its results table is filled from run records: per CUDA release, the newest
compile record that counts (``trust.split``), still attests today's inputs of the program (``records.depends``)
and lists every kernel of the table is one column (a release whose newest record fails is in ``skipped``); a
published lesson's table is decided from the compile records it cites (``cited``). With no column the table is
a blocker. ``rendered`` is the table publish writes and the audit re-derives; nothing here reads a file. The
rules: docs/records-and-staleness.md, "Compile-derived tables".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from tileproof.judge import today as today_mod
from tileproof.judge import trust
from tileproof.judge.claim_verdicts import Release, release_of
from tileproof.judge.selection import Need, needs
from tileproof.lesson_text import render_res_usage
from tileproof.records import depends
from tileproof.records.depends import Bounds
from tileproof.records.lessons import res_usage_from, res_usage_source
from tileproof.records.models import (
    BuildResult,
    CompileRecord,
    LessonFront,
    ResUsageTable,
)

COMMAND = "nox -s compile"
"""What writes a compile record (no GPU needed)."""


@dataclass(frozen=True)
class Column:
    """One release's REG/SHARED numbers and the compile record they are from."""

    release: Release
    run_id: str
    nvcc: str | None
    usage: dict[str, tuple[int, int]]
    """Kernel → (registers, shared bytes)."""

    def source(self, table: ResUsageTable) -> str:
        return res_usage_source(self.run_id, self.nvcc or str(self.release), table.target, table.artifact)


@dataclass(frozen=True)
class ResUsageDecision:
    """The lesson's REG/SHARED table as the compile records fill it today."""

    table: ResUsageTable
    columns: tuple[Column, ...]
    skipped: tuple[str, ...]
    """Per release without a column: why its newest compile record was not used."""
    ignored: tuple[str, ...] = ()
    """Run ids of compile records that never count (``trust.refusal``)."""
    cited: bool = False
    """Decided from the compile records a published lesson names (every one must give its column)."""

    @property
    def filled(self) -> bool:
        return bool(self.columns)

    @property
    def holds(self) -> bool:
        """Whether the table stands: some column filled and, for a published lesson's cited records,
        none of them failed."""
        return self.filled and not (self.cited and self.skipped)

    def command(self, lesson_id: str) -> str:
        """What would make the table stand again: a compile (no GPU needed); for a published lesson's cited
        records, its inputs restored or the table re-derived and signed (docs/records-and-staleness.md)."""
        if not self.cited:
            return COMMAND
        return (f"restore what changed (git diff), or have a key that may sign compile records run {COMMAND}, "
                f"then nox -s publish -- {lesson_id} --republish")

    @property
    def subject(self) -> str:
        return f"res-usage table ({self.table.program} {self.table.target})"

    @property
    def reason(self) -> str:
        """Why the table cannot be filled (never empty), or where it was filled from."""
        if self.columns and self.holds:
            return "filled from " + ", ".join(f"{c.run_id} ({c.release})" for c in self.columns)
        if self.columns:
            return "; ".join(self.skipped)
        if self.skipped:
            return "; ".join(self.skipped)
        return f"no compile record holds a {self.table.artifact} build of {self.table.program} for {self.table.target}"

    def rendered(self) -> str:
        """The body table: one REG/SHARED pair per release (unlabelled when there is one)."""
        kernels = [(k.name, k.reduction, k.mechanism) for k in self.table.kernels]
        label = len(self.columns) > 1
        return render_res_usage(kernels, [(str(c.release) if label else None, c.usage, c.source(self.table))
                                          for c in self.columns])


def attests_today(rec: CompileRecord, program: str, today: Mapping[str, str | None],
                  table: Bounds | None = None) -> str | None:
    """Why ``rec`` no longer attests today's inputs of ``program``'s builds (``records.depends``), or None.
    ``table``: today's tolerance table (None: a record that attests entries is judged on its files only,
    and one that attests the table as a file keeps it whole)."""
    dep = depends.of_compile(rec, program, today_mod.uses(today, program))
    if isinstance(dep, str):
        return dep
    if table is None:
        dep = replace(dep, entries=None, mentions=None)
    return depends.changed(dep, today, table or {}, today_mod.tables_at(today))


def _build(rec: CompileRecord, table: ResUsageTable) -> BuildResult | None:
    return next((b for b in rec.builds if b.program == table.program and b.target == table.target
                 and b.artifact_kind == table.artifact and b.verdict == "built"), None)


def _column(rec: CompileRecord, release: Release, table: ResUsageTable,
            today: Mapping[str, str | None], bounds: Bounds | None) -> Column | str:
    """The record's column, or why it gives none."""
    problem = attests_today(rec, table.program, today, bounds)
    if problem:
        return problem
    build = _build(rec, table)
    if build is None:
        return f"compile record {rec.run_id} has no built {table.artifact} of {table.program} for {table.target}"
    usage = res_usage_from(build.res_usage, [k.name for k in table.kernels])
    lacking = [k.name for k in table.kernels if k.name not in usage]
    if lacking:
        return f"compile record {rec.run_id}: no res-usage entry for {', '.join(lacking)} in its {table.target} build"
    nvcc = next((t.version for t in rec.toolchain.tools if t.name == "nvcc"), None)
    return Column(release, rec.run_id, nvcc, usage)


@needs(Need.OTHER_KINDS)
def decide_res_usage(front: LessonFront, records: Iterable, today: Mapping[str, str | None],
                     bounds: Bounds | None = None, cited: Sequence[str] | None = None) -> ResUsageDecision | None:
    """The lesson's REG/SHARED table from the compile records among ``records`` (None when the
    lesson declares none); ``today``: path → sha256 of the files the records attest (a ``Today`` also
    says what the program uses and which table versions older records attest); ``bounds``: today's
    tolerance table. ``cited``: the compile records a published lesson's table names, which then decide
    (each must still count and hold); None: the newest record of each release."""
    table = front.res_usage
    if table is None:
        return None
    counted, refused = trust.split(r for r in trust.examined(records) if isinstance(r.record, CompileRecord))
    if cited is not None:
        return _cited(table, counted, refused, today, bounds, cited)
    groups: dict[Release, list[CompileRecord]] = {}
    for rec in counted:
        release = release_of(rec.toolchain)
        if release is not None:
            groups.setdefault(release, []).append(rec)
    columns, skipped = [], []
    for release in sorted(groups):
        with_build = [r for r in groups[release] if _build(r, table) is not None]
        if not with_build:
            skipped.append(f"{release}: no compile record has a built {table.artifact} of {table.program} "
                           f"for {table.target}")
            continue
        got = _column(with_build[-1], release, table, today, bounds)  # trust.split orders oldest first: the newest
        if isinstance(got, Column):
            columns.append(got)
        else:
            skipped.append(f"{release}: {got}")
    return ResUsageDecision(table, tuple(columns), tuple(skipped), trust.ignored_ids(refused))


def _cited(table: ResUsageTable, counted: list[CompileRecord], refused: dict[str, list[str]],
           today: Mapping[str, str | None], bounds: Bounds | None, cited: Sequence[str]) -> ResUsageDecision:
    """The table from exactly the compile records a published lesson names (one column each)."""
    by_id = {r.run_id: r for r in counted}
    columns: list[Column] = []
    skipped = [] if cited else ["the lesson's table names no compile record"]
    for run_id in cited:
        rec = by_id.get(run_id)
        release = release_of(rec.toolchain) if rec is not None else None
        if rec is None or release is None:
            why = f"is not among the compile records that count{trust.ignored_note(refused)}" if rec is None \
                else "mixes CUDA releases"
            skipped.append(f"the cited compile record {run_id} {why}")
            continue
        got = _column(rec, release, table, today, bounds)
        if isinstance(got, Column):
            columns.append(got)
        else:
            skipped.append(f"{release}: {got}")
    columns.sort(key=lambda c: c.release)
    return ResUsageDecision(table, tuple(columns), tuple(skipped), trust.ignored_ids(refused), cited=True)
