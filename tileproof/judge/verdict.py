"""One verdict per lesson: the publish decision, the history check and the re-derivation, judged once.

``gather.tree.Tree.verdict`` gathers the inputs and calls :func:`judge`; ``status``, ``publish`` (``--dry-run``
too) and the audit all print from the :class:`LessonVerdict` it returns, so they cannot disagree: ``status`` says
ready exactly when ``publish --dry-run`` exits 0 (:attr:`LessonVerdict.ready`), and the audit's findings against
a lesson are :meth:`LessonVerdict.findings`. The rule ids below are the audit's (``judge.audit.rules`` registers
them). The rules (a draft on the newest evidence, a published lesson on the records it cites, what keeps every
lesson from being ready): docs/records-and-staleness.md, "When a published lesson stays valid" and "One verdict,
three commands".
"""

from __future__ import annotations

from dataclasses import dataclass

from tileproof import lesson_text
from tileproof.judge.gate import Decision
from tileproof.judge.lesson_state import LessonState
from tileproof.judge.releases import ReleaseKey
from tileproof.records import lessons
from tileproof.records.errors import RecordError
from tileproof.records.findings import Finding
from tileproof.records.history_check import HistoryReport
from tileproof.records.models import Hardware, LessonFront

WITHOUT_EVIDENCE = "lesson-published-without-evidence"
"""Rule id: a published lesson whose cited records no longer hold (or a newer failure overturns one)."""
REDERIVE = "lesson-rederive"
"""Rule id: a published lesson that differs from what its cited records give."""
SHOWN = 2
"""Blockers named in a without-evidence finding (the rest counted)."""

Issue = tuple[str, str]
"""(rule id, reason)."""


def republish_fix(lesson_id: str) -> str:
    return f"tileproof publish {lesson_id} --republish: it rewrites the lesson with what the records show"


@dataclass(frozen=True)
class LessonVerdict:
    """Everything said about one lesson, decided once."""

    lesson: lessons.Lesson
    decision: Decision
    """What the lesson stands on: for a published lesson the records it cites, for a draft the newest evidence."""
    fresh: Decision
    """The newest evidence: what ``publish`` (or ``--republish``) would write."""
    history: HistoryReport
    """The tree's git-history check (one per tree)."""
    rederived: tuple[str, ...] = ()
    """For a published lesson its cited records still back: each place it differs from what they give."""
    distrust: tuple[Finding, ...] = ()
    """A finding for each way the runner registry's history does not hold from the trust root
    (``judge.trust.trust_root``): while there is one, no lesson is ready or republishable."""
    refused: tuple[Finding, ...] = ()
    """A finding for each input the audit refuses by what it is (``gather.inputs``: a link, a
    FIFO or device, a file over its cap under evidence/ or lessons/), read by the decision or not: while
    there is one, no lesson is ready or republishable (``publish`` exits 2 on it)."""

    @property
    def published(self) -> bool:
        return self.lesson.front.status == "published"

    @property
    def history_problems(self) -> list[Finding]:
        """Each once-committed record or transcript now missing, changed or not a regular file (a link, FIFO,
        device or folder the reader never follows or opens): the history check's findings."""
        return list(self.history.findings)

    @property
    def tree_problems(self) -> list[Finding]:
        """A finding for everything about the tree that keeps every lesson from being ready:
        refused inputs, the trust root's findings, history findings (in the order ``publish`` names them)."""
        return [*self.refused, *self.distrust, *self.history_problems]

    @property
    def valid(self) -> bool:
        """A published lesson that is true: its cited records hold and it shows exactly what they give."""
        return self.published and self.decision.publishable and not self.rederived

    @property
    def ready(self) -> bool:
        """What ``publish --dry-run`` exits 0 on: no input is refused, the trust root holds, nothing once
        committed is missing, changed or replaced, and the draft may be published (its newest evidence holds)
        or the published lesson is valid."""
        if self.tree_problems:
            return False
        return self.valid if self.published else self.fresh.publishable

    @property
    def state(self) -> LessonState:
        """Where the lesson stands, in the one wording ``status`` and ``publish`` print (``judge.lesson_state``):
        the tree's problems first (refused inputs, the trust root, history), then the draft or published lesson;
        its ``ready`` is exactly :attr:`ready`."""
        if self.refused:
            return LessonState.INPUT_REFUSED
        if self.distrust:
            return LessonState.TRUST_BROKEN
        if self.history_problems:
            return LessonState.HISTORY_BROKEN
        if not self.published:
            return LessonState.READY if self.fresh.publishable else LessonState.DRAFT
        if self.valid:
            return LessonState.VALID
        return LessonState.DIFFERS if self.decision.publishable else LessonState.WITHOUT_EVIDENCE

    @property
    def republishable(self) -> bool:
        """What ``publish --republish`` writes on: the newest evidence holds (and history is intact)."""
        return not self.tree_problems and self.fresh.publishable

    @property
    def refreshable(self) -> bool:
        """A valid published lesson that the newest evidence would write differently: newer evidence
        exists (a note, never a finding: republish to refresh). A lesson that states no verified cuda-tile
        release (published before the release axis) is not refreshable for that alone (``states_releases``)."""
        if not (self.valid and self.fresh.publishable):
            return False
        fresh = self.fresh.published_front(self.lesson.front)
        if not self.lesson.front.cuda_tile_verified:
            fresh = fresh.model_copy(update={"cuda_tile_verified": []})
        return lesson_text.render(self.lesson, fresh, self.fresh.published_blocks()) != self.lesson.text

    @property
    def states_releases(self) -> bool:
        """A valid published lesson that states no verified cuda-tile release where the newest evidence gives
        some: ``publish --republish`` adds them (no note: the lesson claims nothing false)."""
        return (self.valid and self.fresh.publishable and not self.lesson.front.cuda_tile_verified
                and bool(self.fresh.cuda_tile_verified))

    def findings(self) -> list[Issue]:
        """The audit's findings against the lesson's file: none for a draft."""
        if not self.published:
            return []
        if not self.decision.publishable:
            blockers = self.decision.blockers
            more = f" (+{len(blockers) - SHOWN} more)" if len(blockers) > SHOWN else ""
            return [(WITHOUT_EVIDENCE, "published, but the publish decision lacks "
                     + "; ".join(str(b) for b in blockers[:SHOWN]) + more)]
        fix = republish_fix(self.lesson.id)
        return [(REDERIVE, f"{d} (fix: {fix})") for d in self.rederived]

    def note(self) -> str | None:
        """``newer evidence: republish to refresh (...)`` where that applies; for a valid published lesson whose
        performance claims newer bench records agree with only within their noise (``ClaimDecision.newer``),
        ``newer evidence within noise: ...``; else None. Neither is a finding."""
        if self.refreshable:
            return f"newer evidence: republish to refresh (nox -s publish -- {self.lesson.id} --republish)"
        within = [f"perf claim {c.claim.id}: {n}" for c in self.decision.perf for n in c.newer] if self.valid else []
        if within:
            return ("newer evidence within noise: " + "; ".join(within) + " (the claims stand on the records that "
                    "support them; a newer bench record that supports them with margin refreshes them)")
        return None


