"""TP011: a literal launch grid dimension above the CUDA limit (host code)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tileproof.lint.interp import HostScope
from tileproof.lint.names import call_arg
from tileproof.lint.rule_table import HOST_LAUNCH, Report, rule

GRID_LIMITS = ((2**31 - 1, "x"), (65_535, "y"), (65_535, "z"))


@rule("TP011", "grid-limit", "a literal launch grid dimension above the CUDA limit", on=(HOST_LAUNCH,))
def grid_limit(host: HostScope, call: ast.Call) -> Iterator[Report]:
    """ct.launch's grid: at most 3 dimensions, x up to 2^31-1, y and z up to 65535."""
    grid = call_arg(call, 1, "grid")
    if isinstance(grid, ast.Name) and len(host.local.get(grid.id, ())) == 1:
        grid = host.local[grid.id][0]
    if not isinstance(grid, (ast.Tuple, ast.List)):
        return
    if len(grid.elts) > 3:
        yield Report(grid, f"launch grid has {len(grid.elts)} dimensions; CUDA grids have at most 3",
                     "fold the extra dimensions into one and split it with // and % in the kernel")
        return
    for elt, (limit, axis) in zip(grid.elts, GRID_LIMITS, strict=False):
        value = host.mod.const_int(elt, host.lookup)
        if value is None or value <= limit:
            continue
        persistent = ("launch fewer blocks that each loop over several tiles: "
                      "for t in range(ct.bid(0), n, ct.num_blocks(0))")
        if axis == "x":
            why = f"grid x = {value} exceeds 2^31-1 = {limit}, the CUDA limit for grid x"
            fix = persistent
        else:
            why = (f"grid {axis} = {value} exceeds {limit}, the CUDA limit for grid y and z "
                   "(this is what the pitfall list's '65535 threads' means: it is not a "
                   "thread count, and grid x may go to 2^31-1)")
            fix = f"put the large extent on grid x, or {persistent}"
        yield Report(elt, why, fix)
