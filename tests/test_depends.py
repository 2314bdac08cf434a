"""records.depends: one rule for what a record depends on and whether it changed, run and compile records alike.

A compile record of compile_version 4 attests, per program, the files it includes and the tolerance entries
its files name; an older one lists every source of every program it built, the table and its header among
them, and is judged per entry where git history holds the table version it attests (``tables_at``)."""

from __future__ import annotations

from datetime import timedelta

import fixture_records as fx
import pytest
from pydantic import ValidationError

from tileproof.records import depends
from tileproof.records.depends import ProgramUses
from tileproof.records.models import CompileRecord, FileDigest, ProgramInputs
from tileproof.records.tolerances import entry_digest

CU, OTHER, HARNESS, HEADER, TABLE_PY = "cpp/prog.cu", "cpp/other.cu", "cpp/harness.h", "cpp/tolerances.h", \
    "kernels/tolerances.py"
OTHER_H = "cpp/other.h"
TABLE = {"prog_check": (1e-4, 0.0), "other_check": (0.0, 0.0)}
GROWN = {**TABLE, "new_lesson_check": (1e-3, 0.0)}
TODAY = {CU: fx.sha("cu"), OTHER: fx.sha("other"), HARNESS: fx.sha("harness"), OTHER_H: fx.sha("other.h"),
         HEADER: fx.sha("header v1"), TABLE_PY: fx.sha("table v1")}
GROWN_TODAY = {**TODAY, HEADER: fx.sha("header v2"), TABLE_PY: fx.sha("table v2")}
USES = ProgramUses(files=(CU, HARNESS, HEADER), names=frozenset({"prog_check"}))
"""What cpp/prog.cu uses: its harness and the header (and it names one check)."""
TABLES_AT = {fx.sha("header v1"): TABLE, fx.sha("table v1"): TABLE}
"""The committed versions of the table that git history holds."""


def compile_record(version: int, inputs: dict[str, ProgramInputs] | None = None) -> CompileRecord:
    sources = dict(TODAY) if version < 4 else {p: TODAY[p] for p in (CU, HARNESS, OTHER, OTHER_H)}
    own = inputs or ({CU: ProgramInputs(uses=[CU, HARNESS], tolerances={"prog_check": entry_digest("prog_check",
                                                                                                   1e-4, 0.0)}),
                      OTHER: ProgramInputs(uses=[OTHER, OTHER_H], tolerances={})} if version >= 4 else {})
    return CompileRecord(
        schema_version=1, kind="compile", compile_version=version, run_id="FIXTURE-20260901T120000Z-compile-00000001",
        created=fx.T0 + timedelta(minutes=1), tileproof_version="0", git=fx.GitState(commit=fx.COMMIT, dirty=False),
        host=fx.HostFacts(system="fixture", release="f", machine="x86_64", python="3.11", cpu_count=1),
        toolchain=fx.toolchain(), targets=["sm_89"], sources=[FileDigest(path=p, sha256=d) for p, d in sources.items()],
        builds=[], api=None, passed=True, inputs=own)


def stale(rec, today, table, uses=USES, tables_at=TABLES_AT) -> str | None:
    dep = depends.of_compile(rec, CU, uses)
    assert not isinstance(dep, str), dep
    return depends.changed(dep, today, table, tables_at)


