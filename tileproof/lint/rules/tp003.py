"""TP003: a tile dimension that is not a compile-time power of two."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tileproof.lint.interp import Interpreter
from tileproof.lint.names import call_arg, is_pow2, literal_dims
from tileproof.lint.rule_table import Report, rule
from tileproof.lint.values import Val

SHAPE_ARGUMENT = {
    "load": (2, "shape"), "full": (0, "shape"), "zeros": (0, "shape"), "ones": (0, "shape"),
    "arange": (0, "size"), "reshape": (1, "shape"), "broadcast_to": (1, "shape"),
    "extract": (2, "shape"), "num_tiles": (2, "shape"),
}
"""ct.<name> -> where its tile shape argument is (position, keyword)."""


@rule("TP003", "non-pow2-tile-shape", "a tile dimension that is not a compile-time power of two",
      on=(ast.Call,))
def non_pow2_tile_shape(d: Interpreter, call: ast.Call, env: dict[str, Val]) -> Iterator[Report]:
    """Every tile dimension must be a compile-time power of two."""
    name = d.imp.ct(call.func)
    if name is None:
        if isinstance(call.func, ast.Attribute) and call.func.attr == "reshape" \
                and d.eval(call.func.value, env).kind == "tile":
            yield from _pow2(d, call_arg(call, 0, "shape"), env, "reshape")
    elif name in SHAPE_ARGUMENT:
        yield from _pow2(d, call_arg(call, *SHAPE_ARGUMENT[name]), env, f"ct.{name}")


def _pow2(d: Interpreter, shape: ast.expr | None, env: dict[str, Val], what: str) -> Iterator[Report]:
    dims = literal_dims(shape)
    if dims is None and isinstance(shape, ast.Name):
        v = d.eval(shape, env)
        dims = v.dims if v.kind == "tuple" else (shape,)
    for dim in dims or ():
        v = d.eval(dim, env)
        if v.runtime_param:
            yield Report(dim,
                         f"{what} tile dimension '{ast.unparse(dim)}' comes from a kernel "
                         "argument that is not ct.Constant: tile shapes must be compile-time "
                         "constants (cuTile: 'Expected a constant integer tuple')",
                         f"annotate the parameter as {ast.unparse(dim)}: ct.Constant[int] "
                         "(array sizes stay runtime; only tile sizes must be constants)")
        elif v.value is not None and v.value > 0 and not is_pow2(v.value):
            up = 1 << (v.value - 1).bit_length()
            text = ast.unparse(dim)
            shown = text if text == str(v.value) else f"{text} = {v.value}"
            yield Report(dim,
                         f"{what} tile dimension {shown} is not a power of two; cuTile "
                         "tile dimensions must be powers of two",
                         f"use {up // 2} or {up} and let padding and the bounds-checked "
                         "store handle the ragged edge")
