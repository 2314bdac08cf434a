"""What ``publish`` writes into a lesson, as text: the results table, the REG/SHARED table, the
publish-owned front-matter keys, and the marked blocks of the body they go between.

:func:`render` gives a lesson's new text; every byte it does not own stays as the author wrote it
(the front-matter keys ``status``, ``hardware``, ``results`` and ``cuda_tile_verified``, the last
written only while it lists a release and placed after ``results`` when the lesson had none, and the
body between ``<!-- results:begin -->`` and ``<!-- results:end -->``, or another block's markers), and
it never returns text that does not read back as intended. ``records.lessons`` finds, reads and
validates lessons and writes the text given (``lessons.write``); the judge compares what this renders
with what a lesson says (``judge.verdict``), so ``publish`` and the audit render the same bytes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tileproof.records.errors import RecordError
from tileproof.records.lessons import RESULTS, UNKNOWN, Lesson, block, parse
from tileproof.records.models import LessonFront, ResultRow

PUBLISH_OWNED = ("status", "hardware", "results", "cuda_tile_verified")
"""The only front-matter keys publish rewrites."""
OMITTED_WHEN_EMPTY = ("cuda_tile_verified",)
"""Publish-owned keys a lesson holds only while they list something (a draft, a C++-only lesson: absent)."""

_TOP_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*):(?:\s|$)")


# --- tables ----------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_results_table(rows: list[ResultRow]) -> str:
    """The body's results table: ``?`` wherever no record backs the row."""
    out = ["| Program | Check | Bound | Result | Run |", "|---|---|---|---|---|"]
    for row in rows:
        check = row.check + (f" (optional: needs {row.hardware})" if row.optional else "")
        run = f"`{row.run_id}`" if row.run_id else "-"
        out.append(f"| `{_cell(row.program)}` | {_cell(check)} | {_cell(row.bound)} | {_cell(row.result)} | {run} |")
    return "\n".join(out) + "\n"


ResUsageColumn = tuple["str | None", dict[str, tuple[int, int]], "str | None"]
"""(label, kernel → (registers, shared bytes), source): one REG/SHARED pair, e.g. one CUDA release's."""


def render_res_usage(kernels: list[tuple[str, str, str]], columns: list[ResUsageColumn]) -> str:
    """The REG/SHARED table with one REG/SHARED pair per column (``REG (13.4)`` when labelled) and
    a source line per column; no column: every cell ``?`` and "Source: none yet"."""
    cols = columns or [(None, {}, None)]
    head = [f"{what} ({label})" if label else what for label, _u, _s in cols for what in ("REG", "SHARED")]
    out = ["| Kernel | Reduction | " + " | ".join(head) + " | Mechanism |", "|---" * (len(head) + 3) + "|"]
    for name, reduction, mechanism in kernels:
        cells = [c for _label, usage, _s in cols
                 for c in ((str(usage[name][0]), f"{usage[name][1]} B") if name in usage else (UNKNOWN, UNKNOWN))]
        out.append(f"| `{_cell(name)}` | {_cell(reduction)} | " + " | ".join(cells) + f" | {_cell(mechanism)} |")
    out.append("")
    if not columns:
        out.append("Source: none yet; every `?` waits for a compile record.")
    for label, _usage, source in columns:
        out.append(f"Source{f' ({label})' if label else ''}: {source or 'none'}.")
    return "\n".join(out) + "\n"


# --- the lesson's text ------------------------------------------------------------------


def replace_block(path: Path | str, body: str, name: str, content: str) -> str:
    """``body`` with only the text between ``name``'s markers replaced by ``content``."""
    start, stop = block(path, body, name)
    return body[:start] + "\n" + content + body[stop:]


def dump_key(key: str, value: Any) -> str:
    """One top-level front-matter key as YAML, the way lessons are written."""
    return yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096)


def front_values(front: LessonFront) -> dict[str, Any]:
    """The publish-owned keys as plain data (optional-row fields only where used)."""
    rows = []
    for row in front.results:
        d: dict[str, Any] = {"program": row.program, "check": row.check, "bound": row.bound}
        if row.optional:
            d.update(optional=True, hardware=row.hardware)
        d.update(result=row.result, run_id=row.run_id)
        rows.append(d)
    return {"status": front.status, "hardware": front.hardware.model_dump(mode="json"), "results": rows,
            "cuda_tile_verified": [v.model_dump(mode="json") for v in front.cuda_tile_verified]}


def _spans(path: Path | str, front_text: str) -> dict[str, tuple[int, int]]:
    """Line spans [start, stop) of each top-level key (trailing blank/comment lines excluded)."""
    lines = front_text.splitlines(keepends=True)
    starts = [(i, m.group(1)) for i, line in enumerate(lines) if (m := _TOP_KEY.match(line))]
    spans = {}
    for n, (i, key) in enumerate(starts):
        stop = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        while stop > i + 1 and (not lines[stop - 1].strip() or lines[stop - 1].startswith("#")):
            stop -= 1
        if key in spans:
            raise RecordError(path, key, "appears twice in the front matter", "keep one")
        spans[key] = (i, stop)
    return spans


def render(lesson: Lesson, front: LessonFront, blocks: dict[str, str] | None = None) -> str:
    """The lesson's text with ``front``'s publish-owned parts and the body's compile-derived
    ``blocks`` (marker name → table, e.g. ``RES_USAGE``); nothing else changes."""
    for name in LessonFront.model_fields:
        if name not in PUBLISH_OWNED and getattr(front, name) != getattr(lesson.front, name):
            raise ValueError(f"render may only change {', '.join(PUBLISH_OWNED)}, not {name}")
    lines = lesson.front_text.splitlines(keepends=True)
    spans = _spans(lesson.shown, lesson.front_text)
    values = front_values(front)
    for key in OMITTED_WHEN_EMPTY:  # absent until it lists something: then placed after results
        if key not in spans and values[key] and "results" in spans:
            lines[spans["results"][1]:spans["results"][1]] = dump_key(key, values[key]).splitlines(keepends=True)
            spans = _spans(lesson.shown, "".join(lines))  # line numbers: one list item per line, as above
    for key in sorted(PUBLISH_OWNED, key=lambda k: spans.get(k, (0, 0))[0], reverse=True):
        if key not in spans and key in OMITTED_WHEN_EMPTY and not values[key]:
            continue
        if key not in spans:
            raise RecordError(lesson.shown, key, "is missing from the front matter", f"add a '{key}:' key")
        start, stop = spans[key]
        empty = key in OMITTED_WHEN_EMPTY and not values[key]
        lines[start:stop] = [] if empty else [dump_key(key, values[key])]
    front_text = "".join(lines)
    body = replace_block(lesson.shown, lesson.body, RESULTS, render_results_table(front.results))
    for name, content in (blocks or {}).items():
        if name == RESULTS:
            raise ValueError("the results table is rendered from the front matter, not passed in")
        body = replace_block(lesson.shown, body, name, content)
    first = lesson.text.splitlines(keepends=True)[0]
    fence = first if front_text.endswith("\n") or not front_text else "\n" + first
    text = first + front_text + fence + body
    after = parse(lesson.shown, text)
    if after.front != front:  # never write a lesson that does not read back as intended
        raise RecordError(lesson.shown, "front matter", "rewritten front matter does not read back", "report a bug")
    return text
