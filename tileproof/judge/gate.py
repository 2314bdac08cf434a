"""The publish decision, as a pure function of its inputs: ``decide`` (a draft, on the newest evidence) and
``decide_cited`` (a published lesson, on the records it cites) give one ``Decision``: an outcome per results
row from a closed set, the performance claims (``perf_claims``), the refuted claims, the compile-derived table
(``res_usage``) and the plausibility doubts, and ``Decision.blockers``, each with a reason and its fix, which
``status``, ``publish`` and the audit print. It reads no file (today's digests, the evidence reader and the
tolerance table come in as arguments) and cannot be told to trust a record (``trust.refusal`` decides which
count, once). The rules (which record decides a row, what it must show, when a lesson is publishable):
docs/records-and-staleness.md, "Which record decides a row" and "When a published lesson stays valid".
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, NamedTuple

from tileproof.judge import claim_verdicts, plausibility, releases, trust
from tileproof.judge.claim_verdicts import (
    NO_CLAIMS,
    ClaimsToday,
    RefutedClaim,
    Release,
    UncheckedRelease,
)
from tileproof.judge.perf_claims import ClaimDecision
from tileproof.judge.perf_claims import decide as decide_perf
from tileproof.judge.res_usage import ResUsageDecision, decide_res_usage
from tileproof.judge.selection import Need, needs
from tileproof.judge.today import Today, lock_release, tables_at
from tileproof.judge.trust import standing
from tileproof.records import depends, release
from tileproof.records.capability import MIN_CC, below_tile, cc_tuple, sm_of
from tileproof.records.lessons import (
    GATE_CHECK,
    RES_USAGE,
    UNKNOWN,
    Cited,
    program_list_digest,
)
from tileproof.records.models import (
    TOOLCHAIN_ABSENT_FIX,
    BlockerKind,
    Hardware,
    LessonFront,
    ResultRow,
    RunRecord,
    ToolchainProblem,
    VerifiedRelease,
)
from tileproof.records.parsers import parse_gpu_query
from tileproof.records.tolerances import TABLE_FILE

Outcome = Literal[
    "passed",
    "no-record",
    "failed",
    "gated",
    "stale",
    "forged-cc",
    "incoherent-toolchain",
    "out-of-bounds",
    "missing-file",
    "toolchain-absent",
]
OUTCOMES: tuple[str, ...] = Outcome.__args__  # type: ignore[attr-defined]
__all__ = ["MIN_CC", "cc_tuple", "decide", "decide_cited", "decide_row", "Decision", "RowDecision", "RowClass",
           "Bound", "OUTCOMES", "Today"]

EvidenceReader = Callable[[str], "bytes | None"]


class Bound(NamedTuple):
    """A check's allowed tolerance, from kernels/tolerances.py."""

    rtol: float
    atol: float


@dataclass(frozen=True)
class RowDecision:
    row: ResultRow
    outcome: Outcome
    reason: str
    """One line: what was found."""
    command: str | None
    """What would produce the missing evidence; None when passed."""
    record: RunRecord | None = None
    """The record that decided the row, if any."""
    result: str = UNKNOWN
    """The results-table cell when passed."""
    ignored: tuple[str, ...] = field(default_factory=tuple)
    """Run ids of records that never count here (broken seal, signature the policy refuses)."""
    ignored_note: str = ""
    """Which of them and why, as the reason ends with it (``(ignored, signature unsigned: a, b)``)."""
    age: tuple = ()
    """``standing.age`` of the record that decided the row: which of the rows' records is the newest."""

    @property
    def blocks(self) -> bool:
        return self.outcome != "passed" and not self.row.optional

    def __str__(self) -> str:
        return f"{self.row.program} {self.row.check}: {self.outcome}: {self.reason}"


@dataclass(frozen=True)
class Blocker:
    """One thing that keeps a lesson from being published: what, why (never empty) and the fix."""

    kind: BlockerKind
    subject: str
    """``kernels/x.py matmul``, ``perf claim <id>``, ``claim <id>``."""
    outcome: str
    reason: str
    command: str | None

    def __post_init__(self) -> None:
        if not self.reason.strip():
            raise ValueError(f"{self.subject}: a blocker without a reason")

    def __str__(self) -> str:
        return f"{self.subject}: {self.outcome}: {self.reason}"


