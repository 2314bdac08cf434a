"""Compile-derived tables: a lesson's REG/SHARED table from the compile records, as a pure function.

A lesson whose front matter declares ``res_usage`` (program, target, artifact kind,
kernels) gets its body table filled from ``cuobjdump -res-usage`` numbers that a compile
record holds, the way its results table is filled from run records. Per CUDA release
(``claim_verdicts.release_of`` of the record's toolchain; a record of mixed releases is
evidence for none), the newest compile record that counts (``trust.admits``) and holds a
``built`` build of the program for the table's target and artifact kind decides, when it

- attests today's program and the files beside it that are not programs (its headers:
  ``cpp/tile_spike.cu``, ``cpp/harness.h``, ``cpp/tolerances.h``; path → sha256 in ``today``), and
- lists a res-usage entry for every kernel of the table (an older record never stands in).

Each release with such a record is one REG/SHARED column; a release whose newest record
fails one of these is named in ``skipped``. With no column at all the table is a blocker
(fix: ``nox -s compile``). ``rendered`` is the table publish writes and the audit
re-derives; nothing here reads a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from tileproof.judge import trust
from tileproof.judge.claim_verdicts import Release, release_of
from tileproof.records.lessons import PROGRAM_SUFFIXES, render_res_usage, res_usage_from
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
        flag = ", --tilefatbin" if table.artifact == "tilefatbin" else f", {table.artifact}"
        return (f"`cuobjdump -res-usage` in compile record `{self.run_id}` "
                f"(nvcc {self.nvcc or self.release}, {table.target}{flag})")


@dataclass(frozen=True)
class ResUsageDecision:
    """The lesson's REG/SHARED table as the compile records fill it today."""

    table: ResUsageTable
    columns: tuple[Column, ...]
    skipped: tuple[str, ...]
    """Per release without a column: why its newest compile record was not used."""
    ignored: tuple[str, ...] = ()
    """Run ids of compile records that never count (``trust.refusal``)."""

    @property
    def filled(self) -> bool:
        return bool(self.columns)

    @property
    def subject(self) -> str:
        return f"res-usage table ({self.table.program} {self.table.target})"

    @property
    def reason(self) -> str:
        """Why the table cannot be filled (never empty), or where it was filled from."""
        if self.columns:
            return "filled from " + ", ".join(f"{c.run_id} ({c.release})" for c in self.columns)
        if self.skipped:
            return "; ".join(self.skipped)
        return f"no compile record holds a {self.table.artifact} build of {self.table.program} for {self.table.target}"

    def rendered(self) -> str:
        """The body table: one REG/SHARED pair per release (unlabelled when there is one)."""
        kernels = [(k.name, k.reduction, k.mechanism) for k in self.table.kernels]
        label = len(self.columns) > 1
        return render_res_usage(kernels, [(str(c.release) if label else None, c.usage, c.source(self.table))
                                          for c in self.columns])


def attested_beside(rec: CompileRecord, program: str, today: Mapping[str, str | None]) -> str | None:
    """Why ``rec`` does not attest today's program and the non-program files beside it, or None."""
    folder = PurePosixPath(program).parent
    mine = {s.path: s.sha256 for s in rec.sources if PurePosixPath(s.path).parent == folder
            and (s.path == program or PurePosixPath(s.path).suffix not in PROGRAM_SUFFIXES)}
    if program not in mine:
        return f"compile record {rec.run_id} does not attest {program}"
    changed = sorted(p for p, sha in mine.items() if today.get(p) != sha)
    return f"{', '.join(changed)} changed since compile record {rec.run_id}" if changed else None


def _build(rec: CompileRecord, table: ResUsageTable) -> BuildResult | None:
    return next((b for b in rec.builds if b.program == table.program and b.target == table.target
                 and b.artifact_kind == table.artifact and b.verdict == "built"), None)


def _column(rec: CompileRecord, release: Release, table: ResUsageTable,
            today: Mapping[str, str | None]) -> Column | str:
    """The record's column, or why it gives none."""
    problem = attested_beside(rec, table.program, today)
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


def decide_res_usage(front: LessonFront, records: Iterable, today: Mapping[str, str | None]) -> ResUsageDecision | None:
    """The lesson's REG/SHARED table from the compile records among ``records`` (None when the
    lesson declares none); ``today``: path → sha256 of the files the records attest."""
    table = front.res_usage
    if table is None:
        return None
    counted, refused = trust.split(r for r in trust.examined(records) if isinstance(r.record, CompileRecord))
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
        got = _column(with_build[-1], release, table, today)  # trust.split orders oldest first: the newest
        if isinstance(got, Column):
            columns.append(got)
        else:
            skipped.append(f"{release}: {got}")
    return ResUsageDecision(table, tuple(columns), tuple(skipped), trust.ignored_ids(refused))
