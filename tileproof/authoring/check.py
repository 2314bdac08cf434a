"""The lesson check: everything about a lesson that can be known without a GPU, in one pass.

Every lesson parses and is in canonical form (what publish would write back is what is on disk);
its programs exist; every check it names has an entry in the tolerance table; every results row's
bound text shows the table's numbers; every claims file is valid; every generated file is current.
It also scans every file under evidence/ with today's redaction rules (``records.redact``): a
transcript written under fewer rules may hold a credential verbatim (one problem per file and rule,
never the value; a committed transcript is never rewritten).
One ``records.findings.Finding`` per problem, by rule (:data:`RULES`), each with its fix. ``tileproof check``
prints them; ``nox -s tests`` runs it; the tests call ``problems`` on the repository and on a scaffolded lesson.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from tileproof import lesson_text
from tileproof.authoring import generated
from tileproof.claims import spec as claims_spec
from tileproof.gather.audit_scan import walk
from tileproof.records import lessons, store
from tileproof.records.errors import InputRefused, TileproofError
from tileproof.records.findings import Finding
from tileproof.records.redact import redact
from tileproof.records.safe_read import read_evidence
from tileproof.records.tolerances import TABLE_FILE, Table, load_table

BOUND = re.compile(r"rtol (?P<rtol>[0-9.e+-]+)\b.*?atol (?P<atol>[0-9.e+-]+)")
"""How a results row's bound text names its numbers (``rtol 1e-4, atol 1e-3``)."""
BOUND_TOLERANCE = 0.02
"""A bound's text may round the table's number to about two significant digits (``6.1e-5``)."""


RULES: dict[str, str] = {
    "lesson-front": "a lesson's front matter cannot be read (the audit's rule of the same id)",
    "lesson-not-canonical": "a lesson is not in the form publish writes back (its status, hardware, results keys or "
                            "the table between the results markers)",
    "lesson-unrenderable": "a lesson's publish-owned parts cannot be rendered (a marker or a key is missing)",
    "program-missing": "a program a lesson lists does not exist",
    "tolerance-entry-missing": "a check a lesson names has no entry in the tolerance table",
    "bound-mismatch": "a results row's bound does not show the tolerance table's rtol and atol for its check",
    "tolerance-table": "the tolerance table cannot be read",
    "claims-file": "a claims file is not valid (the audit's rule of the same id)",
    "generated-stale": "a generated file differs from what its source renders",
    "evidence-secret": "a file under evidence/ holds values today's redaction rules replace (written under fewer)",
}
"""The lesson check's rule ids → what each catches; each finding names one."""


def bound_text(rtol: float, atol: float) -> str:
    """A results row's bound as the scaffold writes it; ``bound_matches`` reads it back."""
    return f"float64 reference, rtol {rtol:.2g}, atol {atol:.2g}"


def bound_matches(text: str, rtol: float, atol: float) -> bool:
    """True when ``text`` names ``rtol`` and ``atol`` (to ``BOUND_TOLERANCE``)."""
    m = BOUND.search(text)
    if m is None:
        return False
    try:
        got = float(m["rtol"]), float(m["atol"])
    except ValueError:
        return False
    return all(math.isclose(g, w, rel_tol=BOUND_TOLERANCE) for g, w in zip(got, (rtol, atol), strict=True))


def _lesson_problems(root: Path, lesson: lessons.Lesson, table: Table | None) -> list[Finding]:
    shown = f"{lessons.LESSONS}/{lesson.path.name}"
    out: list[Finding] = []
    try:
        if lesson_text.render(lesson, lesson.front) != lesson.text:
            out.append(Finding(shown, "lesson-not-canonical",
                               "not in canonical form: publish would rewrite its status, hardware, results keys or "
                               "the table between <!-- results:begin/end -->",
                               "write those parts exactly as `tileproof new-lesson` does (one key each, the "
                               "results table rendered from the front matter's results)"))
    except TileproofError as e:
        out.append(Finding(shown, "lesson-unrenderable", f"cannot be rendered: {e}",
                           "restore the results markers and the keys"))
    for field, path in lessons.missing_programs(root, lesson):
        out.append(Finding(shown, "program-missing", f"{field}: {path} does not exist",
                           f"write {path} or fix the path"))
    if table is None:
        return out
    checks = dict.fromkeys(c for p in lesson.front.programs for c in p.checks)
    for name in checks:
        if name not in table:
            out.append(Finding(shown, "tolerance-entry-missing", f"check '{name}' has no entry in {TABLE_FILE}",
                               f"add \"{name}\": Tolerance(rtol=..., atol=...) with its derivation to {TABLE_FILE}"))
    for i, row in enumerate(lesson.front.results):
        if row.optional or row.check not in table:
            continue
        rtol, atol = table[row.check]
        if not bound_matches(row.bound, rtol, atol):
            out.append(Finding(shown, "bound-mismatch", f"results.{i}.bound: '{row.bound}' does not show the table's "
                                                        f"rtol {rtol:g}, atol {atol:g} for '{row.check}'",
                               f"write bound: '{bound_text(rtol, atol)}'"))
    return out


def problems(root: Path) -> list[Finding]:
    """Every problem of the tree's lessons, claims files and generated files."""
    root = Path(root)
    out: list[Finding] = []
    try:
        table: Table | None = load_table(root)
    except TileproofError as e:
        table = None
        out.append(Finding(TABLE_FILE.as_posix(), "tolerance-table", str(e), "fix the table"))
    for lesson_id in lessons.lesson_ids(root):
        try:
            lesson = lessons.load(root, lesson_id)
        except TileproofError as e:
            out.append(Finding(f"{lessons.LESSONS}/{lesson_id}.md", "lesson-front", str(e), "fix the front matter"))
            continue
        out += _lesson_problems(root, lesson, table)
    for path in claims_spec.claims_files(root):
        try:
            claims_spec.load_file(path, store.rel(root, path))
        except TileproofError as e:
            out.append(Finding(store.rel(root, path), "claims-file", str(e), "fix the claims file"))
    if table is not None:
        out += [Finding(p.as_posix(), "generated-stale", "differs from what its source renders", generated.COMMAND)
                for p in generated.stale(root)]
    return out + evidence_secrets(root)


SECRET_FIX = ("revoke the credential it names (committed transcripts are never rewritten: the bytes stay in "
              "git history); a false positive: narrow the rule in tileproof/records/redact.py, with a test")


def evidence_secrets(root: Path) -> list[Finding]:
    """Every file under evidence/ that today's redaction rules would still change: per file and rule,
    how many values they would replace. Files the safe reader refuses are the audit's findings."""
    out: list[Finding] = []
    for rel in walk(str(root), store.EVIDENCE, {}):
        try:
            _, counts = redact(read_evidence(root, rel))
        except InputRefused:
            continue  # a link, FIFO or oversized file: the audit's input-* finding
        out += [Finding(rel, "evidence-secret", f"{n} value(s) the redaction rule {rule} replaces today are stored "
                                                f"verbatim (written under fewer rules)", SECRET_FIX)
                for rule, n in counts.items()]
    return out