@dataclass(frozen=True)
class Decision:
    lesson: str
    rows: tuple[RowDecision, ...]
    perf: tuple[ClaimDecision, ...] = ()
    """One decision per performance claim of the lesson."""
    refuted: tuple[RefutedClaim, ...] = ()
    """Claims of the lesson's document that the evidence refutes, on the release of the lesson's
    accepted run records, and the document still asserts."""
    unchecked: tuple[UncheckedRelease, ...] = ()
    """Releases of the lesson's accepted run records that no claims record of its document covers."""
    res_usage: ResUsageDecision | None = None
    """The lesson's compile-derived REG/SHARED table (None when it declares none)."""
    unlisted: tuple[ResultRow, ...] = ()
    """Required rows whose check has no entry in the tolerance table: nothing can ever pass them."""
    cuda_tile_verified: tuple[VerifiedRelease, ...] = ()
    """The cuda-tile releases every Python program of the lesson passed with (``release_matrix.verified``)."""
    doubts: tuple[plausibility.Doubt, ...] = ()
    """Plausibility signals that nothing settles on the records the decision rests on (:attr:`rests_on`,
    ``judge.plausibility``)."""

    @property
    def publishable(self) -> bool:
        return not self.blockers

    @property
    def blockers(self) -> list[Blocker]:
        """Everything in the way of publishing, rows first, then performance claims, then refuted claims."""
        out = [Blocker("row", f"{r.row.program} {r.row.check}", r.outcome, r.reason, r.command) for r in self.missing]
        out += [Blocker("perf-claim", f"perf claim {c.claim.id} ({c.claim.statement})", c.outcome, c.reason, c.command)
                for c in self.unsupported]
        out += [Blocker("refuted-claim", f"claim {c.claim_id}", "refuted", c.reason, c.command) for c in self.refuted]
        out += [Blocker("claims-unchecked", f"claims on {u.release}", "no-claims-record", u.reason, u.command)
                for u in self.unchecked]
        if self.res_usage is not None and not self.res_usage.holds:
            out.append(Blocker("res-usage", self.res_usage.subject, "no-record", self.res_usage.reason,
                               self.res_usage.command(self.lesson)))
        out += [Blocker("no-tolerance-entry", f"{r.program} {r.check}", "no-tolerance-entry",
                        f"check '{r.check}' has no entry in {TABLE_FILE}",
                        f"add \"{r.check}\": Tolerance(rtol=..., atol=...) with its derivation to {TABLE_FILE}")
                for r in self.unlisted]
        out += [Blocker("plausibility", f"run {d.run_id}", d.signal.kind, str(d.signal),
                        f"run it again under a second registered runner key, or explain it in the front matter: "
                        f"plausibility: [{{signal: {d.signal.kind}, subject: '{d.signal.subject}', explanation: ...}}]")
                for d in self.doubts]
        return out

    def published_blocks(self) -> dict[str, str]:
        """The body's compile-derived tables as publish writes them (marker name → table)."""
        return {RES_USAGE: self.res_usage.rendered()} if self.res_usage is not None else {}

    def lacking(self) -> str:
        """``1 of 5 required rows lack evidence``, ``1 of 2 performance claims lack a supporting bench record``,
        ``it still asserts 1 refuted claim(s)``: whichever apply (the rows' count when nothing does)."""
        parts = []
        tables = self.res_usage is not None and not self.res_usage.holds
        if self.missing or not (self.unsupported or self.refuted or self.unchecked or tables or self.unlisted
                                or self.doubts):
            n, total = len(self.missing), sum(1 for r in self.rows if not r.row.optional)
            parts.append(f"{n} of {total} required rows lack evidence")
        if self.unsupported:
            parts.append(f"{len(self.unsupported)} of {len(self.perf)} performance claims lack a supporting "
                         f"bench record")
        if self.refuted:
            parts.append(f"it still asserts {len(self.refuted)} refuted claim(s)")
        if self.unchecked:
            parts.append(f"its claims are unchecked on {', '.join(str(u.release) for u in self.unchecked)}")
        if self.res_usage is not None and not self.res_usage.holds:
            parts.append("no compile record fills its res-usage table")
        if self.unlisted:
            parts.append(f"{len(self.unlisted)} check(s) have no tolerance entry")
        if self.doubts:
            parts.append(f"its evidence has {len(self.doubts)} unexplained plausibility signal(s)")
        return " and ".join(parts)

    @property
    def missing(self) -> list[RowDecision]:
        return [r for r in self.rows if r.blocks]

    @property
    def rests_on(self) -> list[str]:
        """Run ids of the records a publish would state the lesson on: those behind its passed required rows,
        its supported performance claims and the cuda-tile releases it is verified on."""
        return list(dict.fromkeys(
            [r.record.run_id for r in self.rows if r.outcome == "passed" and not r.row.optional and r.record]
            + [c.record.run_id for c in self.perf if c.supported and c.record is not None]
            + [run_id for v in self.cuda_tile_verified for run_id in v.run_ids]))

    @property
    def unsupported(self) -> list[ClaimDecision]:
        """Performance claims no bench record supports today."""
        return [c for c in self.perf if not c.supported]

    @property
    def evidence(self) -> dict[str, str]:
        """Program → run id of the record accepted for its required rows (all of them passed)."""
        out: dict[str, str] = {}
        for program in dict.fromkeys(r.row.program for r in self.rows if not r.row.optional):
            mine = [r for r in self.rows if r.row.program == program and not r.row.optional]
            if all(r.outcome == "passed" for r in mine):
                newest = _newest(mine)
                if newest is not None:
                    out[program] = newest.run_id
        return out

    def hardware(self) -> Hardware | None:
        """The hardware block, from the newest record behind a passed required row."""
        newest = _newest(r for r in self.rows if r.outcome == "passed" and not r.row.optional)
        return None if newest is None else hardware_of(newest)

    def published_front(self, front: LessonFront) -> LessonFront:
        """``front`` as publish writes it: status, hardware and the results' cells."""
        if not self.publishable:
            raise ValueError(f"{self.lesson} is not publishable")
        rows = [
            r.row.model_copy(update={"result": r.result, "run_id": r.record.run_id})
            if r.outcome == "passed" and r.record else r.row.model_copy(update={"result": UNKNOWN, "run_id": None})
            for r in self.rows
        ]
        # A lesson with no program of its own (a note whose numbers are performance claims) has no run record
        # behind it: its hardware block stays empty, and each claim names its bench record.
        return front.model_copy(update={"status": "published", "hardware": self.hardware() or Hardware(),
                                        "results": rows, "cuda_tile_verified": list(self.cuda_tile_verified)})


