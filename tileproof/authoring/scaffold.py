"""``new-lesson``: a draft lesson, its program skeletons and their tolerance entries, in canonical form.

What it writes passes ``tileproof check``, ``lint-kernels``, ``compile`` and the tests unchanged:
the lesson is exactly what publish would render back (a draft, every result ``?``), the programs
are ``templates.PYTHON`` / ``templates.CPP`` (each hands its check's output and input over), each
check gets an entry in ``kernels/tolerances.py`` with its derivation written above it, and a
reference function in ``kernels/references.py``, from which tileproof recomputes the check itself.
Nothing existing is overwritten: a program, lesson or check name that exists already is one line
naming it.
"""

from __future__ import annotations

import ast
import keyword
import re
from pathlib import Path

from tileproof.authoring import templates
from tileproof.authoring.check import bound_text
from tileproof.lesson_text import dump_key, front_values, render_results_table
from tileproof.records import handover, lessons, python_source, store
from tileproof.records.errors import TileproofError
from tileproof.records.lessons import GATE_CHECK
from tileproof.records.models import (
    LESSON_VERSION,
    Hardware,
    LessonFront,
    LessonProgram,
    ResultRow,
)
from tileproof.records.tolerances import TABLE_FILE, load_table, table_node

LESSON_ID = re.compile(r"[a-z0-9][a-z0-9-]*\Z")
GATE_BOUND = "prints its capability line, exit 1"
GATE_HARDWARE = "cc < 8.0, e.g. a Tesla T4"


class ScaffoldError(TileproofError):
    """A name new-lesson cannot use (taken, or not an identifier)."""


def _name(kind: str, name: str) -> str:
    if not name.isidentifier() or keyword.iskeyword(name) or not name.islower():
        raise ScaffoldError(f"--{kind} {name}: not a lower-case identifier (fix: use letters, digits and _, "
                            f"e.g. {re.sub(r'[^a-z0-9_]', '_', name.lower()) or 'my_kernel'})")
    return name


def front(lesson_id: str, title: str, programs: list[str]) -> LessonFront:
    """The draft front matter: one check per program (named as the program), bounds from ``table``."""
    return LessonFront(lesson_version=LESSON_VERSION, id=lesson_id, title=title, status="draft",
                       programs=[LessonProgram(path=p, checks=[Path(p).stem]) for p in programs],
                       hardware=Hardware(), results=[])


def lesson_text(lesson_id: str, title: str, programs: list[str]) -> str:
    """The lesson in canonical draft form (``lesson_text.render`` of it gives it back)."""
    checks = [ResultRow(program=p, check=Path(p).stem, bound=bound_text(0.0, 0.0)) for p in programs]
    gates = [ResultRow(program=p, check=GATE_CHECK, bound=GATE_BOUND, optional=True, hardware=GATE_HARDWARE)
             for p in programs[:1]]
    draft = front(lesson_id, title, programs).model_copy(update={"results": checks + gates})
    values = front_values(draft)
    keys = [dump_key("lesson_version", LESSON_VERSION), dump_key("id", lesson_id), dump_key("title", title),
            f"# status, hardware and results are written only by `nox -s publish -- {lesson_id}`,\n"
            "# from run records. Never edit them by hand.\n",
            dump_key("status", "draft"),
            dump_key("programs", [p.model_dump(mode="json") for p in draft.programs]),
            dump_key("hardware", values["hardware"]), dump_key("results", values["results"])]
    begin, end = lessons.markers(lessons.RESULTS)
    body = (f"\n# {title}\n\nWhat the lesson teaches, and how each program shows it.\n\n"
            f"## Results\n\nFilled in by `nox -s publish -- {lesson_id}` from run records.\n\n"
            f"{begin}\n{render_results_table(draft.results)}{end}\n")
    return "---\n" + "".join(keys) + "---\n" + body