# (id, compile_version, today, table, uses, tables_at, the reason's words, or None: still holds)
CASES = [
    ("v4-as-built", 4, TODAY, TABLE, USES, {}, None),
    ("v4-a-new-entry-for-another-check", 4, GROWN_TODAY, GROWN, None, {}, None),
    ("v4-another-programs-header-changed", 4, {**TODAY, OTHER_H: fx.sha("other.h v2")}, TABLE, None, {}, None),
    ("v4-its-entry-changed", 4, GROWN_TODAY, {**TABLE, "prog_check": (2e-4, 0.0)}, None, {},
     "tolerance entry 'prog_check' changed in kernels/tolerances.py since compile record"),
    ("v4-its-entry-removed", 4, GROWN_TODAY, {"other_check": (0.0, 0.0)}, None, {},
     "tolerance entry 'prog_check' removed"),
    ("v4-its-harness-changed", 4, {**TODAY, HARNESS: fx.sha("harness v2")}, TABLE, None, {},
     "cpp/harness.h changed since compile record"),
    ("v1-as-built", 1, TODAY, TABLE, USES, TABLES_AT, None),
    ("v1-a-new-entry-found-in-history", 1, GROWN_TODAY, GROWN, USES, TABLES_AT, None),
    ("v1-another-programs-header-changed", 1, {**TODAY, OTHER_H: fx.sha("other.h v2")}, TABLE, USES, TABLES_AT, None),
    ("v1-an-entry-it-does-not-name-changed", 1, GROWN_TODAY, {**TABLE, "other_check": (1.0, 1.0)}, USES, TABLES_AT,
     None),
    ("v1-an-entry-it-names-changed", 1, GROWN_TODAY, {**TABLE, "prog_check": (2e-4, 0.0)}, USES, TABLES_AT,
     "tolerance entry 'prog_check' changed"),
    ("v1-without-history-the-header-stays-whole", 1, GROWN_TODAY, GROWN, USES, {}, "cpp/tolerances.h changed"),
    ("v1-without-uses-the-header-stays-whole", 1, GROWN_TODAY, GROWN, None, TABLES_AT, "cpp/tolerances.h changed"),
    ("v1-without-uses-a-header-beside-it-counts", 1, {**TODAY, OTHER_H: fx.sha("other.h v2")}, TABLE, None,
     TABLES_AT, "cpp/other.h changed"),
    ("v1-its-harness-changed", 1, {**TODAY, HARNESS: fx.sha("harness v2")}, TABLE, USES, TABLES_AT,
     "cpp/harness.h changed"),
    ("v1-its-program-deleted", 1, {**TODAY, CU: None}, TABLE, USES, TABLES_AT, "cpp/prog.cu (cpp/prog.cu deleted)"),
]


@pytest.mark.parametrize("version, today, table, uses, tables_at, why", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_compile_record_depends_on_its_programs_own_inputs(version, today, table, uses, tables_at, why):
    got = stale(compile_record(version), today, table, uses, tables_at)
    assert (got is None) == (why is None), got
    assert (why is None or why in got), got


def test_a_record_that_does_not_attest_the_program_gives_no_dependencies():
    assert "does not attest cpp/nope.cu" in depends.of_compile(compile_record(4), "cpp/nope.cu")
    rec = compile_record(4, inputs={OTHER: ProgramInputs(uses=[OTHER, OTHER_H], tolerances={})})
    assert "does not say what cpp/prog.cu was built from" in depends.of_compile(rec, CU)


def test_run_and_compile_records_share_the_rule(tmp_path):
    """A run record of run_version 3 and a compile record of version 4 judged by the same ``changed``."""
    run = fx.run_record(n=1, program=CU, front=None, sources={CU: TODAY[CU], HARNESS: TODAY[HARNESS]}, query=None,
                        checks=[fx.check("prog_check", 1e-4, 0.0)], tolerances={"prog_check": entry_digest(
                            "prog_check", 1e-4, 0.0)})
    for dep in (depends.of_run(run, "prog_check"), depends.of_compile(compile_record(4), CU)):
        assert depends.changed(dep, GROWN_TODAY, GROWN) is None
        assert "tolerance entry 'prog_check' changed" in depends.changed(dep, TODAY, {"prog_check": (1.0, 0.0)})
    assert "does not attest the tolerance entry of check 'other_check'" in depends.changed(
        depends.of_run(run, "other_check"), TODAY, TABLE)


@pytest.mark.parametrize("change, problem", [
    (lambda r: {**r, "compile_version": 3}, "before compile_version 4 hold no inputs"),
    (lambda r: {**r, "sources": [*r["sources"], {"path": HEADER, "sha256": fx.sha("h")}]}, "not the table file"),
    (lambda r: {**r, "inputs": {CU: {"uses": [HARNESS, CU], "tolerances": {}}}}, "must start with the program"),
    (lambda r: {**r, "inputs": {CU: {"uses": [CU, "cpp/elsewhere.h"], "tolerances": {}}}}, "only files in sources"),
], ids=["inputs-before-v4", "table-file-in-v4", "uses-not-led-by-the-program", "uses-outside-sources"])
def test_a_version_4_compile_record_holds_its_inputs_or_does_not_validate(change, problem):
    data = compile_record(4).model_dump(mode="json")
    with pytest.raises(ValidationError, match=problem):
        CompileRecord.model_validate(change(data))
