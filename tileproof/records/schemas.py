"""The JSON Schemas under ``schema/``: a registry each on-disk model joins where it is defined.

``@schema("run-record", SCHEMA_VERSION)`` above a model names its file
(``schema/run-record.v1.schema.json``). Every model with a schema is an on-disk
shape and lives in ``records/`` (the cluster file in ``records.cluster``, the audit's
JSON summary in ``records.audit_summary``); ``authoring.generated`` imports those
modules when it renders the schemas, so neither importing nor running a command
that builds (``compile``) loads a feature package for them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

ID_PREFIX = "urn:tileproof:schema:"
"""A schema's ``$id`` is this plus its file name: a name, not a place to fetch it from."""

JOINED: dict[str, type[BaseModel]] = {}
"""File name under ``schema/`` → the model it is generated from."""

M = TypeVar("M", bound=type[BaseModel])


def schema(kind: str, version: int) -> Callable[[M], M]:
    """Class decorator: the model's JSON Schema is ``schema/<kind>.v<version>.schema.json``."""
    name = f"{kind}.v{version}.schema.json"

    def join(model: M) -> M:
        known = JOINED.setdefault(name, model)
        if (known.__module__, known.__qualname__) != (model.__module__, model.__qualname__):
            raise ValueError(f"{name}: joined by both {known.__qualname__} and {model.__qualname__}")
        JOINED[name] = model
        return model

    return join


@functools.cache
def text(name: str, model: type[BaseModel]) -> str:
    """The text of ``schema/<name>``: the model's JSON Schema, naming its dialect (``$schema``) and
    itself (``$id``). Kept per process for each (name, model class): a class's schema never changes once it
    is defined, and pydantic takes milliseconds to generate one (``check``, ``compile`` and ``new-lesson`` each
    render every schema)."""
    body = {"$schema": GenerateJsonSchema.schema_dialect, "$id": ID_PREFIX + name, **model.model_json_schema()}
    return json.dumps(body, indent=2, sort_keys=True) + "\n"
