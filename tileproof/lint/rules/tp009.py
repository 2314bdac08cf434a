"""TP009: a load in a loop over ct.num_tiles/ct.cdiv, without padding, feeding a reduction.

The last tile of a ct.num_tiles/ct.cdiv walk may stick out past the array; without
padding its outside lanes are undetermined. Lanes that stay in place (elementwise
math, reductions along other axes) only land in output lanes that the bounds-checked
store drops, so that is fine. They do harm when they are reduced along the walked axis
(ct.sum/max/... over that axis or all axes, the K axis of ct.mma), or added into a value
carried across iterations, which folds every tile onto the same lanes. Only those two
cases are reported. Which loads walk a loop, and where their lanes flow, is the
interpreter's (``Interpreter.candidates``, ``Interpreter.sources``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tileproof.lint.interp import Bind, Candidate, Interpreter, literal_axes
from tileproof.lint.names import REDUCTIONS, call_arg
from tileproof.lint.rule_table import Report, rule
from tileproof.lint.values import Val


@rule("TP009", "unpadded-reduction-load",
      "a load in a loop over ct.num_tiles/ct.cdiv, without padding, feeding a reduction",
      on=(ast.Call, Bind))
def unpadded_reduction_load(d: Interpreter, event: ast.Call | Bind,
                            env: dict[str, Val]) -> Iterator[Report]:
    """Report walk loads reduced along the walked axis, or folded into a carried value."""
    if isinstance(event, Bind):
        for key, walked in event.loads.items():
            cand = d.candidates[key]
            # walked is None once the lanes were reshaped, transposed or mixed by an mma
            # (as in attention kernels that mask the edge by hand): say nothing then.
            if walked is not None and event.name in cand.loop.carried:
                yield _unpadded(cand, f"folded into '{event.name}', which is carried "
                                      "across iterations")
        return
    name = d.imp.ct(event.func)
    if name in REDUCTIONS:
        axis = call_arg(event, 1, "axis")
        first = call_arg(event, 0, "x")
        for key, walked in (d.sources(first) if first is not None else {}).items():
            cand = d.candidates[key]
            if walked is None:
                continue
            if axis is None or (isinstance(axis, ast.Constant) and axis.value is None):
                yield _unpadded(cand, f"reduced over all axes by ct.{name}")
            elif walked in literal_axes(axis, cand.rank):
                yield _unpadded(cand, f"reduced along the walked axis by ct.{name}")
    elif name in ("mma", "matmul"):
        for pos, kw, k_axis in ((0, "x", -1), (1, "y", -2)):
            operand = call_arg(event, pos, kw)
            for key, walked in (d.sources(operand) if operand else {}).items():
                cand = d.candidates[key]
                if walked is not None and walked == k_axis % cand.rank:
                    yield _unpadded(cand, f"summed over the K axis by ct.{name}")


def _unpadded(cand: Candidate, how: str) -> Report:
    return Report(cand.call,
                  f"ct.load of '{cand.array}' walks the tiles of a ct.num_tiles/ct.cdiv loop "
                  f"without padding_mode, and the loaded tile is {how}: the last tile may "
                  "stick out past the array, and its out-of-bounds lanes hold undetermined "
                  "values that end up in the result",
                  "add padding_mode=ct.PaddingMode.ZERO (NEG_INF for a max), or "
                  "'# tileproof: ignore[TP009] <why the extent is a multiple of the tile>'")
