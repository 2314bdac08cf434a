"""Lessons on disk: ``lessons/<id>.md`` = YAML front matter + Markdown body, found, read and validated.

The front matter is validated into ``models.LessonFront``; errors name the file
and the field, in one line. Only ``publish`` writes a lesson: the text it writes is
``lesson_text.render``'s (the publish-owned keys and the marked blocks; every other
byte stays as the author wrote it), and :func:`write` puts it in place through a temp
file in ``lessons/`` that replaces the lesson in one ``os.replace``: a lesson is never
half-written. :func:`cited` reads back the records a published lesson names besides
its rows; :func:`block_text` the text between a pair of markers.

``program_list_digest`` is what a run record stores in ``lesson_programs``; a
lesson whose program list changed after a run makes that run stale.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import ValidationError

from tileproof.records import store
from tileproof.records.errors import InputRefused, RecordError
from tileproof.records.models import LessonFront
from tileproof.records.safe_read import parse_yaml, read_text

LESSONS = "lessons"
RESULTS = "results"
"""Marker name of the results table: ``<!-- results:begin -->`` ... ``<!-- results:end -->``."""
RES_USAGE = "res-usage"
"""Marker name of a REG/SHARED table filled from a compile record."""
PROGRAM_KINDS: dict[str, tuple[str, ...]] = {"kernels": (".py", ".jl"), "cpp": (".cu",)}
"""Each top-level program folder and the program suffixes it holds (``.jl``: cuTile.jl, run by julia)."""
PROGRAM_DIRS = tuple(PROGRAM_KINDS)
PROGRAM_SUFFIXES = tuple(s for suffixes in PROGRAM_KINDS.values() for s in suffixes)
GATE_CHECK = "gate"
"""Check name of a capability-gate row (a program refusing a GPU below cc 8.0)."""
UNKNOWN = "?"
_FENCE = "---"


@dataclass(frozen=True)
class Lesson:
    """A parsed lesson and the exact text it came from."""

    path: Path
    text: str
    front_text: str
    """The YAML between the two ``---`` lines, with its final newline."""
    body: str
    """Everything after the closing ``---`` line."""
    front: LessonFront
    shown: str = ""
    """The path as errors name it (``lessons/<id>.md``)."""

    @property
    def id(self) -> str:
        return self.front.id


# --- finding -------------------------------------------------------------------------


def lesson_ids(root: Path) -> list[str]:
    folder = Path(root) / LESSONS
    return sorted(p.stem for p in folder.glob("*.md")) if folder.is_dir() else []


def find(root: Path, lesson_id: str) -> Path:
    """``lessons/<id>.md``; an unknown id raises one line with the closest id."""
    name = PurePosixPath(lesson_id.replace("\\", "/")).name
    name = name[:-3] if name.endswith(".md") else name
    path = Path(root) / LESSONS / f"{name}.md"
    if name and path.is_file():
        return path
    ids = lesson_ids(root)
    close = difflib.get_close_matches(name, ids, n=1, cutoff=0.5)
    if close:
        problem, fix = f"no such lesson; did you mean '{close[0]}'?", f"use '{close[0]}'"
    else:
        problem = "no such lesson"
        fix = f"use one of: {', '.join(ids)}" if ids else f"write {LESSONS}/<id>.md first"
    raise RecordError(f"{LESSONS}/{name}.md", "", problem, fix)


# --- reading -------------------------------------------------------------------------


def split(path: Path | str, text: str) -> tuple[str, str]:
    """(front-matter YAML, body); the file must open with a ``---`` line."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != _FENCE:
        raise RecordError(path, "line 1", "no front matter (the file must start with a '---' line)",
                          "put the YAML front matter between two '---' lines at the top")
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n") == _FENCE:
            return "".join(lines[1:i]), "".join(lines[i + 1:])
    raise RecordError(path, "line 1", "front matter is never closed", "end it with a '---' line")


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "front matter"


