"""TP002: a host-only call (math.*, numpy, round, sum, len on an array...) in device code."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tileproof.lint.interp import Interpreter
from tileproof.lint.names import CUDA_TILE
from tileproof.lint.rule_table import Report, rule
from tileproof.lint.values import Val

HOST_MODULES = ("math", "numpy", "torch", "cupy", "random", "time", "os", "sys", "statistics")
# numpy scalar types double as dtypes; cuTile accepts np.float32(2.0) in device code.
NUMPY_DTYPES = {
    "bool_", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
}
# Builtins that cuda-tile 1.7.0 rejects in device code (each one checked by compiling).
# range, print, min, max, abs, len (of tuples), int, float, bool, str, tuple, divmod,
# getattr are supported and never reported.
HOST_BUILTINS = {
    "round": "ct.floor/ct.ceil, or round on the host", "sum": "ct.sum(tile, axis=...)",
    "pow": "x ** y or ct.pow(x, y)", "any": "ct.max of a bool tile, or ct.where",
    "all": "ct.min of a bool tile, or ct.where", "sorted": "sort on the host",
    "isinstance": "ct.static_eval(isinstance(...))", "hasattr": "ct.static_eval(hasattr(...))",
    "callable": "ct.static_eval(callable(...))", "format": "an f-string with print()",
    "hash": None, "id": None, "iter": "a for loop over range()", "next": "a for loop over range()",
    "ord": None, "chr": None, "enumerate": "range() and an index",
    "zip": "range() and an index", "list": "a tuple", "dict": "a tuple or separate names",
    "set": "a tuple", "reversed": "range(n - 1, -1, -1)", "map": "a tuple comprehension",
    "filter": "a tuple comprehension", "type": "ct.static_eval(type(...))",
    "open": None, "input": None, "eval": None, "exec": None,
}
HOST_FIXES = {
    "math.ceil": "ct.cdiv(a, b) for a scalar, or ct.num_tiles(array, axis, shape) for a tile count",
    "math.floor": "a // b, or ct.floor(x) for a tile",
    "math.sqrt": "ct.sqrt", "math.exp": "ct.exp", "math.log": "ct.log", "math.log2": "ct.log2",
    "math.prod": "multiply the factors", "math.isnan": "ct.isnan",
    "numpy.zeros": "ct.zeros(shape, dtype=...)", "numpy.ones": "ct.ones(shape, dtype=...)",
    "numpy.full": "ct.full(shape, value, dtype=...)", "numpy.arange": "ct.arange(n, dtype=...)",
    "numpy.exp": "ct.exp", "numpy.sqrt": "ct.sqrt", "numpy.maximum": "ct.maximum",
    "numpy.minimum": "ct.minimum", "numpy.where": "ct.where", "numpy.sum": "ct.sum",
    "numpy.max": "ct.max", "numpy.matmul": "ct.mma or ct.matmul",
}


@rule("TP002", "host-call-in-kernel",
      "a host-only call (math.*, numpy, round, sum, len on an array...) in device code",
      on=(ast.Call,))
def host_call_in_kernel(d: Interpreter, call: ast.Call, env: dict[str, Val]) -> Iterator[Report]:
    """Calls the cuTile compiler rejects in device code."""
    if d.imp.ct(call.func) is not None:
        return
    func = call.func
    if isinstance(func, ast.Name) and func.id not in env and func.id not in d.mod.shadowed:
        if func.id in HOST_BUILTINS:
            alt = HOST_BUILTINS[func.id]
            yield Report(call,
                         f"{func.id}() is a host builtin; cuTile device code rejects it "
                         f"('{func.id}() is not supported in device code')",
                         (f"use {alt}" if alt else "do it on the host") +
                         ", or compute it on the host and pass a ct.Constant argument")
            return
        if func.id == "len" and call.args:
            v = d.eval(call.args[0], env)
            if v.kind in ("array", "tile"):
                what = ast.unparse(call.args[0])
                yield Report(call,
                             f"len({what}) on {'an array' if v.kind == 'array' else 'a tile'}"
                             ": cuTile supports len() only on tuples",
                             f"use {what}.shape[0] (or len({what}.shape) for the rank)")
            return
    name = d.imp.qualname(func)
    if name is None or name.startswith(CUDA_TILE):
        return
    module, _, member = name.rpartition(".")
    if name.split(".")[0] not in HOST_MODULES or (module == "numpy" and member in NUMPY_DTYPES):
        return
    fix = HOST_FIXES.get(name, "the ct.* equivalent")
    yield Report(call,
                 f"{name}() is a host function; cuTile compiles device code itself and "
                 "rejects it ('is not supported in device code')",
                 f"use {fix}; or compute the value on the host and pass it as a "
                 "ct.Constant argument; ct.static_eval(...) runs host Python at compile time")
