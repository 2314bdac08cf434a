"""TP012: ct.Constant[...](value) in device code: Constant is an annotation only."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tileproof.lint.interp import Interpreter
from tileproof.lint.rule_table import Report, rule
from tileproof.lint.values import Val


@rule("TP012", "constant-constructor",
      "ct.Constant[...](value) in device code: Constant is an annotation only", on=(ast.Call,))
def constant_constructor(d: Interpreter, call: ast.Call, env: dict[str, Val]) -> Iterator[Report]:
    """On the host Constant[int](1) is just int(1); in device code it fails."""
    if isinstance(call.func, ast.Subscript) and d.imp.ct(call.func.value) == "Constant":
        yield Report(call,
                     "ct.Constant[...] is a type annotation; calling it in device code does "
                     "not make a constant (cuTile: 'Cannot create constant from value of type "
                     "typing._AnnotatedAlias')",
                     "write the plain value (x = 1): values computed from literals are "
                     "compile-time constants already; ct.Constant only annotates parameters")
