"""TP010: a float16/bfloat16 accumulator passed to ct.mma."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tileproof.lint.interp import Interpreter
from tileproof.lint.names import call_arg
from tileproof.lint.rule_table import Report, rule
from tileproof.lint.values import UNKNOWN, Val

LOW_PRECISION = {"float16", "bfloat16"}


@rule("TP010", "low-precision-accumulator", "a float16/bfloat16 accumulator passed to ct.mma",
      on=(ast.Call,))
def low_precision_accumulator(d: Interpreter, call: ast.Call, env: dict[str, Val]) -> Iterator[Report]:
    """ct.mma accumulates in the acc dtype; float16/bfloat16 loses the sum."""
    name = d.imp.ct(call.func)
    if name not in ("mma", "mma_scaled"):
        return
    acc = call_arg(call, 2 if name == "mma" else 4, "acc")
    value = d.eval(acc, env) if acc is not None else UNKNOWN
    if acc is None or value.dtype not in LOW_PRECISION:
        return
    made = f" (created at line {value.line})" if value.line else ""
    extra = ("; bfloat16 accumulators are not supported by ct.mma at all"
             if value.dtype == "bfloat16" else "")
    yield Report(acc,
                 f"the ct.mma accumulator '{ast.unparse(acc)}' is {value.dtype}{made}: mma "
                 f"keeps the acc dtype, so every partial sum is rounded to {value.dtype}"
                 f"{extra}",
                 "create the accumulator with dtype=ct.float32 and cast once before the "
                 "store: ct.astype(acc, out.dtype)")
