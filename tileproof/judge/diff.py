"""What changed in the evidence between two trees, as a pure function of what was gathered from each.

``gather.snapshot`` reads a tree (a commit's checkout, or the working tree) into a :class:`Snapshot`: each lesson's
state from its one verdict (``judge.verdict``), the records under runs/ by digest, the claims matrix's cells
and the counted bench records. :func:`compare` sets two side by side (:class:`Diff`):

- per lesson, its status and standing before and after, each row or performance claim whose deciding record or
  result changed, the cuda-tile releases it was verified on that it gained or lost;
- the records added, removed or changed (a removed or changed record is also the history check's finding);
- each claim whose verdict changed on a CUDA release;
- per bench program and GPU class (GPU name and compute capability), the newest counted passed record on each
  side: for each case key on both, and for the fastest tile kernel of each computation, variant and shape (key
  ``name/variant/shape/*``, as a performance claim names it), the change of the median time judged by the one
  noise rule (``judge.noise``), with both records' spreads and controls; and the two records' environments.

:attr:`Diff.exit_code` is 0 when nothing regressed beyond noise and no lesson turned false, else 1
(docs/reviewing-changes.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from tileproof.judge import noise, perf_claims, trust
from tileproof.judge.verdict import LessonVerdict
from tileproof.records.models import BenchCase, BenchRecord, ClaimVerdictName, RunRecord

Standing = Literal["holds", "false", "differs", "blocked", "ready", "not-ready"]
"""A lesson's standing: published ``holds`` (its records hold and it shows what they give), ``false`` (published
without evidence), ``differs`` (it differs from its records), ``blocked`` (a tree problem: trust, history, refused
input); a draft ``ready`` to publish or ``not-ready``."""
FALSE: frozenset[Standing] = frozenset({"false", "differs", "blocked"})
"""The standings in which a published lesson fails the audit."""


class Out(BaseModel):
    """What ``diff`` prints (``--format json`` dumps it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class RowState(Out):
    outcome: str
    run_id: str | None
    result: str
    """The results cell (a row) or the value against the bound (a performance claim); ``-`` without one."""


class LessonState(Out):
    id: str
    status: str
    standing: Standing
    rows: dict[str, RowState]
    """``PROGRAM CHECK`` for a results row, ``perf:ID`` for a performance claim."""
    releases: tuple[str, ...]
    """The cuda-tile releases the lesson is verified on (``1.7.0``; ``1.4.0*``: tileiras outside the release's
    range): a published lesson's as it states them (``cuda_tile_verified``), a draft's as its newest evidence
    gives them."""


def standing(v: LessonVerdict) -> Standing:
    """The lesson's standing (:data:`Standing`) from its one verdict."""
    if not v.published:
        return "ready" if v.ready else "not-ready"
    if v.tree_problems:
        return "blocked"
    if not v.decision.publishable:
        return "false"
    return "differs" if v.rederived else "holds"


def lesson_state(v: LessonVerdict) -> LessonState:
    """One lesson's state: its rows and performance claims as the decision it stands on gives them."""
    rows = {f"{r.row.program} {r.row.check}": RowState(outcome=r.outcome, run_id=r.record.run_id if r.record else None,
                                                       result=r.result if r.outcome == "passed" else "-")
            for r in v.decision.rows}
    rows |= {f"perf:{c.claim.id}": RowState(outcome=c.outcome, run_id=c.record.run_id if c.record else None,
                                            result=c.value_text()) for c in v.decision.perf}
    stated = v.lesson.front.cuda_tile_verified if v.published else v.fresh.cuda_tile_verified
    verified = tuple(f"{r.cuda_tile}{'' if r.tileiras_in_range else '*'}" for r in stated)
    return LessonState(id=v.lesson.id, status=v.lesson.front.status, standing=standing(v), rows=rows,
                       releases=verified)


@dataclass(frozen=True)
class Snapshot:
    """One side of a diff, as ``gather.snapshot`` read it."""

    label: str
    """The full commit id, or ``working tree``."""
    lessons: dict[str, LessonState]
    records: dict[str, str]
    """Run id → sha256 of its file under runs/."""
    claims: dict[tuple[str, str, str], tuple[ClaimVerdictName, str]]
    """(document, claim id, CUDA release) → (verdict, run id of the claims record that decides it)."""
    bench: list = field(default_factory=list)
    """The bench records, ``store.Examined`` (only those that count are compared)."""


# --- the output ---------------------------------------------------------------------------------------------------


class RowChange(Out):
    row: str
    before: RowState | None
    after: RowState | None


class LessonChange(Out):
    id: str
    status: tuple[str | None, str | None]
    standing: tuple[Standing | None, Standing | None]
    rows: list[RowChange]
    releases_gained: list[str]
    releases_lost: list[str]

    @property
    def turned_false(self) -> bool:
        """Published and failing the audit after, where it was not before (or did not exist)."""
        before, after = self.standing
        return after in FALSE and before not in FALSE


class RecordChanges(Out):
    added: list[str]
    removed: list[str]
    changed: list[str]
    """Same run id, other bytes."""


class ClaimChange(Out):
    document: str
    claim: str
    release: str
    before: str | None
    after: str | None
    run_ids: tuple[str | None, str | None]


class Side(Out):
    """One case's measurement in one record."""

    case: str
    median_ms: float
    band_ms: float
    noise: float
    """The relative noise the band is (``noise.case_noise``, across runs)."""
    spread: float
    repeat_spread: float | None
    control: float
    """The record's A/A control as relative noise (``noise.control_noise``)."""
    pct_of_ceiling: float | None
    load: str | None
    """The clock and power it ran at (``GpuLoad.text``)."""


class CaseChange(Out):
    key: str
    """A case key, or ``name/variant/shape/*``: the fastest tile kernel of that computation, variant and shape."""
    before: Side
    after: Side
    change: float
    """Relative change of the median time (negative: faster)."""
    judged: noise.Change


class EnvField(Out):
    name: str
    before: str
    after: str

    @property
    def differs(self) -> bool:
        return self.before != self.after


class BenchChange(Out):
    program: str
    gpu_class: str
    before_run: str
    after_run: str
    cases: list[CaseChange]
    environment: list[EnvField]


class Diff(Out):
    base: str
    head: str
    lessons: list[LessonChange]
    records: RecordChanges
    claims: list[ClaimChange]
    bench: list[BenchChange]

    @property
    def regressions(self) -> list[tuple[BenchChange, CaseChange]]:
        return [(b, c) for b in self.bench for c in b.cases if c.judged == "regression"]

    @property
    def turned_false(self) -> list[LessonChange]:
        return [lesson for lesson in self.lessons if lesson.turned_false]

    @property
    def exit_code(self) -> int:
        """0 when nothing regressed beyond noise and no lesson turned false; 1 otherwise."""
        return 1 if self.regressions or self.turned_false else 0


# --- comparing --------------------------------------------------------------------------------------------------


def _lesson_change(lesson_id: str, a: LessonState | None, b: LessonState | None) -> LessonChange | None:
    rows_a, rows_b = (a.rows if a else {}), (b.rows if b else {})
    rows = [RowChange(row=k, before=rows_a.get(k), after=rows_b.get(k))
            for k in dict.fromkeys([*rows_a, *rows_b]) if rows_a.get(k) != rows_b.get(k)]
    rel_a, rel_b = (a.releases if a else ()), (b.releases if b else ())
    change = LessonChange(id=lesson_id, status=(a.status if a else None, b.status if b else None),
                          standing=(a.standing if a else None, b.standing if b else None), rows=rows,
                          releases_gained=[r for r in rel_b if r not in rel_a],
                          releases_lost=[r for r in rel_a if r not in rel_b])
    same = change.status[0] == change.status[1] and change.standing[0] == change.standing[1]
    return None if same and not rows and not change.releases_gained and not change.releases_lost else change


def _records(a: Mapping[str, str], b: Mapping[str, str]) -> RecordChanges:
    return RecordChanges(added=sorted(set(b) - set(a)), removed=sorted(set(a) - set(b)),
                         changed=sorted(k for k in set(a) & set(b) if a[k] != b[k]))


def _claims(a: Mapping[tuple[str, str, str], tuple[str, str]],
            b: Mapping[tuple[str, str, str], tuple[str, str]]) -> list[ClaimChange]:
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if (va[0] if va else None) != (vb[0] if vb else None):
            out.append(ClaimChange(document=key[0], claim=key[1], release=key[2], before=va[0] if va else None,
                                   after=vb[0] if vb else None, run_ids=(va[1] if va else None, vb[1] if vb else None)))
    return out


def gpu_class(rec: BenchRecord) -> str | None:
    """``NVIDIA H200, cc 9.0``: the GPU name and the compute capability every place in the record agrees on."""
    gpu, cc = rec.environment.gpu, perf_claims.record_cc(rec)
    return f"{gpu.name}, cc {cc}" if gpu is not None and cc is not None else None


def newest_by_class(bench: Iterable) -> dict[tuple[str, str], BenchRecord]:
    """(program, GPU class) → the newest (``standing.age``) counted bench record with verdict passed."""
    counted, _refused = trust.split(trust.examined(bench))
    out: dict[tuple[str, str], BenchRecord] = {}
    for rec in counted:  # oldest first: a later one replaces an earlier one
        if isinstance(rec, BenchRecord) and rec.verdict == "passed" and (cls := gpu_class(rec)) is not None:
            out[(rec.program, cls)] = rec
    return out


def fastest(rec: BenchRecord) -> dict[str, BenchCase]:
    """``name/variant/shape/*`` → the fastest tile kernel (a case with tiles) of that computation, variant and
    shape."""
    best: dict[str, BenchCase] = {}
    for c in rec.cases:
        if c.tiles is None or not math.isfinite(c.median_ms):
            continue
        slot = f"{c.name}/{c.variant}/{'x'.join(map(str, c.shape))}/*"
        if slot not in best or c.median_ms < best[slot].median_ms:
            best[slot] = c
    return best


def side(rec: BenchRecord, case: BenchCase) -> Side:
    control = noise.control_noise(rec.head_to_head)
    relative = noise.case_noise(case, rec.repeat_spread, control, across_runs=True)
    band = noise.Measured.relative(case.median_ms, relative).band if math.isfinite(relative) else math.inf
    return Side(case=case.key, median_ms=case.median_ms, band_ms=band, noise=relative, spread=case.spread,
                repeat_spread=rec.repeat_spread.get(case.key), control=control, pct_of_ceiling=case.pct_of_ceiling,
                load=case.load.text() if case.load else None)


def compare_case(key: str, a: Side, b: Side) -> CaseChange:
    """One case's median time, before against after, by the noise rule (a lower time is better)."""
    judged = noise.judge(noise.Measured(a.median_ms, a.band_ms), noise.Measured(b.median_ms, b.band_ms),
                         higher_is_better=False)
    change = (b.median_ms - a.median_ms) / a.median_ms if a.median_ms else math.inf
    return CaseChange(key=key, before=a, after=b, change=change, judged=judged)


def _text(x: object) -> str:
    return "-" if x is None else str(x)


def environment(a: BenchRecord | RunRecord, b: BenchRecord | RunRecord) -> list[EnvField]:
    """The two records' environments side by side: driver, CUDA, tileiras, cuda-tile, GPU, the clocks at the start
    and, from a bench record's NVML readings, the maximum SM clock, the power limit and the range over its cases of
    the median SM clock and power draw while they ran."""
    def facts(r: BenchRecord | RunRecord) -> dict[str, str]:
        gpu, tc = r.environment.gpu, r.environment.toolchain
        tools = {t.name: t.version for t in tc.tools}
        cases = r.cases if isinstance(r, BenchRecord) else []
        loads = [c.load for c in cases if c.load]
        limits = sorted({f"{x.power_limit_w:.0f} W" for x in loads})
        max_clock = sorted({f"{x.max_sm_clock_mhz:.0f} MHz" for x in loads})
        clocks = [x.sm_clock_mhz for x in loads]
        draws = [x.power_w for x in loads]
        return {
            "driver": _text(gpu.driver_version if gpu else None),
            "CUDA": _text(tc.major_minor),
            "nvcc": _text(tools.get("nvcc")),
            "tileiras": _text(tools.get("tileiras")),
            "cuda-tile": _text(r.environment.versions.get("cuda-tile")),
            "GPU": f"{gpu.name} cc {gpu.compute_capability}" if gpu else "-",
            "GPU uuid": _text(gpu.uuid if gpu else None),
            "SM clock at start": f"{gpu.clocks_sm_mhz} MHz" if gpu and gpu.clocks_sm_mhz is not None else "-",
            "memory clock at start": f"{gpu.clocks_mem_mhz} MHz" if gpu and gpu.clocks_mem_mhz is not None else "-",
            "max SM clock": ", ".join(max_clock) or "-",
            "power limit": ", ".join(limits) or "-",
            "SM clock under load": f"{min(clocks):.0f}-{max(clocks):.0f} MHz" if clocks else "-",
            "power draw under load": f"{min(draws):.0f}-{max(draws):.0f} W" if draws else "-",
            "record version": str(r.bench_version if isinstance(r, BenchRecord) else r.run_version),
        }
    fa, fb = facts(a), facts(b)
    return [EnvField(name=k, before=fa[k], after=fb[k]) for k in fa]


def compare_bench(a: BenchRecord, b: BenchRecord) -> list[CaseChange]:
    """Every case key both records hold, then every ``name/variant/shape/*`` slot both have a tile kernel for."""
    cases_a = {c.key: c for c in a.cases if c.key and math.isfinite(c.median_ms)}
    cases_b = {c.key: c for c in b.cases if c.key and math.isfinite(c.median_ms)}
    out = [compare_case(k, side(a, cases_a[k]), side(b, cases_b[k])) for k in cases_a if k in cases_b]
    best_a, best_b = fastest(a), fastest(b)
    out += [compare_case(k, side(a, best_a[k]), side(b, best_b[k])) for k in best_a if k in best_b]
    return out


def _bench(a: Iterable, b: Iterable) -> list[BenchChange]:
    newest_a, newest_b = newest_by_class(a), newest_by_class(b)
    out = []
    for key in sorted(set(newest_a) & set(newest_b)):
        ra, rb = newest_a[key], newest_b[key]
        if ra.run_id == rb.run_id:
            continue
        out.append(BenchChange(program=key[0], gpu_class=key[1], before_run=ra.run_id, after_run=rb.run_id,
                               cases=compare_bench(ra, rb), environment=environment(ra, rb)))
    return out


def compare(a: Snapshot, b: Snapshot) -> Diff:
    """What changed from ``a`` (the base) to ``b`` (the head): the module docstring."""
    lessons = [c for i in sorted(set(a.lessons) | set(b.lessons))
               if (c := _lesson_change(i, a.lessons.get(i), b.lessons.get(i))) is not None]
    return Diff(base=a.label, head=b.label, lessons=lessons, records=_records(a.records, b.records),
                claims=_claims(a.claims, b.claims), bench=_bench(a.bench, b.bench))
