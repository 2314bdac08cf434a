"""The base of every on-disk model, in a module of its own: what a process that reads one small model (the
checker's ``records.handover``) imports without loading every record model."""

from __future__ import annotations

import functools
import typing
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """Base for every on-disk model: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


def _holds(annotation, kinds: tuple[type, ...]) -> bool:
    """Whether a field of this type can hold an instance of ``kinds`` (at any depth)."""
    if isinstance(annotation, type) and issubclass(annotation, kinds):
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return bool(_fields_holding(annotation, kinds))
    if annotation.__class__.__name__ == "ForwardRef":
        raise TypeError(f"a field annotation is still a forward reference ({annotation!r}): define the class it "
                        "names before the model that names it")
    return any(_holds(a, kinds) for a in typing.get_args(annotation))


@functools.cache
def _fields_holding(cls: type[BaseModel], kinds: tuple[type, ...]) -> tuple[str, ...]:
    """The fields of a model class that can hold an instance of ``kinds``; computed once per class."""
    return tuple(name for name, f in cls.model_fields.items() if _holds(f.annotation, kinds))


def found_in(value: object, kinds: tuple[type, ...], marked: frozenset[tuple[type, str]] = frozenset(),
             inside: bool = False) -> Iterator[tuple[object, bool]]:
    """Every instance of ``kinds`` a model (or any part of one: a list, a tuple, a mapping's values) holds, each with
    whether it was reached through a field of ``marked`` (model class, field name). The one walk over a record's
    fields (its file digests, its steps)."""
    if isinstance(value, kinds):
        yield value, inside
    elif isinstance(value, BaseModel):
        for name in _fields_holding(type(value), kinds):
            yield from found_in(getattr(value, name), kinds, marked, inside or (type(value), name) in marked)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from found_in(item, kinds, marked, inside)
    elif isinstance(value, dict):
        for item in value.values():
            yield from found_in(item, kinds, marked, inside)