# --- helpers (pure) ------------------------------------------------------------------


def _newest(rows: Iterable[RowDecision]) -> RunRecord | None:
    """The newest (``standing.age``) of the records that decided ``rows``; None when none did."""
    decided = [(r.age, r.record) for r in rows if r.record is not None]
    return max(decided, key=lambda pair: pair[0])[1] if decided else None


def _num(x) -> str:
    return x if isinstance(x, str) else ("n/a" if x is None else f"{x:.2g}")


def hardware_of(rec: RunRecord) -> Hardware:
    env, gpu = rec.environment, rec.environment.gpu
    tools = {t.name: t.version for t in env.toolchain.tools}
    pk = {**env.packages, **env.toolchain.packages}
    return Hardware(
        gpu=gpu.name if gpu else None,
        compute_capability=gpu.compute_capability if gpu else None,
        driver=gpu.driver_version if gpu else None,
        cuda=tools.get("nvcc") or pk.get("nvidia-cuda-nvcc") or env.toolchain.major_minor,
        tileiras=tools.get("tileiras") or pk.get("nvidia-cuda-tileiras"),
        cuda_tile=env.versions.get("cuda-tile") or pk.get("cuda-tile"),
        run_id=rec.run_id,
    )


def verify_capability(rec: RunRecord, read_evidence: EvidenceReader) -> tuple[tuple[int, int] | None, str | None]:
    """(the one compute capability every source agrees on, or None; the problem, if any)."""
    gpu, query = rec.environment.gpu, rec.environment.nvidia_smi_query
    if gpu is None:
        return None, "the record names no GPU"
    if query is None:
        return None, "the record has no nvidia-smi --query-gpu transcript"
    data = read_evidence(query.path)
    if data is None:
        return None, f"{query.path} is missing"
    if hashlib.sha256(data).hexdigest() != query.sha256:
        return None, f"{query.path} does not match its sha256 in the record"
    rows = parse_gpu_query(data.decode("utf-8", "replace"))
    row = next((r for r in rows if r["uuid"] == gpu.uuid), None)
    if row is None:
        return None, f"{query.path} lists no GPU with uuid {gpu.uuid}"
    seen = {
        "nvidia-smi transcript": row["compute_capability"],
        "record": gpu.compute_capability,
        "CUDA runtime": gpu.runtime_compute_capability,
    }
    if rec.report is not None and rec.report.device is not None:
        seen["program report"] = rec.report.device.compute_capability
    values = {name: cc_tuple(v) for name, v in seen.items()}
    if None in values.values() or len(set(values.values())) != 1:
        return None, "compute capability disagrees: " + ", ".join(f"{k} {v or 'none'}" for k, v in seen.items())
    return next(iter(values.values())), None


