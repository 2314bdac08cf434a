"""Every generated file, rendered from its one source: ``schema/*.schema.json`` from the pydantic
models (``records.schemas``, the registry they join), ``cpp/tolerances.h`` from the tolerance table
(``kernels/tolerances.py``) and the front-matter reference in ``AUTHORING.md`` from ``LessonFront``
(``records.guide``).

``tileproof schema`` (``nox -s schema``) writes them; the ``compile`` command makes them current
before any compiler runs (and ``runner.builds`` the header, for builds ``run`` starts itself), each
through the one writer of generated files (``store.write_generated``); ``tileproof check`` and the
tests report each stale one in one line.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from pydantic import BaseModel

from tileproof.records import guide, schemas, store
from tileproof.records.tolerances import HEADER_FILE, REGENERATE, cpp_header, has_header

SCHEMA_DIR = Path("schema")
SCHEMA_MODULES = ("tileproof.records.models.reports", "tileproof.records.models.compile",
                  "tileproof.records.models.run", "tileproof.records.models.bench",
                  "tileproof.records.models.claims", "tileproof.records.models.lessons",
                  "tileproof.records.trust.runner_keys", "tileproof.records.trust.signing",
                  "tileproof.records.trust.registry_change", "tileproof.records.trust.trust_pin",
                  "tileproof.records.cluster", "tileproof.records.audit_summary",
                  "tileproof.records.handover")
"""Every module whose models join ``records.schemas`` (tests/test_schema.py finds each ``@schema`` in the
package and checks its module is here). Imported when the schemas are rendered, not with this module, which
``compile`` imports."""
CPP_HEADER = HEADER_FILE
COMMAND = REGENERATE
"""The command that rewrites every generated file."""


def every_schema() -> dict[str, type[BaseModel]]:
    """File name under ``schema/`` → its model, for every model that joins ``records.schemas``."""
    for module in SCHEMA_MODULES:
        importlib.import_module(module)
    return dict(sorted(schemas.JOINED.items()))


def rendered(root: Path, present_only: bool = False) -> dict[Path, str]:
    """Every generated file, path relative to root → its text. ``present_only``: only those whose
    source and folder exist in this tree (a partial tree, e.g. a test's, gets nothing new)."""
    root = Path(root)
    out: dict[Path, str] = {}
    if not present_only or (root / SCHEMA_DIR).is_dir():
        out.update({SCHEMA_DIR / name: schemas.text(name, model) for name, model in every_schema().items()})
    if not present_only or has_header(root):
        out[CPP_HEADER] = cpp_header(root)
    path = root / guide.GUIDE
    if path.is_file():
        out[guide.GUIDE] = guide.with_reference(path.read_text(encoding="utf-8"))
    return out


def stale(root: Path) -> list[Path]:
    """Generated files whose committed text differs from what the sources render."""
    return [p for p, text in rendered(root).items() if not (root / p).is_file() or (root / p).read_text() != text]


def make_current(root: Path, present_only: bool = False) -> list[Path]:
    """Write every stale generated file; the paths written."""
    return [rel for rel, text in rendered(root, present_only).items() if store.write_generated(root, rel, text)]
