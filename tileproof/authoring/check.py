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

import ast
import difflib
import math
import re
import sys
from pathlib import Path

from pydantic import ValidationError

from tileproof import lesson_text
from tileproof.authoring import generated
from tileproof.claims import spec as claims_spec
from tileproof.gather import evidence_values
from tileproof.records import lessons, python_source, store
from tileproof.records.errors import RecordError, TileproofError
from tileproof.records.findings import Finding
from tileproof.records.models import LessonFront, ResultRow
from tileproof.records.redact import redact, watching
from tileproof.records.safe_read import parse_yaml
from tileproof.records.tolerances import TABLE_FILE, Table, load_table
from tileproof.toolchain.uses import reached

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
    "program-import-missing": "a Python program or its helper imports a module that is neither a file beside it nor "
                              "in the programs' environment (the standard library, cuda-tile, cupy, numpy)",
    "evidence-secret": "a file under evidence/ holds values today's redaction rules replace (written under fewer)",
}
"""The lesson check's rule ids → what each catches; each finding names one."""
PROGRAM_RUNTIME = ("cuda", "cupy", "numpy")
"""The modules a Python program may import besides the standard library and the files beside it: what the run
environment installs for programs (tileproof's ``toolchain`` and ``gpu`` extras: cuda-tile, cupy, numpy). Named
here, not found in this interpreter, so the check says the same in every environment (``nox -s check`` runs
without the toolchain)."""


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
        canonical = lesson_text.render(lesson, lesson.front)
        if canonical != lesson.text:
            line, has, writes = _rewrite(lesson.text, canonical)[0]
            out.append(Finding(shown, "lesson-not-canonical",
                               f"not in canonical form: publish would rewrite line {line}, {has}",
                               f"write {writes} (publish owns status, hardware, results and the table between "
                               f"<!-- results:begin/end -->)", line=line, col=1))
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
            rows = list(lesson.front.results)
            rows[i] = row.model_copy(update={"bound": bound_text(rtol, atol)})
            out.append(Finding(shown, "bound-mismatch", f"results.{i}.bound: '{row.bound}' does not show the table's "
                                                        f"rtol {rtol:g}, atol {atol:g} for '{row.check}'",
                               _writes(lesson, rows)))
    return out


def _imports(path: Path) -> list[tuple[int, int, str]]:
    """(line, column, top-level module) of each absolute import in a Python file; nothing when it does not parse
    (compile and lint-kernels say why)."""
    try:
        tree = python_source.parse(path.read_text(encoding="utf-8"), str(path))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, node.col_offset + 1, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.col_offset + 1, node.module.split(".")[0]))
    return out


def missing_imports(root: Path, loaded: list[lessons.Lesson]) -> list[Finding]:
    """Each import of the lessons' Python programs (and the helpers they import) that names neither a module beside
    the file nor one of the programs' environment (``PROGRAM_RUNTIME``, the standard library): the program would
    stop at it on the GPU, and compile at its first export."""
    root = Path(root).resolve()
    out: list[Finding] = []
    programs = [root / p.path for lesson in loaded for p in lesson.front.programs if p.path.endswith(".py")]
    files = dict.fromkeys(f for p in programs if p.is_file() for f in [p.resolve(), *reached(p)])
    known = {*PROGRAM_RUNTIME, *sys.stdlib_module_names}
    for file in files:
        if not file.is_relative_to(root):
            continue
        beside = sorted({p.stem for p in file.parent.glob("*.py")}
                        | {p.parent.name for p in file.parent.glob("*/__init__.py")})
        for line, col, name in _imports(file):
            if name in known or name in beside:
                continue
            shown = file.relative_to(root).as_posix()
            near = difflib.get_close_matches(name, beside, n=1)
            fix = (f"did you mean '{near[0]}'? " if near else "") + \
                f"write {Path(shown).parent.as_posix()}/{name}.py beside it, or import what the environment has"
            out.append(Finding(shown, "program-import-missing", f"imports '{name}', which is neither a file beside it "
                               f"nor in the programs' environment (the standard library, {', '.join(PROGRAM_RUNTIME)})",
                               fix, line=line, col=col))
    return out


def _quoted(lines: list[str]) -> str:
    return " ⏎ ".join(f"`{line.rstrip(chr(10)).rstrip(chr(13))}`" for line in lines)


def _rewrite(text: str, wanted: str) -> list[tuple[int, str, str]]:
    """Where ``text`` differs from ``wanted``, line by line: (1-based line of ``text``, what it reads there, what to
    write) for each changed place, in order."""
    have, want = text.splitlines(keepends=True), wanted.splitlines(keepends=True)
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, have, want, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        reads = f"which reads {_quoted(have[i1:i2])}" if i1 < i2 else "where a line is missing"
        writes = _quoted(want[j1:j2])
        where = f"at line {i1 + 1}" if i1 < i2 else f"before line {i1 + 1}"
        out.append((i1 + 1, reads, f"{writes} {where}" if j1 < j2 else f"nothing {where} (delete it)"))
    return out


