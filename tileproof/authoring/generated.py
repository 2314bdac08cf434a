"""Every generated file, rendered from its one source: ``schema/*.schema.json`` from the pydantic
models, ``cpp/tolerances.h`` from the tolerance table (``kernels/tolerances.py``) and the
front-matter reference in ``AUTHORING.md`` from ``LessonFront`` (``records.guide``).

``tileproof schema`` (``nox -s schema``) writes them; the ``compile`` command makes them current
before any compiler runs (and ``runner.builds`` the header, for builds ``run`` starts itself);
``tileproof check`` and the tests report each stale one in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

from tileproof.fleet.cluster import CLUSTER_VERSION, Cluster
from tileproof.records import guide, models, registry, registry_change, signing, trust_pin
from tileproof.records.store import write_atomic
from tileproof.records.tolerances import (
    HEADER_FILE,
    REGENERATE,
    TABLE_FILE,
    load_table,
    render_cpp_header,
)
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
    "record-statement.v1.schema.json": signing.Statement,  # read: records signed before record-statement v2
    "record-statement.v2.schema.json": signing.StatementV2,
    "registry-change-statement.v1.schema.json": registry_change.ChangeStatement,
    f"trust-pin.v{trust_pin.PIN_VERSION}.schema.json": trust_pin.TrustPin,
    f"audit-summary.v{summary.SUMMARY_VERSION}.schema.json": summary.AuditSummary,
    f"cluster.v{CLUSTER_VERSION}.schema.json": Cluster,
}
CPP_HEADER = HEADER_FILE
ID_PREFIX = "urn:tileproof:schema:"
"""A schema's ``$id`` is this plus its file name: a name, not a place to fetch it from."""
COMMAND = REGENERATE
"""The command that rewrites every generated file."""


def json_schema(name: str, model) -> dict:
    """The model's JSON Schema, naming its dialect (``$schema``) and itself (``$id``)."""
    return {"$schema": GenerateJsonSchema.schema_dialect, "$id": ID_PREFIX + name, **model.model_json_schema()}


def rendered(root: Path, present_only: bool = False) -> dict[Path, str]:
    """Every generated file, path relative to root → its text. ``present_only``: only those whose
    source and folder exist in this tree (a partial tree, e.g. a test's, gets nothing new)."""
    root = Path(root)
    out: dict[Path, str] = {}
    if not present_only or (root / "schema").is_dir():
        out.update({Path("schema") / name: json.dumps(json_schema(name, model), indent=2, sort_keys=True) + "\n"
                    for name, model in SCHEMAS.items()})
    if not present_only or ((root / TABLE_FILE).is_file() and (root / CPP_HEADER).parent.is_dir()):
        out[CPP_HEADER] = render_cpp_header(load_table(root))
    path = Path(root) / guide.GUIDE
    if path.is_file():
        out[guide.GUIDE] = guide.with_reference(path.read_text(encoding="utf-8"))
    return out


def stale(root: Path) -> list[Path]:
    """Generated files whose committed text differs from what the sources render."""
    return [p for p, text in rendered(root).items() if not (root / p).is_file() or (root / p).read_text() != text]


def make_current(root: Path, present_only: bool = False) -> list[Path]:
    """Write every stale generated file (``store.write_atomic``); the paths written."""
    written = []
    for rel, text in rendered(root, present_only).items():
        path = Path(root) / rel
        if not path.is_file() or path.read_text() != text:
            write_atomic(path, text)
            written.append(rel)
    return written
