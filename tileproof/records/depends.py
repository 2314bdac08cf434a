"""What a record depends on, and whether any of it changed: one rule for run and compile records.

A record depends on exactly what it used: the program, the helpers it imports or includes (whole
files: they are code) and the tolerance entries its program reads, one by one. The tolerance table
(``kernels/tolerances.py``) and the header generated from it (``cpp/tolerances.h``) are never a
dependency as whole files in records written now, so an entry added or changed for another check
stales nothing. :func:`of_run` and :func:`of_compile` say what one record attests for one program
(a :class:`Depends`), :func:`changed` says whether today's tree still holds it. ``judge.gate``
(run records), ``judge.res_usage`` (compile records) and ``runner.locate`` (the binary a run uses)
all ask here, so the three can never disagree about what "stale" means.

Records written before per-entry attestation (``run_version`` < 3, ``compile_version`` < 4) name
the table or its header among their sources as a whole file. Where that file changed since and git
history holds the version the record attests (``tables_at``: its sha256 → the table it held, read by
``gather.tree``), only the entries the record's program reads are compared; otherwise the file stays a
whole-file dependency and any change to the table stales the record (fail closed).

Pure: digests, tables and what the programs use come in as arguments; nothing here reads a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from tileproof.records.lessons import GATE_CHECK, PROGRAM_SUFFIXES
from tileproof.records.models import CompileRecord, RunRecord
from tileproof.records.tolerances import TABLE_FILE, TABLE_PATHS, entry_digest

Bounds = Mapping[str, tuple[float, float]]
"""A tolerance table: check name → (rtol, atol) (``judge.gate.Bound`` is such a pair)."""

@dataclass(frozen=True)
class ProgramUses:
    """What a program uses in today's tree (``toolchain.uses.program_uses``)."""

    files: tuple[str, ...]
    """The program, then every file it reaches through its imports or quoted includes (the
    tolerance table or its header among them when it reads them), as repository paths."""
    names: frozenset[str]
    """The tolerance-table check names its files (other than the table files) spell out: the
    entries its build can read. A superset is harmless (one more dependency); a program names
    each check it reads in full."""


@dataclass(frozen=True)
class Depends:
    """Everything one record attests for one program: a change to any of it makes the record stale."""

    files: Mapping[str, str]
    """Path → sha256 of each file the record attests whole (older records: the table file too)."""
    entries: Mapping[str, str] | None
    """Check name → ``tolerances.entry_digest`` of each entry the record attests (``run_version`` 3,
    ``compile_version`` 4); None for an older record, which attests the table as a file."""
    checks: frozenset[str]
    """Checks the record's verdict rests on: each must be attested (``entries``) or, for an older
    record, unchanged since the table version it attests."""
    mentions: frozenset[str] | None
    """For an older record, further entries that matter where the attested table version had them (a
    compile record's program names them); None when not known: the table file then stays whole."""
    since: str
    """``since run <id> (commit <sha>)`` / ``since compile record <id>``: how reasons end."""


def of_run(rec: RunRecord, check: str | None = None) -> Depends:
    """What a run record attests: every source but the lesson files (the program list is compared on its
    own), its tolerance entries, and the checks of its report and of the row (``check``)."""
    commit = (rec.git.commit[:7] if rec.git.commit else "unknown") + (" with uncommitted changes"
                                                                       if rec.git.dirty else "")
    checks = {c.name for c in rec.report.checks} if rec.report is not None else set()
    row = {check} if check is not None and check != GATE_CHECK else set()
    per_entry = not rec.attests_table_whole
    return Depends(files={s.path: s.sha256 for s in rec.sources if not s.path.startswith("lessons/")},
                   entries=dict(rec.tolerances) if per_entry else None,
                   checks=frozenset(row if per_entry else checks | row), mentions=frozenset(),
                   since=f"since run {rec.run_id} (commit {commit})")


def of_compile(rec: CompileRecord, program: str, uses: ProgramUses | None = None) -> Depends | str:
    """What a compile record attests for ``program``'s builds, or why it attests nothing for it.

    From ``compile_version`` 4 the record says it itself (``inputs``). An older record lists every
    source of every program it built; the program's own are those ``uses`` reaches today (the same
    files as when it was built while none of them changed, and a change to one is caught), or, where
    ``uses`` is not known, the program and every file beside it that is not a program."""
    attested = {s.path: s.sha256 for s in rec.sources}
    since = f"since compile record {rec.run_id}"
    if program not in attested:
        return f"compile record {rec.run_id} does not attest {program}"
    if not rec.attests_table_whole:
        own = rec.inputs.get(program)
        if own is None:
            return f"compile record {rec.run_id} does not say what {program} was built from"
        return Depends(files={p: attested[p] for p in own.uses}, entries=dict(own.tolerances),
                       checks=frozenset(), mentions=frozenset(), since=since)
    if uses is not None:
        mine = set(uses.files) | {program}
        return Depends(files={p: sha for p, sha in attested.items() if p in mine}, entries=None,
                       checks=frozenset(), mentions=uses.names, since=since)
    folder = PurePosixPath(program).parent
    beside = {p: sha for p, sha in attested.items() if PurePosixPath(p).parent == folder
              and (p == program or PurePosixPath(p).suffix not in PROGRAM_SUFFIXES)}
    return Depends(files=beside, entries=None, checks=frozenset(), mentions=None, since=since)


def changed(dep: Depends, digests: Mapping[str, str | None], table: Bounds,
            tables_at: Mapping[str, Bounds] | None = None) -> str | None:
    """Why today's tree no longer holds what ``dep`` attests (one line), or None.

    ``digests``: path → sha256 today (None when gone); ``table``: today's tolerance table;
    ``tables_at``: sha256 of a committed table file (or of the header rendered from it) → the
    table it held (empty: no history was read)."""
    tables_at = tables_at or {}
    moved = [p for p, sha in dep.files.items() if digests.get(p) != sha]
    left = []
    for path in moved:
        then = tables_at.get(dep.files[path]) if path in TABLE_PATHS and dep.entries is None else None
        if then is None or dep.mentions is None:
            left.append(path)
            continue
        names = dep.checks | (dep.mentions & then.keys())
        entries = sorted(n for n in names if then.get(n) != table.get(n))
        if entries:
            return (", ".join(f"tolerance entry '{n}' {'changed' if n in table else 'removed'}" for n in entries)
                    + f" in {TABLE_FILE} {dep.since}")
    if left:
        gone = [p for p in left if digests.get(p) is None]
        return ", ".join(left) + (f" ({', '.join(gone)} deleted)" if gone else "") + f" changed {dep.since}"
    if dep.entries is None:
        return None
    unattested = sorted(dep.checks - dep.entries.keys())
    if unattested:
        return f"the record does not attest the tolerance entry of check '{unattested[0]}' ({TABLE_FILE})"
    gone = sorted(n for n in dep.entries if n not in table)
    differ = sorted(n for n, digest in dep.entries.items()
                    if n in table and entry_digest(n, *table[n]) != digest)
    if not (gone or differ):
        return None
    parts = [f"tolerance entry '{n}' changed" for n in differ] + [f"tolerance entry '{n}' removed" for n in gone]
    return f"{', '.join(parts)} in {TABLE_FILE} {dep.since}"