def judge(lesson: lessons.Lesson, fresh: Decision, cited: Decision | None, history: HistoryReport,
          distrust: tuple[Finding, ...] = (), refused: tuple[Finding, ...] = ()) -> LessonVerdict:
    """The verdict from the decisions: ``fresh`` over the newest evidence, ``cited`` over the records a
    published lesson cites (None for a draft); ``distrust``: the trust root's findings for the tree;
    ``refused``: the inputs refused by what they are."""
    if lesson.front.status != "published" or cited is None:
        return LessonVerdict(lesson, fresh, fresh, history, distrust=distrust, refused=refused)
    rederived = tuple(differences(lesson, cited.published_front(lesson.front), cited.published_blocks())) \
        if cited.publishable else ()
    return LessonVerdict(lesson, cited, fresh, history, rederived, distrust, refused)


# --- re-derivation: the lesson against what publish would write from its records ---------------


def differences(lesson: lessons.Lesson, derived: LessonFront, blocks: dict[str, str] | None = None) -> list[str]:
    """Each field, row or table line where the lesson differs from ``derived`` and the compile-derived
    ``blocks`` (``Decision.published_blocks``: marker name → table): what it says, what is derived.

    The derivation is the decision's own ``Decision.published_front`` and the text is
    ``lesson_text.render``'s: exactly what ``publish`` writes, so a lesson published by tileproof
    re-derives to itself, and a hand edit (``NVIDIA B200, cc 10.0``) does not."""
    front, out = lesson.front, []
    for name in Hardware.model_fields:
        have, want = getattr(front.hardware, name), getattr(derived.hardware, name)
        if have != want:
            out.append(f"hardware.{name}: the lesson says {have!r}, the records give {want!r}")
    if len(front.results) != len(derived.results):
        out.append(f"results: {len(front.results)} rows, the decision has {len(derived.results)}")
    for i, (have_row, want_row) in enumerate(zip(front.results, derived.results, strict=False)):
        for name in ("result", "run_id"):
            have, want = getattr(have_row, name), getattr(want_row, name)
            if have != want:
                out.append(f"results[{i}].{name} ({have_row.program} {have_row.check}): the lesson says {have!r}, "
                           f"the records give {want!r}")
    if front.cuda_tile_verified != derived.cuda_tile_verified:
        out.append(f"cuda_tile_verified: the lesson says {releases_text(front)}, the records give "
                   f"{releases_text(derived)}")
    try:
        table = lessons.block_text(lesson.shown, lesson.body, lessons.RESULTS).strip("\n").splitlines()
    except RecordError as e:
        return out + [f"body: {e.problem}"]
    wanted = lesson_text.render_results_table(derived.results).strip("\n").splitlines()
    for n, (have, want) in enumerate(zip(table, wanted, strict=False), start=1):
        if have != want:
            out.append(f"body results table line {n}: the lesson says {have!r}, the records give {want!r}")
    if len(table) != len(wanted):
        out.append(f"body results table: {len(table)} lines, the records give {len(wanted)}")
    for name, content in (blocks or {}).items():
        out += block_differences(lesson, name, content)
    if not out and lesson_text.render(lesson, derived, blocks) != lesson.text:
        out.append("front matter: status, hardware or results are not written as publish writes them")
    return out


def releases_text(front: LessonFront) -> str:
    """``1.4.0* (runs a, b), 1.7.0 (runs c, d)`` (``*``: tileiras outside its range), or ``none``."""
    return ", ".join(f"{ReleaseKey(v.cuda_tile, v.tileiras_in_range)} (runs {', '.join(v.run_ids)})"
                     for v in front.cuda_tile_verified) or "none"


def block_differences(lesson: lessons.Lesson, name: str, content: str) -> list[str]:
    """Each line where the body's ``name`` table (e.g. res-usage) differs from ``content``."""
    try:
        table = lessons.block_text(lesson.shown, lesson.body, name).strip("\n").splitlines()
    except RecordError as e:
        return [f"body: {e.problem}"]
    wanted = content.strip("\n").splitlines()
    out = [f"body {name} table line {n}: the lesson says {have!r}, the records give {want!r}"
           for n, (have, want) in enumerate(zip(table, wanted, strict=False), start=1) if have != want]
    if len(table) != len(wanted):
        out.append(f"body {name} table: {len(table)} lines, the records give {len(wanted)}")
    return out
