"""What every record kind shares: the record schema version, the verdicts, the numbers the programs
write, and the version counter (``Versioned``) each kind that moved on carries."""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

from pydantic import Field, ModelWrapValidatorHandler, ValidationInfo, model_validator

from tileproof.records.base import Model

SCHEMA_VERSION = 1
"""The record schema version this tileproof writes and reads (claims records: ``CLAIMS_SCHEMA_VERSION``)."""


Verdict = Literal["passed", "failed", "gated", "no-gpu", "error", "timeout"]
"""Closed set of verdicts of a program that was started. Only ``passed`` counts as passing."""


BlockerKind = Literal["row", "perf-claim", "refuted-claim", "claims-unchecked", "res-usage", "no-tolerance-entry",
                      "plausibility"]
"""What kind of thing keeps a lesson from being published (``judge.gate.Blocker``; the audit summary writes it)."""


NonFinite = Literal["nan", "inf", "-inf"]


Number = float | NonFinite
"""A float as the programs write it: non-finite values are strings (valid JSON)."""


def _none(value: object) -> bool:
    return value is None


ADDED_FIELD = Field(default=None, exclude_if=_none)
"""A field a record kind gained in a later version (default None): left out of the record's JSON while None, so a
record written before the field existed dumps exactly as it was written and signed."""


def counter(current: int) -> Any:
    """A version counter's field: a writer that names none writes ``current``; the schema (which describes
    files) gives 1 as its default, what a file without the counter holds (``Versioned``)."""
    return Field(default=current, json_schema_extra={"default": 1})


AS_READ: Final = {"as_read": True}
"""The validation context of a record read back from a file (``store.validate``; ``Versioned``)."""


class Versioned(Model):
    """A model with a version counter (the field ``VERSION_FIELD``) whose default is the version written now.

    Read back from a file (validation context ``AS_READ``), a counter the file lacks reads as 1: the shape
    written before the counter existed. It stays out of ``model_fields_set``, so the model dumps exactly what
    the file holds and its seal and signature still verify. What an older version means for a judge is a
    property of the model named for that meaning (``RunRecord.attests_table_whole``...), never a version
    compare in the judge: the rule lives here, beside the version it reads.
    """

    VERSION_FIELD: ClassVar[str]

    @model_validator(mode="wrap")
    @classmethod
    def _as_written(cls, data: Any, handler: ModelWrapValidatorHandler[Any], info: ValidationInfo) -> Any:
        lacks = (isinstance(data, dict) and cls.VERSION_FIELD not in data
                 and bool(info.context and info.context.get("as_read")))
        model = handler({**data, cls.VERSION_FIELD: 1} if lacks else data)
        if lacks:
            model.__pydantic_fields_set__.discard(cls.VERSION_FIELD)
        return model
