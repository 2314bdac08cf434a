"""The front-matter reference of the author's guide, rendered from the lesson models.

``AUTHORING.md`` (included by the authoring page of docs/) holds a table per model
(``LessonFront`` and the models it nests) between two markers; everything between them is
generated from the fields' types, defaults and docstrings, so the guide cannot drift from what
``records.lessons`` accepts.
``tileproof schema`` rewrites it; a test and ``tileproof check`` fail while it is stale.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from tileproof.records.errors import RecordError
from tileproof.records.models import (
    Hardware,
    LessonFront,
    LessonProgram,
    PerfClaim,
    PlausibilityNote,
    ResultRow,
    VerifiedRelease,
)
from tileproof.records.tolerances import REGENERATE

GUIDE = Path("AUTHORING.md")
# The begin marker keeps the words it was first written with (the models were one file then): every guide that
# holds it, in any checkout or clone, keeps finding its reference.
BEGIN = ("<!-- front-matter reference: generated from tileproof/records/models.py by `nox -s schema`; "
         "do not edit -->")
END = "<!-- end of the generated front-matter reference -->"
MODELS: tuple[type[BaseModel], ...] = (LessonFront, LessonProgram, ResultRow, Hardware, PerfClaim, VerifiedRelease,
                                        PlausibilityNote)


class GuideError(RecordError):
    """The guide lacks the markers the generated reference goes between (one line: the file, what is
    missing, the fix)."""


def _type(annotation: object) -> str:
    """How the reference writes a field's type, alike on every Python (``list[str]`` passes ``isinstance(..., type)``
    on 3.10 and is then named ``list``: only a plain class is written by its name)."""
    plain = isinstance(annotation, type) and get_origin(annotation) is None
    text = getattr(annotation, "__name__", None) if plain else None
    text = text or re.sub(r"tileproof\.records\.models\.(\w+\.)?", "", str(annotation).replace("typing.", ""))
    text = re.sub(r"Annotated\[str, StringConstraints\([^)]*pattern='([^']*)'[^)]*\)\]", r"str matching \1", text)
    return text.replace("|", "or").replace("NoneType", "None")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def reference() -> str:
    """The generated Markdown: one table per model, one row per field."""
    parts = []
    for model in MODELS:
        doc = _cell((model.__doc__ or "").strip().split("\n\n")[0]) if model.__doc__ else ""
        rows = ["| field | type | required / default | meaning |", "|---|---|---|---|"]
        for name, info in model.model_fields.items():
            default = "required" if info.is_required() else (
                f"`{info.default!r}`" if info.default is not PydanticUndefined else "computed")
            kind, meaning = _cell(_type(info.annotation)), _cell(info.description or "")
            rows.append(f"| `{name}` | `{kind}` | {default} | {meaning} |")
        parts.append(f"### `{model.__name__}`\n\n" + (f"{doc}\n\n" if doc and "Base for" not in doc else "") +
                     "\n".join(rows))
    return "\n\n".join(parts)


def with_reference(text: str) -> str:
    """``text`` (the guide) with the part between the markers replaced by ``reference()``."""
    missing = [name for name, line in (("begin", BEGIN), ("end", END)) if line not in text]
    if missing or text.index(BEGIN) > text.index(END):
        problem = (f"no {' and no '.join(missing)} marker line of the generated front-matter reference"
                   if missing else "the end marker of the generated front-matter reference comes before its begin")
        raise GuideError(GUIDE, "", problem, f"restore the lines {BEGIN!r} and {END!r} in that order, then run "
                         f"{REGENERATE}")
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n\n{reference()}\n\n{END}{tail}"
