"""TP006: indexing or slicing a tile or an array inside a kernel."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tileproof.lint.interp import Interpreter, expand_dims_count
from tileproof.lint.rule_table import Report, rule
from tileproof.lint.values import Val


@rule("TP006", "tile-subscript", "indexing or slicing a tile or an array inside a kernel",
      on=(ast.Subscript,))
def tile_subscript(d: Interpreter, node: ast.Subscript, env: dict[str, Val]) -> Iterator[Report]:
    """Tiles accept only None/.../: subscripts (expand_dims); arrays none."""
    base = d.eval(node.value, env)
    text = ast.unparse(node)
    if base.kind == "array":
        yield Report(node,
                     f"'{text}' subscripts an array inside a kernel; arrays are not "
                     "subscriptable in cuTile",
                     "load one element with ct.load(array, index=(...), shape=()), a tile "
                     "with ct.load, or arbitrary elements with ct.gather")
    elif base.kind == "tile" and (isinstance(node.ctx, ast.Store)
                                  or expand_dims_count(node.slice) is None):
        what = ("assigns into a tile; cuTile tiles are immutable"
                if isinstance(node.ctx, ast.Store) else
                "indexes or slices a tile; cuTile tile subscripts may only be None, ... "
                "and ':' (which add axes)")
        fix = ("build a new tile: ct.insert(tile, index, value), or "
               "ct.where(ct.arange(n, dtype=ct.int32) == i, value, tile)"
               if isinstance(node.ctx, ast.Store) else
               "use tile.item() for a one-element tile, ct.extract(tile, index, shape) "
               "for a sub-tile, ct.load(array, index, shape=()) for one array element, "
               "or ct.arange + ct.where to mask a range")
        yield Report(node, f"'{text}' {what}", fix)