def staleness(rec: RunRecord, front: LessonFront, program: str, today: Mapping[str, str | None],
              table: Mapping[str, Bound] | None = None, check: str | None = None) -> str | None:
    """Why the record no longer attests today's inputs, or None.

    A record depends on the lesson's program list and on what ``records.depends.of_run`` says it
    attests: each file in its ``sources`` (the program and the helpers it uses) and, from ``run_version``
    3, each tolerance entry it attests (``rec.tolerances``): an entry changed or gone stales it, an entry
    it does not use never does. An older record lists the whole tolerance file among its sources: when
    ``today.tables_at`` holds the table that version attested (read back from git history), only its
    checks' entries are compared; otherwise the file stays a whole-file dependency. ``check``: the
    row's check, whose entry the record must attest (``table``: today's table; None: entries not compared)."""
    dep = depends.of_run(rec, check)
    attested = rec.lesson_programs.get(front.id)
    if attested is None:
        return f"the record does not attest lesson {front.id}'s program list"
    if attested != program_list_digest(front):
        return f"lessons/{front.id}.md's program list changed {dep.since}"
    if program not in {s.path for s in rec.sources}:
        return f"the record does not attest {program}"
    if table is None:  # no table to compare entries with: every attested file whole
        dep = replace(dep, entries=None, mentions=None)
    problem = depends.changed(dep, today, table or {}, tables_at(today))
    if problem:
        return problem
    if program.endswith(".cu") and rec.binary is None:
        return "the record names no built binary for a C++ program"
    return None


def toolchain_problem(rec: RunRecord) -> str | None:
    """Why the record's toolchain is not one release, or None."""
    tc = rec.environment.toolchain
    found = {n: v for n, v in release.pieces({t.name: t.version for t in tc.tools}, tc.packages).items() if v}
    if not release.names_tileiras(found):
        return "the record names no tileiras version"
    releases = {release.major_minor(v) for v in found.values()}
    if len(releases) != 1 or None in releases:
        return "mixed releases: " + ", ".join(sorted(f"{n} {v}" for n, v in found.items()))
    if tc.major_minor is not None and tc.major_minor not in releases:
        return f"the record says {tc.major_minor} but its pieces are {releases.pop()}"
    clean = rec.environment.toolchain_env == "clean"
    problems = [str(p) for p in tc.problems if not (clean and _harmless_when_clean(p))]
    if problems or (not tc.coherent and not clean):
        return "; ".join(problems) or "the record marks its toolchain incoherent"
    return None


def _harmless_when_clean(problem: ToolchainProblem | str) -> bool:
    """A CUDA_HOME/CUDA_PATH hazard cannot reach children given a clean environment. A problem
    recorded as text (toolchain version 1) is never read for its kind: it always counts."""
    return isinstance(problem, ToolchainProblem) and problem.kind == "hazard-var"


