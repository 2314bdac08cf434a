"""TP007: ct.num_tiles with a tile shape whose rank differs from the array's."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tileproof.lint.interp import Interpreter
from tileproof.lint.names import call_arg, literal_dims
from tileproof.lint.rule_table import Report, rule
from tileproof.lint.values import Val


@rule("TP007", "num-tiles-rank", "ct.num_tiles with a tile shape whose rank differs from the array's",
      on=(ast.Call,))
def num_tiles_rank(d: Interpreter, call: ast.Call, env: dict[str, Val]) -> Iterator[Report]:
    """ct.num_tiles' shape needs one entry per array axis."""
    if d.imp.ct(call.func) != "num_tiles":
        return
    array, shape = call_arg(call, 0, "array"), literal_dims(call_arg(call, 2, "shape"))
    if not isinstance(array, ast.Name) or shape is None or array.id not in d.array_rank:
        return
    rank, line = d.array_rank[array.id]
    if shape and len(shape) != rank:   # shape=() (one element per tile) is valid
        yield Report(call,
                     f"ct.num_tiles({array.id}, ..., shape=...) gives a {len(shape)}-d tile "
                     f"shape, but {array.id} is {rank}-d (its ct.load/ct.store index at line "
                     f"{line} has {rank} entries)",
                     f"pass the full {rank}-d tile shape used to load {array.id}, e.g. "
                     "shape=(tm, tk) for axis=1 of a 2-d array")
