"""TP008: ct.store of a tile whose rank differs from its index's."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tileproof.lint.interp import Interpreter
from tileproof.lint.names import call_arg
from tileproof.lint.rule_table import Report, rule
from tileproof.lint.values import UNKNOWN, Val


@rule("TP008", "store-rank-mismatch", "ct.store of a tile whose rank differs from its index's",
      on=(ast.Call,))
def store_rank_mismatch(d: Interpreter, call: ast.Call, env: dict[str, Val]) -> Iterator[Report]:
    """A stored tile must have the index's rank (or be 0-d)."""
    if d.imp.ct(call.func) != "store":
        return
    tile = call_arg(call, 2, "tile")
    value = d.eval(tile, env) if tile is not None else UNKNOWN
    n = d.index_rank(call_arg(call, 1, "index"))
    if n is None or value.kind != "tile" or not value.rank or value.rank == n:
        return
    made = f" (made at line {value.line})" if value.line else ""
    yield Report(call,
                 f"ct.store of a {value.rank}-d tile{made} with a {n}-entry index: the "
                 "tile's rank must equal the index's and the array's (tileiras fails "
                 "with only 'Return code 3')",
                 f"reshape it first: ct.reshape(tile, <a {n}-d shape>); with reductions, "
                 "keepdims=True keeps the rank easy to follow")