def _bounds(rec: RunRecord, check: str, table: Mapping[str, Bound]) -> tuple[Outcome, str] | None:
    report = rec.report
    if report is None:
        return "failed", "the record has no check report"
    found = next((c for c in report.checks if c.name == check), None)
    if found is None:
        return "failed", f"the report has no check '{check}'"
    if not found.passed or not report.passed or report.gate != "ok":
        return "failed", f"check '{check}' failed: {found.mismatches}/{found.checked} mismatches"
    bound = table.get(check)
    if bound is None:
        return "out-of-bounds", f"kernels/tolerances.py has no bound for '{check}'"
    if found.rtol > bound.rtol or found.atol > bound.atol:
        return "out-of-bounds", (f"check '{check}' ran at rtol {found.rtol:g}, atol {found.atol:g}; "
                                 f"the table allows rtol {bound.rtol:g}, atol {bound.atol:g}")
    return None


# --- the decision --------------------------------------------------------------------


def _command(front: LessonFront, row: ResultRow, outcome: Outcome, rec: RunRecord | None) -> str | None:
    if outcome == "passed":
        return None
    if outcome == "missing-file":
        return f"restore {row.program}, or fix programs in lessons/{front.id}.md"
    if outcome == "toolchain-absent":
        return f"{TOOLCHAIN_ABSENT_FIX}, then nox -s run-gpu -- {front.id}"
    run = f"nox -s run-gpu -- {front.id}"
    if row.optional:
        return f"on a GPU with {row.hardware}: {run}"
    if row.program.endswith(".cu") and outcome in ("stale", "no-record", "failed"):
        run = f"nox -s compile && {run}"
    if outcome == "incoherent-toolchain":
        return f"pip install -U 'tileproof[toolchain]' (one CUDA release), then {run}"
    if outcome in ("gated", "forged-cc", "no-record") or (rec is not None and rec.verdict == "no-gpu"):
        return f"on a GPU of compute capability >= 8.0: {run}"
    return run


def _passes(rec: RunRecord, check: str) -> bool:
    """Whether ``rec``'s verdict passes ``check``: ``passed``, or ``unverified`` where tileproof's own check did
    verify this check (another check of the run was left unverified)."""
    return rec.verdict == "passed" or (rec.verdict == "unverified" and not rec.unverified(check))


def _required(rec: RunRecord, front: LessonFront, row: ResultRow, today, table, read_evidence):
    if rec.verdict == "toolchain-absent":
        return "toolchain-absent", f"run {rec.run_id}: {rec.reason}"
    if not _passes(rec, row.check):
        outcome: Outcome = "gated" if rec.verdict == "gated" else "failed"
        return outcome, f"verdict {rec.verdict} in run {rec.run_id}: {rec.reason}"
    cc, problem = verify_capability(rec, read_evidence)
    if problem or cc is None:
        return "forged-cc", f"run {rec.run_id}: {problem or 'no compute capability'}"
    if cc < MIN_CC:
        return "gated", f"run {rec.run_id} ran on compute capability {cc[0]}.{cc[1]}, below 8.0"
    problem = staleness(rec, front, row.program, today, table, row.check)
    if problem:
        return "stale", problem
    problem = toolchain_problem(rec)
    if problem:
        return "incoherent-toolchain", f"run {rec.run_id}: {problem}"
    bad = _bounds(rec, row.check, table)
    if bad:
        return bad[0], f"run {rec.run_id}: {bad[1]}"
    return "passed", f"run {rec.run_id}"


def _gate_row(rec: RunRecord, front: LessonFront, row: ResultRow, today, table, read_evidence):
    if rec.verdict != "gated" or rec.step.exit_code != 1 or (rec.report and rec.report.gate != "below-sm80"):
        return "failed", f"run {rec.run_id}: expected the capability gate (verdict gated, exit 1), got " \
                         f"verdict {rec.verdict}, exit {rec.step.exit_code}"
    cc, problem = verify_capability(rec, read_evidence)
    if problem or cc is None:
        return "forged-cc", f"run {rec.run_id}: {problem or 'no compute capability'}"
    if cc >= MIN_CC:
        return "failed", f"run {rec.run_id} ran on compute capability {cc[0]}.{cc[1]}, which the gate must accept"
    problem = staleness(rec, front, row.program, today, table, row.check)
    if problem:
        return "stale", problem
    return "passed", f"run {rec.run_id}"


