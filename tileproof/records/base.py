"""The base of every on-disk model, in a module of its own: what a process that reads one small model (the
checker's ``records.handover``) imports without loading every record model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """Base for every on-disk model: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)
