"""TP005: + - * / on two boolean values (comparison results)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tileproof.lint.interp import Interpreter
from tileproof.lint.rule_table import Report, rule
from tileproof.lint.values import Val

ARITH_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
ARITH_FUNCS = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow"}


@rule("TP005", "bool-tile-arithmetic", "+ - * / on two boolean values (comparison results)",
      on=(ast.BinOp, ast.Call))
def bool_tile_arithmetic(d: Interpreter, node: ast.BinOp | ast.Call,
                         env: dict[str, Val]) -> Iterator[Report]:
    """Arithmetic between two booleans (cuTile: 'does not support bool')."""
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, ARITH_OPS):
            return
        left, right, op = node.left, node.right, ast.unparse(node)
    else:
        name = d.imp.ct(node.func)
        if name not in ARITH_FUNCS or len(node.args) < 2:
            return
        left, right, op = node.args[0], node.args[1], f"ct.{name}"
    a, b = d.eval(left, env), d.eval(right, env)
    if not (a.is_bool and b.is_bool) or (a.const and b.const):
        return
    yield Report(node,
                 f"arithmetic on two boolean values in '{op}': cuTile rejects +, -, *, / on "
                 "bool ('Binary arithmetic op does not support bool')",
                 "combine masks with & or |, or cast first: "
                 "ct.astype(cond, ct.int32); use ct.where(mask, x, 0) to zero lanes")