def _result_text(rec: RunRecord, row: ResultRow) -> str:
    gpu = rec.environment.gpu
    where = f"{gpu.name}, cc {gpu.compute_capability}" if gpu else "no GPU"
    if row.check == GATE_CHECK:
        return f"gated, exit 1 ({where})"
    check = next((c for c in rec.report.checks if c.name == row.check), None) if rec.report else None
    if check is None:
        return UNKNOWN
    return f"passed: max abs err {_num(check.max_abs_err)}, max rel err {_num(check.max_rel_err)} ({where})"


@dataclass(frozen=True)
class RowClass:
    """Which run records are evidence for one results row: the one place that says it.

    A record belongs to a row's class when it ran the row's program on hardware of the row's class, as
    the record claims it (``verify_capability`` checks the claim against its transcript afterwards):
    compute capability 8.0 and up (or no GPU at all) for a required row, below 8.0 for the optional
    ``gate`` row. The row's decision takes the newest record of its class; a published lesson's cited
    record is overturned by a newer failing record of the same class (``newer_failure``). Any further
    axis that splits a row's evidence belongs here: the cuda-tile release (``on_release``) does, before the
    hardware is looked at."""

    program: str
    below_tile: bool
    """True for the optional ``gate`` row: hardware below compute capability 8.0."""
    cuda_tile: releases.ReleaseKey | None = None
    """The lock's cuda-tile release (``Today.cuda_tile``): records of another are the release axis."""

    @classmethod
    def of(cls, row: ResultRow, today: Mapping[str, str | None] | None = None) -> RowClass:
        return cls(row.program, row.optional and row.check == GATE_CHECK,
                   lock_release(today) if today is not None else None)

    def on_release(self, rec: RunRecord) -> bool:
        """Whether ``rec`` may be this row's evidence at all (``releases.decides_rows``): a record of another
        cuda-tile release neither decides the row nor, newer, overturns it."""
        return releases.decides_rows(rec, self.cuda_tile)

    def admits(self, rec: RunRecord) -> bool:
        """Whether ``rec`` is evidence of this row's class."""
        gpu = rec.environment.gpu
        low = below_tile(gpu.compute_capability) if gpu else False
        return rec.program == self.program and low == self.below_tile


@needs(Need.NEWER_THAN_CITED)
def newer_failure(cited: RunRecord, front: LessonFront, row: ResultRow, records: Sequence[RunRecord],
                  today: Mapping[str, str | None], table: Mapping[str, Bound],
                  read_evidence: EvidenceReader) -> tuple[RunRecord, str] | None:
    """The oldest record newer than ``cited`` (among ``records``, which count, oldest first by
    ``standing.age`` as ``trust.split`` orders them) of the same row and hardware class that shows the
    program failing today's inputs, and why; None when there is none. A record says nothing about the
    program (never a failure) when it found no GPU, its toolchain was absent or mixed, its capability does
    not hold up or is below 8.0, or its inputs are not today's."""
    klass = RowClass.of(row)
    at = next((i for i, r in enumerate(records) if r is cited), len(records))
    for rec in (r for r in records[at + 1:] if klass.admits(r)):
        if rec.verdict in ("no-gpu", "toolchain-absent") or rec.environment.gpu is None:
            continue
        cc, problem = verify_capability(rec, read_evidence)
        if problem or cc is None or cc < MIN_CC:
            continue
        if staleness(rec, front, row.program, today, table, row.check) or toolchain_problem(rec):
            continue
        if rec.unverified(row.check):  # tileproof could not check it: it says nothing about the program
            continue
        if not _passes(rec, row.check):
            return rec, f"verdict {rec.verdict} in run {rec.run_id}: {rec.reason}"
        bad = _bounds(rec, row.check, table)
        if bad:
            return rec, f"run {rec.run_id}: {bad[1]}"
    return None


def _nothing_fits(klass: RowClass, row: ResultRow, others: list[RunRecord]) -> tuple[Outcome, str]:
    """A row no record of its class decides: ``gated`` when the program ran only below cc 8.0 (``others``, the
    records outside the class), else ``no-record``."""
    rec = others[-1] if others and not klass.below_tile else None
    gpu = rec.environment.gpu if rec is not None else None  # outside a tile row's class: a GPU below cc 8.0
    if rec is not None and gpu is not None:
        return "gated", (f"only run on {gpu.name} ({sm_of(gpu.compute_capability)}, cc {gpu.compute_capability}), "
                         f"below 8.0: run {rec.run_id}, verdict {rec.verdict}")
    return "no-record", f"no run record for {row.program}" + (" on a GPU below cc 8.0" if klass.below_tile else "")