def _writes(lesson: lessons.Lesson, rows: list[ResultRow]) -> str:
    """The fix for results rows that should read ``rows``: the lines of the lesson to write (the front matter's
    rows and the results table, as publish renders them)."""
    try:
        wanted = lesson_text.render(lesson, lesson.front.model_copy(update={"results": rows}))
    except TileproofError:
        return "write the results rows and the table as `tileproof new-lesson` does"
    return "write " + "; ".join(writes for _line, _has, writes in _rewrite(lesson.text, wanted))


def _missing_rows(root: Path, lesson_id: str, table: Table | None) -> str | None:
    """For a lesson whose front matter lacks results rows for a program's checks (a program just added to
    ``programs``): the rows to write, in the front matter and the results table as publish renders them, each
    bound from the tolerance table; None when the lesson has another problem or none of these."""
    path = lessons.find(root, lesson_id)
    shown = f"{lessons.LESSONS}/{path.name}"
    try:
        front_text, _body = lessons.split(shown, path.read_text(encoding="utf-8"))
        front = LessonFront.model_validate(parse_yaml(front_text, shown))
    except (OSError, UnicodeDecodeError, TileproofError, ValidationError, ValueError):
        return None
    have = {(r.program, r.check) for r in front.results}
    new = []
    for program in front.programs:
        for check in program.checks:
            if (program.path, check) not in have:
                tol = table.get(check) if table is not None else None
                new.append(ResultRow(program=program.path, check=check, result=lessons.UNKNOWN, run_id=None,
                                     bound=bound_text(*tol) if tol is not None else "float64 reference, rtol ?, "
                                                                                    "atol ?"))
    if not new:
        return None
    yaml_rows = lesson_text.dump_key("results", lesson_text.front_values(
        front.model_copy(update={"results": new}))["results"]).splitlines()[1:]
    table_rows = lesson_text.render_results_table(new).splitlines()[2:]
    return (f"add to the front matter's results: {_quoted(yaml_rows)}; and to the table between "
            f"<!-- results:begin/end -->: {_quoted(table_rows)}")


def problems(root: Path, notes: list[str] | None = None) -> list[Finding]:
    """Every problem of the tree's lessons, claims files and generated files. ``notes``: where given, what the
    verified-file index had to say while the transcripts were read is added to it (``evidence_secrets``)."""
    root = Path(root)
    out: list[Finding] = []
    try:
        table: Table | None = load_table(root)
    except TileproofError as e:
        table = None
        out.append(Finding(TABLE_FILE.as_posix(), "tolerance-table", str(e), "fix the table"))
    loaded: list[lessons.Lesson] = []
    for lesson_id in lessons.lesson_ids(root):
        try:
            lesson = lessons.load(root, lesson_id)
        except RecordError as e:
            rows = _missing_rows(root, lesson_id, table) if e.field == "results" else None
            out.append(Finding(f"{lessons.LESSONS}/{lesson_id}.md", "lesson-front",
                               f"{e.field}: {e.problem}" if e.field else e.problem, rows or e.fix))
            continue
        except TileproofError as e:
            out.append(Finding(f"{lessons.LESSONS}/{lesson_id}.md", "lesson-front", str(e), "fix the front matter"))
            continue
        loaded.append(lesson)
        out += _lesson_problems(root, lesson, table)
    out += missing_imports(root, loaded)
    for path in claims_spec.claims_files(root):
        try:
            claims_spec.load_file(path, store.rel(root, path))
        except TileproofError as e:
            out.append(Finding(store.rel(root, path), "claims-file", str(e), "fix the claims file"))
    if table is not None:
        out += [Finding(p.as_posix(), "generated-stale", "differs from what its source renders", generated.COMMAND)
                for p in generated.stale(root)]
    return out + evidence_secrets(root, notes)


SECRET_FIX = ("revoke the credential it names (committed transcripts are never rewritten: the bytes stay in "
              "git history); a false positive: narrow the rule in tileproof/records/redact.py, with a test")


REDACTION_COUNTS = "redaction-counts"
"""What the verified-file index keeps of a transcript for the check: how many values each rule replaces in it."""


def redaction_counts(data: bytes) -> dict[str, int]:
    """How many values each of today's redaction rules replaces in ``data`` (rules that replace none left out)."""
    return {str(rule): n for rule, n in redact(data)[1].items()}


def evidence_secrets(root: Path, notes: list[str] | None = None) -> list[Finding]:
    """Every file under evidence/ that today's redaction rules would still change: per file and rule,
    how many values they would replace. Files the safe reader refuses are the audit's findings.

    The counts of a transcript are kept by the digest of its bytes under this code's key (``gather.evidence_values``):
    a file unchanged since a check is not read again; a changed rule is a change of tileproof's source, which starts
    the index afresh. While this process watches a signing key (``redact.watching``: what ``redact`` replaces then
    depends on the process), every file is read and nothing is kept. ``notes``: as ``problems``."""
    out: list[Finding] = []
    counted = evidence_values.each_evidence_file(root, REDACTION_COUNTS, redaction_counts, kept=not watching(),
                                                 notes=notes)
    for rel, counts in counted:
        out += [Finding(rel, "evidence-secret", f"{n} value(s) the redaction rule {rule} replaces today are stored "
                                                f"verbatim (written under fewer rules)", SECRET_FIX)
                for rule, n in counts.items()]
    return out
