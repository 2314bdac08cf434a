"""The one table of lint rules: each rule is a function registered with ``@rule``.

A rule lives in its own module under ``tileproof/lint/rules/`` (``tpNNN.py``) and is
registered there, with its id, slug and description, by the ``@rule`` decorator; the
package imports every module in it, so adding a rule touches that one file.

A rule says which events it looks at (``on``): device-code nodes the interpreter meets
(``ast.Call``, ``ast.BinOp``, ``ast.Subscript``, or a ``Bind`` of a name), or
``Host.LAUNCH`` for launch calls in host code. It gets the interpreter (or the host scope),
the event and the environment, and yields ``Report``s; the registry stamps its id on them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

ENGINE_RULES: dict[str, tuple[str, str]] = {
    "TP000": ("cannot-parse", "the file is not valid Python, so nothing else was checked"),
    "TP900": ("bad-ignore",
              "a '# tileproof: ignore[...]' comment without a reason or with an unknown id"),
}
"""Findings the engine itself makes (parsing, ignore comments), not a rule function."""

HOST_LAUNCH = "host-launch"
"""The event of a host-code ``ct.launch(...)`` call."""


@dataclass(frozen=True)
class Hit:
    """One finding before it gets a path: where, which rule, what and how to fix."""

    line: int
    col: int
    rule: str
    message: str
    fix: str


@dataclass(frozen=True)
class Report:
    """What a rule function yields: the node to point at, the problem and the fix."""

    node: ast.AST
    message: str
    fix: str


RuleFn = Callable[..., Iterable[Report]]


@dataclass(frozen=True)
class Rule:
    """One registered rule: its id, slug, one-line description, events and function."""

    id: str
    slug: str
    description: str
    on: tuple[Any, ...]
    fn: RuleFn


_REGISTRY: dict[str, Rule] = {}
_BY_EVENT: dict[Any, list[Rule]] = {}
"""rules_for's answers, rebuilt when a rule registers."""


class DuplicateRuleError(ValueError):
    """Two rule functions claimed the same rule id."""


def rule(rule_id: str, slug: str, description: str, *, on: tuple[Any, ...]) -> Callable[[RuleFn], RuleFn]:
    """Register ``fn`` as rule ``rule_id`` for the events in ``on``."""
    def register(fn: RuleFn) -> RuleFn:
        if rule_id in _REGISTRY or rule_id in ENGINE_RULES:
            raise DuplicateRuleError(f"{rule_id}: registered twice ({fn.__module__}.{fn.__name__})")
        _REGISTRY[rule_id] = Rule(rule_id, slug, description, tuple(on), fn)
        _BY_EVENT.clear()
        return fn
    return register


def rules_for(event: Any) -> list[Rule]:
    """The registered rules that look at this event (a node type, or ``HOST_LAUNCH``), by id."""
    if event not in _BY_EVENT:
        _BY_EVENT[event] = [r for _id, r in sorted(_REGISTRY.items()) if event in r.on]
    return _BY_EVENT[event]


def table() -> dict[str, tuple[str, str]]:
    """id -> (slug, description) for every rule, engine ones included, sorted by id."""
    rows = {r.id: (r.slug, r.description) for r in _REGISTRY.values()} | ENGINE_RULES
    return dict(sorted(rows.items()))


def hits(rule_: Rule, reports: Iterable[Report]) -> list[Hit]:
    """A rule's reports as hits carrying its id (1-based columns)."""
    return [Hit(r.node.lineno, r.node.col_offset + 1, rule_.id, r.message, r.fix)  # type: ignore[attr-defined]
            for r in reports]