@needs(Need.NEWEST_OF_CLASS, Need.UNCOUNTED)
def decide_row(front: LessonFront, row: ResultRow, records: Iterable, today: Mapping[str, str | None],
               table: Mapping[str, Bound], read_evidence: EvidenceReader, cited: bool = False) -> RowDecision:
    """One row's decision; ``records``: ``store.Examined`` records (plain ones are examined here).

    ``cited``: decide from the record the row cites (``row.run_id``, a published lesson's), which must
    still count, hold up and pass, with no newer failing record of its class; else from the newest record
    of the row's class (``RowClass``)."""
    def done(outcome: Outcome, reason: str, rec: RunRecord | None = None) -> RowDecision:
        note = trust.ignored_note(refused)
        result = _result_text(rec, row) if outcome == "passed" and rec else UNKNOWN
        return RowDecision(row, outcome, reason + note, _command(front, row, outcome, rec), rec, result,
                           trust.ignored_ids(refused), note.strip(), ages[id(rec)] if rec is not None else ())

    klass = RowClass.of(row, today)
    items = [r for r in trust.examined(records) if isinstance(r.record, RunRecord) and r.record.program == row.program]
    ages = {id(e.record): standing.age(e) for e in items}
    mine, refused = trust.split(items)  # oldest first (standing.age): the last of a selection is its newest
    mine = [r for r in mine if klass.on_release(r)]
    if today.get(row.program) is None:
        return done("missing-file", f"{row.program} does not exist (lessons/{front.id}.md programs)")
    judge = _gate_row if klass.below_tile else _required
    if cited and row.run_id is None:  # a lesson flipped by hand: what the newest evidence says, never a pass
        newest = decide_row(front, row.model_copy(update={"run_id": None}), records, today, table, read_evidence)
        cites = f"lessons/{front.id}.md cites no run for this row"
        if newest.outcome == "passed":
            return done("no-record", f"{cites} (the newest evidence passed: republish)")
        said = newest.reason.removesuffix(trust.ignored_note(refused))
        return done(newest.outcome, f"{cites}; newest evidence: {said}", newest.record)
    if cited:
        rec = next((r for r in mine if r.run_id == row.run_id), None)
        if rec is None:
            return done("no-record", f"the cited run {row.run_id} is not among the records that count")
        outcome, reason = judge(rec, front, row, today, table, read_evidence)
        newer = newer_failure(rec, front, row, mine, today, table, read_evidence) \
            if outcome == "passed" and not row.optional else None
        if newer is not None:
            return done("failed", f"a newer run than the cited {rec.run_id} failed: {newer[1]}", newer[0])
        return done(outcome, reason, rec)
    fitting = [r for r in mine if klass.admits(r)]
    # A run that found no GPU says nothing about the program: it decides only when nothing ran on a GPU.
    fitting = [r for r in fitting if r.environment.gpu is not None] or fitting
    if not fitting:
        return done(*_nothing_fits(klass, row, [r for r in mine if not klass.admits(r)]))
    if not klass.below_tile:  # a check tileproof could not verify outside the program decides nothing
        verified = [r for r in fitting if not r.unverified(row.check)]
        if not verified:
            rec = fitting[-1]
            return done("no-record", f"run {rec.run_id} left check '{row.check}' unverified, which decides no row: "
                                     f"{rec.reason}")
        fitting = verified
    rec = fitting[-1]
    outcome, reason = judge(rec, front, row, today, table, read_evidence)
    return done(outcome, reason, rec)


def evidence_releases(rows: Iterable[RowDecision]) -> dict[Release, list[str]]:
    """Release → run ids of the records behind the passed required rows (the lesson's accepted
    evidence): the releases whose claim verdicts the lesson answers to."""
    out: dict[Release, list[str]] = {}
    for r in rows:
        if r.outcome == "passed" and not r.row.optional and r.record is not None:
            rel = claim_verdicts.release_of(r.record.environment.toolchain)
            if rel is not None:  # a mixed toolchain is never accepted (incoherent-toolchain)
                out.setdefault(rel, [])
                if r.record.run_id not in out[rel]:
                    out[rel].append(r.record.run_id)
    return out


