"""TP001: an element offset (i * TILE) passed where ct.load/ct.store want a tile index."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tileproof.lint.interp import Interpreter
from tileproof.lint.names import call_arg, literal_dims, same
from tileproof.lint.rule_table import Report, rule
from tileproof.lint.values import UNKNOWN, Val


@rule("TP001", "element-offset-index",
      "an element offset (i * TILE) passed where ct.load/ct.store want a tile index", on=(ast.Call,))
def element_offset_index(d: Interpreter, call: ast.Call, env: dict[str, Val]) -> Iterator[Report]:
    """index[i] is k * shape[i] in ct.load/ct.store; ct.gather called with shape=."""
    name = d.imp.ct(call.func)
    if name == "load":
        yield from _element_index(call_arg(call, 1, "index"), literal_dims(call_arg(call, 2, "shape")),
                                  "ct.load")
    elif name == "store":
        tile = call_arg(call, 2, "tile")
        value = d.eval(tile, env) if tile is not None else UNKNOWN
        yield from _element_index(call_arg(call, 1, "index"), value.dims, "ct.store")
    elif name == "gather" and call_arg(call, None, "shape") is not None:
        yield Report(call,
                     "ct.gather called with shape=, as if it were ct.load: gather takes "
                     "element indices (one index tile per axis) and no tile shape",
                     "for tile-indexed access use ct.load(array, index=(tile indices), "
                     "shape=...); for gather pass element indices such as "
                     "i * TILE + ct.arange(TILE, dtype=ct.int32)")


def _element_index(index: ast.expr | None, dims: tuple[ast.expr, ...] | None,
                   what: str) -> Iterator[Report]:
    if index is None or dims is None:
        return
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    if len(items) != len(dims):
        return
    for item, dim in zip(items, dims, strict=True):
        if not (isinstance(item, ast.BinOp) and isinstance(item.op, ast.Mult)):
            continue
        if isinstance(dim, ast.Constant) and dim.value == 1:
            continue
        for factor, other in ((item.right, item.left), (item.left, item.right)):
            if same(factor, dim):
                size, idx = ast.unparse(dim), ast.unparse(other)
                yield Report(item,
                             f"{what} index '{ast.unparse(item)}' is an element offset: "
                             f"the index counts tiles of size {size} along this axis, so "
                             f"this addresses tile {idx} * {size}, far past the intended one",
                             f"pass the tile index '{idx}'; {what} multiplies by the "
                             "tile shape itself")
                break
