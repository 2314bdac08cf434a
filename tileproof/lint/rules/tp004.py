"""TP004: ct.load(..., order='F') where a transposed tile is meant."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tileproof.lint.interp import Interpreter
from tileproof.lint.names import call_arg
from tileproof.lint.rule_table import Report, rule
from tileproof.lint.values import Val


@rule("TP004", "order-f-transpose", "ct.load(..., order='F') where a transposed tile is meant",
      on=(ast.Call,))
def order_f_transpose(d: Interpreter, call: ast.Call, env: dict[str, Val]) -> Iterator[Report]:
    """order='F' permutes the tile space; it is not 'give me the transpose'."""
    if d.imp.ct(call.func) != "load":
        return
    order = call_arg(call, None, "order")
    if isinstance(order, ast.Constant) and order.value == "F":
        yield Report(order,
                     "ct.load(..., order='F') reverses which array axis each index and shape "
                     "entry refers to; it does not transpose the tile you would get with the "
                     "default order (index and shape must then be given in reversed axis "
                     "order, or shapes and results come out wrong)",
                     "load with the default order and transpose explicitly: "
                     "ct.transpose(ct.load(...)) or ct.permute(tile, (1, 0))")