@needs(Need.OTHER_KINDS)
def decide_claims(front: LessonFront, records: list, claims: ClaimsToday, today: Mapping[str, str | None],
                  rows: Iterable[RowDecision]) -> tuple[tuple[RefutedClaim, ...], tuple[UncheckedRelease, ...]]:
    """The refuted claims and unchecked releases for a lesson whose rows are decided: the verdicts
    of the releases its accepted evidence was made with; every release's newest when it has none."""
    evidence = evidence_releases(rows)
    releases = list(evidence) if evidence else None
    refuted = claim_verdicts.refuted(front.id, records, claims, today, releases)
    return tuple(refuted), tuple(claim_verdicts.unchecked_releases(front.id, records, claims, evidence))


def decide(front: LessonFront, records: Iterable, today: Mapping[str, str | None],
           table: Mapping[str, Bound], read_evidence: EvidenceReader,
           signals: Mapping[str, tuple[plausibility.Signal, ...]] | None = None) -> Decision:
    """The publish decision for one lesson, from the newest evidence (a first publish, a republish): one
    ``RowDecision`` per results row (from the run records in ``records``), one ``ClaimDecision`` per
    performance claim (from its bench records) and the refuted claims its document still asserts on the
    release of its accepted run records (from the claims records; ``today``: a ``Today`` for the claims
    file and its snippets' digests, a plain mapping when it has none). ``records``: ``store.Examined``
    records (plain ones are examined here). ``signals``: the tree's plausibility signals by run id
    (``plausibility.signals``); an unsettled one on an accepted record blocks."""
    return _decide(front, records, today, table, read_evidence, None, signals or {})


@needs(Need.CITED)
def decide_cited(front: LessonFront, cited: Cited, records: Iterable, today: Mapping[str, str | None],
                 table: Mapping[str, Bound], read_evidence: EvidenceReader,
                 signals: Mapping[str, tuple[plausibility.Signal, ...]] | None = None) -> Decision:
    """The same decision for a published lesson, from exactly the records it cites (``records.lessons.cited``
    and each row's ``run_id``): each must still count, hold and pass, and a newer failing run of a row's class
    (``newer_failure``) overturns its row; newer passing evidence changes nothing here. An unsettled
    plausibility signal (``signals``) on a cited record blocks as it does for a draft: the lesson rests on
    that record."""
    return _decide(front, records, today, table, read_evidence, cited, signals or {})


def _decide(front: LessonFront, records: Iterable, today: Mapping[str, str | None], table: Mapping[str, Bound],
            read_evidence: EvidenceReader, cited: Cited | None,
            signals: Mapping[str, tuple[plausibility.Signal, ...]]) -> Decision:
    records = trust.examined(records)
    claims = today.claims if isinstance(today, Today) else NO_CLAIMS
    rows = tuple(decide_row(front, row, records, today, table, read_evidence, cited is not None)
                 for row in front.results)
    refuted, unchecked = decide_claims(front, records, claims, today, rows)
    decision = Decision(front.id, rows,
                        tuple(decide_perf(front.performance, records, published=cited is not None))
                        if front.performance else (),
                        refuted, unchecked,
                        decide_res_usage(front, records, today, table, cited.compile if cited is not None else None),
                        tuple(r for r in front.results
                              if not r.optional and r.check != GATE_CHECK and r.check not in table))
    return with_verified(decision, (), records, signals, front)


def with_verified(decision: Decision, verified: Iterable[VerifiedRelease], records: Iterable,
                  signals: Mapping[str, tuple[plausibility.Signal, ...]] | None, front: LessonFront) -> Decision:
    """``decision`` stating the cuda-tile releases ``verified`` (``release_matrix.verified``, or
    ``cited_verified`` for a published lesson), with its doubts: the unsettled plausibility signals
    (``signals``, explained by ``front.plausibility``) of every record it then rests on
    (:attr:`Decision.rests_on`; a release's records are stated in the front matter too)."""
    stated = replace(decision, cuda_tile_verified=tuple(verified))
    return replace(stated, doubts=plausibility.doubts(trust.examined(records), stated.rests_on, signals or {},
                                                     front.plausibility))
