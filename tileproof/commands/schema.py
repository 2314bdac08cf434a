"""``tileproof schema``: regenerate every derived file from its single source.

``schema/*.schema.json`` come from the pydantic models; ``cpp/tolerances.h``
from the tolerance table in ``kernels/tolerances.py``. A test fails with
"run nox -s schema" when the committed files differ from what this renders.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

from tileproof.records import models, registry, signing, store
from tileproof.records.tolerances import load_table, render_cpp_header
from tileproof.report import summary

SCHEMAS: dict[str, type[BaseModel]] = {
    f"compile-record.v{models.SCHEMA_VERSION}.schema.json": models.CompileRecord,
    f"run-record.v{models.SCHEMA_VERSION}.schema.json": models.RunRecord,
    f"session-record.v{models.SCHEMA_VERSION}.schema.json": models.SessionRecord,
    f"bench-record.v{models.SCHEMA_VERSION}.schema.json": models.BenchRecord,
    f"claims-record.v{models.CLAIMS_SCHEMA_VERSION}.schema.json": models.ClaimsRecord,  # reads v1 too
    f"check-report.v{models.REPORT_VERSION}.schema.json": models.CheckReport,
    f"lesson.v{models.LESSON_VERSION}.schema.json": models.LessonFront,
    f"runner-registry.v{registry.REGISTRY_VERSION}.schema.json": registry.RunnerRegistry,
    "signed-record.v1.schema.json": signing.Envelope,
    "record-statement.v1.schema.json": signing.Statement,
    f"audit-summary.v{summary.SUMMARY_VERSION}.schema.json": summary.AuditSummary,
}
CPP_HEADER = Path("cpp") / "tolerances.h"
ID_PREFIX = "urn:tileproof:schema:"
"""A schema's ``$id`` is this plus its file name: a name, not a place to fetch it from."""


def json_schema(name: str, model) -> dict:
    """The model's JSON Schema, naming its dialect (``$schema``) and itself (``$id``)."""
    return {"$schema": GenerateJsonSchema.schema_dialect, "$id": ID_PREFIX + name, **model.model_json_schema()}


def rendered(root: Path) -> dict[Path, str]:
    """Every generated file, path relative to root → its text."""
    out = {
        Path("schema") / name: json.dumps(json_schema(name, model), indent=2, sort_keys=True) + "\n"
        for name, model in SCHEMAS.items()
    }
    out[CPP_HEADER] = render_cpp_header(load_table(root))
    return out


def stale(root: Path) -> list[Path]:
    """Generated files whose committed text differs from what the sources render."""
    return [p for p, text in rendered(root).items() if not (root / p).is_file() or (root / p).read_text() != text]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: cwd)")
    parser.add_argument("--check", action="store_true", help="only report stale files; exit 1 if any")


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    files = rendered(root)
    if args.check:
        bad = stale(root)
        for p in bad:
            print(f"{p}: differs from its source (fix: nox -s schema)")
        print(f"schema: {len(bad)} stale, {len(files) - len(bad)} up to date")
        return 1 if bad else 0
    written = 0
    for rel, text in files.items():
        path = root / rel
        if not path.is_file() or path.read_text() != text:
            store.write_atomic(path, text)
            written += 1
            print(f"wrote {rel}")
    print(f"schema: {written} written, {len(files) - written} up to date")
    return 0