def parse(path: Path | str, text: str) -> Lesson:
    """Parse and validate one lesson; every problem is one line naming the field."""
    front_text, body = split(path, text)
    try:
        raw = parse_yaml(front_text, str(path))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 2}" if mark is not None else "front matter"
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        context, start = getattr(e, "context", None), getattr(e, "context_mark", None)
        if context and start is not None:
            what = f"{context} from line {start.line + 2}: {what}"
        raise RecordError(path, where, f"front matter is not valid YAML ({what})", "fix the YAML") from None
    if not isinstance(raw, dict):
        raise RecordError(path, "front matter", "expected a mapping of fields", "see schema/lesson.v1.schema.json")
    try:
        front = LessonFront.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise RecordError(path, _field(err["loc"]), err["msg"], "see schema/lesson.v1.schema.json") from None
    problem = next(_problems(Path(path), front), None)
    if problem:
        raise RecordError(path, *problem)
    return Lesson(path=Path(path), text=text, front_text=front_text, body=body, front=front, shown=str(path))


def _problems(path: Path, front: LessonFront):
    """Rules the schema cannot express, as (field, problem, fix)."""
    if front.id != path.stem:
        yield "id", f"is '{front.id}' but the file is {path.name}", f"set id: {path.stem}"
    paths = [p.path for p in front.programs]
    for i, prog in enumerate(front.programs):
        pp = PurePosixPath(prog.path)
        top = pp.parts[0] if pp.parts else ""  # "" and "." have no parts
        if pp.is_absolute() or ".." in pp.parts or pp.suffix not in PROGRAM_KINDS.get(top, ()):
            yield f"programs.{i}.path", f"'{prog.path}' is not a program under kernels/ (.py, .jl) or cpp/ (.cu)", \
                "fix the path"
        if paths.index(prog.path) != i:
            yield f"programs.{i}.path", f"'{prog.path}' is listed twice", "list each program once"
        if not prog.checks:
            yield f"programs.{i}.checks", "lists no checks", "name the checks the program must pass"
        for j, check in enumerate(prog.checks):
            if check == GATE_CHECK or prog.checks.index(check) != j:
                yield f"programs.{i}.checks.{j}", f"'{check}' is reserved or repeated", "name each check once"
    wanted = {(p.path, c) for p in front.programs for c in p.checks}
    seen: set[tuple[str, str]] = set()
    for i, row in enumerate(front.results):
        key = (row.program, row.check)
        if row.program not in paths:
            yield f"results.{i}.program", f"'{row.program}' is not in programs", "add it to programs or fix the row"
        elif row.optional:
            if row.check != GATE_CHECK or not row.hardware:
                yield f"results.{i}", "an optional row must be a 'gate' row that names its hardware", \
                    "set check: gate and hardware: 'cc < 8.0'"
        elif key not in wanted:
            yield f"results.{i}.check", f"'{row.check}' is not a check of {row.program}", \
                "add it to the program's checks"
        if key in seen:
            yield f"results.{i}", f"{row.program} {row.check} has two rows", "keep one"
        seen.add(key)
    for program, check in sorted(wanted - seen):
        yield "results", f"no row for {program} {check}", "add a results row for every program check"
    if front.res_usage is not None and front.res_usage.program not in paths:
        yield "res_usage.program", f"'{front.res_usage.program}' is not in programs", \
            "name one of the lesson's programs"
    claim_ids = [c.id for c in front.performance]
    for i, claim in enumerate(front.performance):
        pp = PurePosixPath(claim.program)
        if pp.is_absolute() or ".." in pp.parts or pp.parts[:2] != ("kernels", "bench") or pp.suffix != ".py":
            yield f"performance.{i}.program", f"'{claim.program}' is not a bench program under kernels/bench/", \
                "name a kernels/bench/*_bench.py program"
        if claim_ids.index(claim.id) != i:
            yield f"performance.{i}.id", f"'{claim.id}' is used twice", "give each performance claim its own id"
    if front.status == "draft":
        if front.cuda_tile_verified:
            yield "cuda_tile_verified", "must be empty while the lesson is draft", \
                "only publish writes it, from run records"
        for name, value in front.hardware.model_dump().items():
            if value is not None:
                yield f"hardware.{name}", "must be null while the lesson is draft", \
                    "only publish fills the hardware block"
        for i, row in enumerate(front.results):
            if row.result != UNKNOWN or row.run_id is not None:
                yield f"results.{i}.result", f"must be '{UNKNOWN}' (with run_id null) while the lesson is draft", \
                    "only publish fills results, from run records"


