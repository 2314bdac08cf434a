"""Published lessons re-derived: the hardware block, results, verified cuda-tile releases
(``cuda_tile_verified``) and compile-derived tables (res-usage) a published lesson shows are
recomputed from the records the publish decision
accepts, and every difference is named.

The derivation is the decision's own ``Decision.published_front`` and the text is
``records.lessons.render``'s: exactly what ``publish`` writes, so a lesson published by
tileproof re-derives to itself, and a hand edit (``NVIDIA B200, cc 10.0``) does not.
A published lesson the decision no longer accepts has nothing to re-derive; the
``lesson-published-without-evidence`` rule names it instead. A lesson that states no verified
cuda-tile release (published before the release axis, or without Python programs: the key is
absent) claims nothing there, so that part is not compared until it is republished
(``unstated_releases``); every release it does list must be what the records give.
"""

from __future__ import annotations

from tileproof.judge.audit.registry import rule
from tileproof.judge.audit.result import Issue
from tileproof.judge.gate import Decision
from tileproof.judge.releases import ReleaseKey
from tileproof.records import lessons
from tileproof.records.errors import RecordError
from tileproof.records.models import Hardware, LessonFront

REDERIVE = rule("lesson-rederive", "a published lesson's hardware block, results (front matter or body table), "
                                   "verified cuda-tile releases or compile-derived tables differ from what the "
                                   "publish decision derives from the records it accepts")
FIX = "tileproof publish {id} --republish: it rewrites the lesson with what the records show"


def derived_front(front: LessonFront, decision: Decision) -> LessonFront | None:
    """What publish would write for this lesson today; None when it is not published or not publishable."""
    if front.status != "published" or not decision.publishable:
        return None
    derived = decision.published_front(front)
    if not front.cuda_tile_verified:  # states no release: nothing of it to re-derive (see the module's text)
        derived = derived.model_copy(update={"cuda_tile_verified": []})
    return derived


def unstated_releases(front: LessonFront, decision: Decision) -> bool:
    """A published lesson that states no verified cuda-tile release where its records give some: what
    ``publish --republish`` adds."""
    return front.status == "published" and not front.cuda_tile_verified and bool(decision.cuda_tile_verified)


def differences(lesson: lessons.Lesson, derived: LessonFront, blocks: dict[str, str] | None = None) -> list[str]:
    """Each field, row or table line where the lesson differs from ``derived`` and the compile-derived
    ``blocks`` (``Decision.published_blocks``: marker name → table): what it says, what is derived."""
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
    wanted = lessons.render_results_table(derived.results).strip("\n").splitlines()
    for n, (have, want) in enumerate(zip(table, wanted, strict=False), start=1):
        if have != want:
            out.append(f"body results table line {n}: the lesson says {have!r}, the records give {want!r}")
    if len(table) != len(wanted):
        out.append(f"body results table: {len(table)} lines, the records give {len(wanted)}")
    for name, content in (blocks or {}).items():
        out += block_differences(lesson, name, content)
    if not out and lessons.render(lesson, derived, blocks) != lesson.text:
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


def rederive_issues(lesson: lessons.Lesson, decision: Decision) -> list[Issue]:
    """One finding per difference between the published lesson and its re-derivation."""
    derived = derived_front(lesson.front, decision)
    if derived is None:
        return []
    fix = FIX.format(id=lesson.front.id)
    return [(REDERIVE, f"{d} (fix: {fix})") for d in differences(lesson, derived, decision.published_blocks())]
