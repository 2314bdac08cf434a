"""What the lint interpreter knows about one value: ``Val``, and how facts combine.

A fact is only recorded when it is certain; the defaults mean unknown. ``agree`` keeps what
two control-flow paths agree on, ``merge_env`` does so for every name, ``broadcast`` gives
the kind, rank and shape of an elementwise result.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from tileproof.lint.names import same


@dataclass(frozen=True)
class Val:
    """What is known for certain about one expression's value; defaults mean unknown."""

    kind: str = "unknown"         # tile | array | scalar | tuple | unknown
    rank: int | None = None
    dims: tuple[ast.expr, ...] | None = None   # literal shape expressions, when known
    dtype: str | None = None      # a literal dtype name such as "float16"
    is_bool: bool = False
    const: bool = False           # a compile-time constant
    value: int | None = None      # its value, when a known int
    runtime_param: bool = False   # a kernel argument not annotated ct.Constant
    ntiles: bool = False          # derived from ct.num_tiles / ct.cdiv
    line: int | None = None       # where a tile was created, for messages


UNKNOWN = Val()


def agree(a: Val, b: Val) -> Val:
    """The facts two control-flow paths agree on."""
    if a == b:
        return a
    dims = a.dims if a.dims is not None and b.dims is not None and len(a.dims) == len(b.dims) \
        and all(same(x, y) for x, y in zip(a.dims, b.dims, strict=True)) else None
    return Val(kind=a.kind if a.kind == b.kind else "unknown",
               rank=a.rank if a.rank == b.rank else None, dims=dims,
               dtype=a.dtype if a.dtype == b.dtype else None,
               is_bool=a.is_bool and b.is_bool, const=a.const and b.const,
               value=a.value if a.value == b.value else None,
               runtime_param=a.runtime_param and b.runtime_param, ntiles=a.ntiles and b.ntiles)


def merge_env(a: dict[str, Val], b: dict[str, Val]) -> dict[str, Val]:
    return {k: agree(a[k], b[k]) if k in a and k in b else UNKNOWN for k in a.keys() | b.keys()}


def broadcast(a: Val, b: Val) -> tuple[str, int | None, tuple[ast.expr, ...] | None]:
    kinds = {a.kind, b.kind}
    kind = "tile" if "tile" in kinds else "scalar" if kinds == {"scalar"} else "unknown"
    rank = max(a.rank, b.rank) if a.rank is not None and b.rank is not None else None
    dims = None
    if a.dims is not None and (b.rank == 0 or (b.dims is not None and len(a.dims) == len(b.dims)
                                               and all(map(same, a.dims, b.dims)))):
        dims = a.dims
    elif b.dims is not None and a.rank == 0:
        dims = b.dims
    return kind, rank, dims