def with_entries(table_text: str, checks: list[str]) -> str:
    """``kernels/tolerances.py``'s text with one entry (and its derivation) per check added last."""
    node = table_node(TABLE_FILE, python_source.parse(table_text, str(TABLE_FILE)))  # what load_table reads
    assert node.end_lineno is not None, "ast.parse gives every node its position"
    lines = table_text.splitlines(keepends=True)
    close = node.end_lineno - 1  # the line holding the dict's closing brace
    if lines[close].strip() != "}":
        raise ScaffoldError(f"{TABLE_FILE}:{node.end_lineno}: TOLERANCES does not end with a '}}' line "
                            "(fix: put the closing brace on its own line)")
    new = "".join(templates.ENTRY.format(check=c) for c in checks)
    return "".join(lines[:close]) + new + "".join(lines[close:])


REFERENCES_FILE = Path(handover.REFERENCES_FILE)


def with_references(text: str, checks: list[str]) -> str:
    """``kernels/references.py``'s text with a reference function per check (before ``REFERENCES``) and its
    entry (last in ``REFERENCES``)."""
    try:
        tree = python_source.parse(text, str(REFERENCES_FILE))
    except SyntaxError as e:
        raise ScaffoldError(f"{REFERENCES_FILE}:{e.lineno or 1}: not valid Python ({e.msg}) (fix: correct the "
                            "syntax, or restore it from git)") from None
    node = next((n for n in tree.body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "REFERENCES" for t in n.targets) and isinstance(n.value, ast.Dict)), None)
    if node is None or node.end_lineno is None:
        raise ScaffoldError(f"{REFERENCES_FILE}: no REFERENCES = {{...}} dict (fix: restore it from git)")
    lines = text.splitlines(keepends=True)
    close = node.end_lineno - 1
    if lines[close].strip() != "}":
        raise ScaffoldError(f"{REFERENCES_FILE}:{node.end_lineno}: REFERENCES does not end with a '}}' line "
                            "(fix: put the closing brace on its own line)")
    functions = "".join(templates.REFERENCE_FUNCTION.format(check=c) for c in checks) + "\n\n"
    entries = "".join(templates.REFERENCE_ENTRY.format(check=c) for c in checks)
    start = node.lineno - 1
    return "".join(lines[:start]).rstrip("\n") + "\n" + functions + "".join(lines[start:close]) + entries + \
        "".join(lines[close:])


def scaffold(root: Path, lesson_id: str, python: str | None, cpp: str | None, title: str | None = None) -> list[str]:
    """Write the lesson, its programs and their tolerance entries; the paths written, in order."""
    root = Path(root)
    if not LESSON_ID.match(lesson_id):
        raise ScaffoldError(f"{lesson_id}: not a lesson id (fix: lower-case letters, digits and '-')")
    if python is None and cpp is None:
        python = lesson_id.replace("-", "_")
    named = [(f"kernels/{_name('python', python)}.py", templates.PYTHON) if python else None,
             (f"cpp/{_name('cpp', cpp)}.cu", templates.CPP) if cpp else None]
    files = [f for f in named if f]
    lesson_path = f"{lessons.LESSONS}/{lesson_id}.md"
    for rel in [lesson_path, *(p for p, _t in files)]:
        if (root / rel).exists():
            raise ScaffoldError(f"{rel}: exists already (fix: choose another name; nothing was written)")
    checks = list(dict.fromkeys(Path(p).stem for p, _t in files))
    taken = [c for c in checks if c in load_table(root)]
    if taken:
        raise ScaffoldError(f"{TABLE_FILE}: check '{taken[0]}' has an entry already (fix: name the program "
                            "differently; nothing was written)")
    title = title or lesson_id.replace("-", " ").capitalize()
    text = lesson_text(lesson_id, title, [p for p, _t in files])
    table_path = root / TABLE_FILE
    table_text = with_entries(table_path.read_text(encoding="utf-8"), checks)
    refs_path = root / REFERENCES_FILE
    refs_text = with_references(refs_path.read_text(encoding="utf-8") if refs_path.is_file() else templates.REFERENCES,
                                checks)
    for rel, template in files:
        name = Path(rel).stem
        store.write_atomic(root / rel, template.format(name=name, check=name, title=title, length=98_765, tile=1024))
    store.write_atomic(table_path, table_text)
    store.write_atomic(refs_path, refs_text)
    store.write_atomic(root / lesson_path, text)
    return [p for p, _t in files] + [TABLE_FILE.as_posix(), REFERENCES_FILE.as_posix(), lesson_path]