def load_path(path: Path, shown: str | None = None, root: Path | None = None) -> Lesson:
    """Read and validate one lesson file; errors name it as ``shown`` (default: ``path``).

    Read through ``safe_read`` (a regular file inside ``root``, default the
    folder above ``lessons/``; at most 4 MiB; UTF-8).
    """
    path = Path(path)
    shown = shown or str(path)
    if root is None:
        root = path.parent.parent if path.parent.name == LESSONS else path.parent
    try:
        text = read_text(root, path.absolute(), "lesson", shown)
    except InputRefused as e:
        if e.kind == "missing":
            raise RecordError(shown, "", "file is missing", "restore it from git") from None
        if e.kind == "not-utf8":
            raise RecordError(shown, e.field, "not UTF-8 text", "save the lesson as UTF-8") from None
        raise
    return dataclasses.replace(parse(shown, text), path=path)


def load(root: Path, lesson_id: str) -> Lesson:
    path = find(root, lesson_id)
    return load_path(path, f"{LESSONS}/{path.name}", Path(root))


def load_all(root: Path) -> list[Lesson]:
    return [load_path(Path(root) / LESSONS / f"{i}.md", f"{LESSONS}/{i}.md", Path(root)) for i in lesson_ids(root)]


def missing_programs(root: Path, lesson: Lesson) -> list[tuple[str, str]]:
    """(field, path) for every listed program that does not exist under ``root``."""
    return [(f"programs.{i}.path", p.path) for i, p in enumerate(lesson.front.programs)
            if not (Path(root) / p.path).is_file()]


def program_list_digest(front: LessonFront) -> str:
    """sha256 of the canonical JSON of the lesson's program list (run records keep it)."""
    data = json.dumps([p.model_dump(mode="json") for p in front.programs], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()


# --- what a published lesson cites ----------------------------------------------------


def res_usage_source(run_id: str, nvcc: str, target: str, artifact: str) -> str:
    """A REG/SHARED column's source line (after ``Source: ``): the compile record it is read from, by id
    (``cited`` reads the id back: what a published table rests on)."""
    flag = ", --tilefatbin" if artifact == "tilefatbin" else f", {artifact}"
    return f"`cuobjdump -res-usage` in compile record `{run_id}` (nvcc {nvcc}, {target}{flag})"


_CITED_COMPILE = re.compile(r"^Source(?: \([^)]*\))?: `cuobjdump -res-usage` in compile record `([^`\s]+)`",
                            re.MULTILINE)


@dataclass(frozen=True)
class Cited:
    """The records a published lesson names beyond its rows (each row cites its own ``run_id``): what it
    rests on, and what the audit re-derives it from."""

    compile: tuple[str, ...]
    """The compile records its REG/SHARED table names in its source lines (``res_usage_source``), in order;
    empty for a lesson without such a table."""


def cited(lesson: Lesson) -> Cited:
    """What ``lesson`` cites besides its rows' run ids: its res-usage table's compile records. A table whose
    markers are missing or doubled cites nothing (the re-derivation names that body problem)."""
    compile_ids: tuple[str, ...] = ()
    if lesson.front.res_usage is not None:
        try:
            compile_ids = tuple(_CITED_COMPILE.findall(block_text(lesson.shown, lesson.body, RES_USAGE)))
        except RecordError:
            compile_ids = ()
    return Cited(compile_ids)


def res_usage_from(res_usage, kernels: list[str]) -> dict[str, tuple[int, int]]:
    """Match ``cuobjdump -res-usage`` functions (mangled names) to kernel names."""
    found: dict[str, tuple[int, int]] = {}
    for name in kernels:
        hits = [r for r in res_usage if name in r.function and not any(
            other != name and other in r.function and len(other) > len(name) for other in kernels)]
        if len(hits) == 1:
            found[name] = (hits[0].registers, hits[0].shared_bytes)
    return found


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def block(path: Path | str, body: str, name: str) -> tuple[int, int]:
    """(start, end) offsets of the text between ``name``'s markers; one pair required."""
    begin, end = markers(name)
    if body.count(begin) != 1 or body.count(end) != 1 or body.index(begin) > body.index(end):
        raise RecordError(path, "body", f"needs exactly one '{begin}' followed by one '{end}'",
                          "put the markers around the table")
    return body.index(begin) + len(begin), body.index(end)


def block_text(path: Path | str, body: str, name: str) -> str:
    start, stop = block(path, body, name)
    return body[start:stop]


def write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename (``store.write_atomic``), keeping its mode."""
    path = Path(path)
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    store.write_atomic(path, text.encode("utf-8"), mode)
