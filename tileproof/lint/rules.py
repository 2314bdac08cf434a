"""The checks behind ``lint-kernels``: one ``ast`` pass per file, no imports of the code.

Which code is device code: functions decorated with ``cuda.tile.kernel`` or
``cuda.tile.function`` (under whatever alias the file imports), and module-level
undecorated helpers that device code calls by name. Everything else is host code;
only the launch-grid rule looks at it.

Inside device code a small abstract interpreter walks the statements in order and
tracks, per local name, what little can be known for certain: tile or array, rank,
the literal shape expressions, a literal dtype, boolean-ness, compile-time constancy.
Anything it cannot know stays unknown, and a rule that needs an unknown fact stays
silent: a missed mistake costs a compile, a false alarm costs trust in the tool.

Ground truth for every rule was taken from cuda-tile 1.7.0 itself (compiling small
kernels to cubin for sm_90 with tileiras, no GPU needed), not from the pitfall list
alone; where the two disagree the message says so.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import Callable, Iterator

# id -> (slug, one-line description); `--list-rules` prints this table.
RULES: dict[str, tuple[str, str]] = {
    "TP000": ("cannot-parse", "the file is not valid Python, so nothing else was checked"),
    "TP001": ("element-offset-index",
              "an element offset (i * TILE) passed where ct.load/ct.store want a tile index"),
    "TP002": ("host-call-in-kernel",
              "a host-only call (math.*, numpy, round, sum, len on an array...) in device code"),
    "TP003": ("non-pow2-tile-shape",
              "a tile dimension that is not a compile-time power of two"),
    "TP004": ("order-f-transpose", "ct.load(..., order='F') where a transposed tile is meant"),
    "TP005": ("bool-tile-arithmetic", "+ - * / on two boolean values (comparison results)"),
    "TP006": ("tile-subscript", "indexing or slicing a tile or an array inside a kernel"),
    "TP007": ("num-tiles-rank",
              "ct.num_tiles with a tile shape whose rank differs from the array's"),
    "TP008": ("store-rank-mismatch", "ct.store of a tile whose rank differs from its index's"),
    "TP009": ("unpadded-reduction-load",
              "a load in a loop over ct.num_tiles/ct.cdiv, without padding, feeding a reduction"),
    "TP010": ("low-precision-accumulator",
              "a float16/bfloat16 accumulator passed to ct.mma"),
    "TP011": ("grid-limit", "a literal launch grid dimension above the CUDA limit"),
    "TP012": ("constant-constructor",
              "ct.Constant[...](value) in device code: Constant is an annotation only"),
    "TP900": ("bad-ignore",
              "a '# tileproof: ignore[...]' comment without a reason or with an unknown id"),
}


@dataclass(frozen=True)
class Hit:
    """One finding before it gets a path: where, which rule, what and how to fix."""

    line: int
    col: int
    rule: str
    message: str
    fix: str


# --------------------------------------------------------------------------- names

CUDA_TILE = "cuda.tile"
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
STATIC_CALLS = {"static_eval", "static_assert", "static_iter", "static_exception"}
REDUCTIONS = {"sum", "max", "min", "prod", "argmax", "argmin", "reduce"}
SAME_SHAPE_UNARY = {
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh",
    "abs", "negative", "floor", "ceil", "bitwise_not", "cumsum", "cumprod",
}
ELEMENTWISE_BINARY = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "minimum",
                      "maximum", "atan2"}
COMPARISONS = {"greater", "greater_equal", "less", "less_equal", "equal", "not_equal"}
AXIS_PRESERVING = (SAME_SHAPE_UNARY - {"cumsum", "cumprod"}) | ELEMENTWISE_BINARY | COMPARISONS \
    | {"astype", "isnan", "bitwise_and", "bitwise_or", "bitwise_xor"}
ARITH_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
ARITH_FUNCS = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow"}
LOW_PRECISION = {"float16", "bfloat16"}
GRID_LIMITS = ((2**31 - 1, "x"), (65_535, "y"), (65_535, "z"))


def _arg(call: ast.Call, pos: int | None, name: str) -> ast.expr | None:
    """The argument bound to parameter `name` (position `pos` when passed positionally)."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if pos is not None and pos < len(call.args) and not any(
            isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
        return call.args[pos]
    return None


def _dims(node: ast.expr | None) -> tuple[ast.expr, ...] | None:
    """The dimension expressions of a literal shape: (a, b), [a, b], or a bare int."""
    if isinstance(node, (ast.Tuple, ast.List)):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return None
        return tuple(node.elts)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return (node,)
    return None


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class Imports:
    """What the file's names refer to, from its imports (at any level)."""

    def __init__(self, tree: ast.Module):
        self.modules: dict[str, str] = {}   # alias -> dotted module name
        self.members: dict[str, str] = {}   # alias -> "module.member"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.modules[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.modules[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    self.members[a.asname or a.name] = f"{node.module}.{a.name}"

    def qualname(self, node: ast.AST) -> str | None:
        """'cuda.tile.load' for ct.load, 'math.ceil' for math.ceil or an imported ceil."""
        attrs: list[str] = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.modules.get(node.id) or self.members.get(node.id)
        if base is None:
            return None
        return ".".join([base, *reversed(attrs)])

    def ct(self, node: ast.AST) -> str | None:
        """The cuda.tile member a call target names ('load', 'PaddingMode.ZERO'), if any."""
        name = self.qualname(node)
        if name and name.startswith(CUDA_TILE + "."):
            return name[len(CUDA_TILE) + 1:]
        return None


# --------------------------------------------------------------------------- values

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


def _agree(a: Val, b: Val) -> Val:
    """The facts two control-flow paths agree on."""
    if a == b:
        return a
    dims = a.dims if a.dims is not None and b.dims is not None and len(a.dims) == len(b.dims) \
        and all(_same(x, y) for x, y in zip(a.dims, b.dims)) else None
    return Val(kind=a.kind if a.kind == b.kind else "unknown",
               rank=a.rank if a.rank == b.rank else None, dims=dims,
               dtype=a.dtype if a.dtype == b.dtype else None,
               is_bool=a.is_bool and b.is_bool, const=a.const and b.const,
               value=a.value if a.value == b.value else None,
               runtime_param=a.runtime_param and b.runtime_param, ntiles=a.ntiles and b.ntiles)


def _merge_env(a: dict[str, Val], b: dict[str, Val]) -> dict[str, Val]:
    return {k: _agree(a[k], b[k]) if k in a and k in b else UNKNOWN for k in a.keys() | b.keys()}


def _broadcast(a: Val, b: Val) -> tuple[str, int | None, tuple[ast.expr, ...] | None]:
    kinds = {a.kind, b.kind}
    kind = "tile" if "tile" in kinds else "scalar" if kinds == {"scalar"} else "unknown"
    rank = max(a.rank, b.rank) if a.rank is not None and b.rank is not None else None
    dims = None
    if a.dims is not None and (b.rank == 0 or (b.dims is not None and len(a.dims) == len(b.dims)
                                               and all(map(_same, a.dims, b.dims)))):
        dims = a.dims
    elif b.dims is not None and a.rank == 0:
        dims = b.dims
    return kind, rank, dims


_FOLD: dict[type, Callable[[int, int], int]] = {
    ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
    ast.FloorDiv: lambda x, y: x // y, ast.Mod: lambda x, y: x % y,
    ast.LShift: lambda x, y: x << y if y < 64 else None, ast.RShift: lambda x, y: x >> y,
    ast.Pow: lambda x, y: x ** y if 0 <= y < 128 else None,
}


def _fold(op: ast.operator, x: int | None, y: int | None) -> int | None:
    fn = _FOLD.get(type(op))
    if fn is None or x is None or y is None:
        return None
    try:
        return fn(x, y)
    except (ZeroDivisionError, ValueError, OverflowError):
        return None


# --------------------------------------------------------------------------- module

class Module:
    """File-wide facts: imports, module constants, Constant aliases, device functions."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.imp = Imports(tree)
        self.consts: dict[str, int] = {}
        self.const_aliases: dict[str, ast.expr] = {}   # ConstInt = ct.Constant[int]
        self.toplevel_defs: dict[str, ast.FunctionDef] = {}
        self.shadowed: set[str] = set()   # module names that hide a builtin
        assigned: dict[str, int] = {}
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.shadowed.add(stmt.name)
                if isinstance(stmt, ast.FunctionDef):
                    self.toplevel_defs[stmt.name] = stmt
            for target in _assigned_names(stmt):
                assigned[target] = assigned.get(target, 0) + 1
                self.shadowed.add(target)
        self.shadowed |= set(self.imp.modules) | set(self.imp.members)
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], ast.Name) \
                    and assigned.get(stmt.targets[0].id) == 1:
                name = stmt.targets[0].id
                value = self.const_int(stmt.value, self.consts.get)
                if value is not None:
                    self.consts[name] = value
                elif not isinstance(stmt.value, ast.Constant) \
                        and self.is_constant_annotation(stmt.value):
                    self.const_aliases[name] = stmt.value

    def const_int(self, node: ast.expr, lookup: Callable[[str], int | None]) -> int | None:
        """The value of a constant integer expression (literals, known names, cdiv, ceil)."""
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            return lookup(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.const_int(node.operand, lookup)
            return None if v is None else -v
        if isinstance(node, ast.BinOp):
            return _fold(node.op, self.const_int(node.left, lookup),
                         self.const_int(node.right, lookup))
        if isinstance(node, ast.Call) and len(node.args) == 2 and not node.keywords:
            name = self.imp.qualname(node.func)
            a, b = (self.const_int(x, lookup) for x in node.args)
            if name == "cuda.tile.cdiv" and a is not None and b:
                return -(-a // b)
        if isinstance(node, ast.Call) and len(node.args) == 1 \
                and self.imp.qualname(node.func) == "math.ceil" \
                and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.Div):
            a = self.const_int(node.args[0].left, lookup)
            b = self.const_int(node.args[0].right, lookup)
            if a is not None and b:
                return -(-a // b)
        return None

    def is_constant_annotation(self, node: ast.expr | None) -> bool:
        if node is None:
            return False
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except (SyntaxError, ValueError):   # ValueError: NUL bytes, lone surrogates
                return False
        if isinstance(node, ast.Name) and node.id in self.const_aliases:
            return True
        base = node.value if isinstance(node, ast.Subscript) else node
        if self.imp.ct(base) == "Constant":
            return True
        if isinstance(node, ast.Subscript) and (self.imp.qualname(base) or "").endswith(
                "Annotated"):
            return any(isinstance(e, ast.Call) and self.imp.ct(e.func) == "ConstantAnnotation"
                       for e in ast.walk(node.slice))
        return False

    def is_scalar_constant(self, node: ast.expr) -> bool:
        """ct.Constant[int|float|bool] (directly or through an alias), not a tuple."""
        if isinstance(node, ast.Name) and node.id in self.const_aliases:
            node = self.const_aliases[node.id]
        return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) \
            and node.slice.id in ("int", "float", "bool")

    def is_runtime_annotation(self, node: ast.expr | None) -> bool:
        """Unannotated, or annotated as a plain scalar: the value arrives at run time."""
        if node is None:
            return True
        if isinstance(node, ast.Name) and node.id in ("int", "float", "bool") \
                and node.id not in self.shadowed:
            return True
        return self.imp.ct(node) in ("Scalar", "ScalarInt64")

    def device_kind(self, fn: ast.FunctionDef) -> str | None:
        """'kernel' or 'function' for cuTile-decorated functions, else None."""
        for dec in fn.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = self.imp.ct(target)
            if name in ("kernel", "function"):
                return name
        return None


def _assigned_names(stmt: ast.stmt) -> Iterator[str]:
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    for t in targets:
        for node in ast.walk(t):
            if isinstance(node, ast.Name):
                yield node.id


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _device_nodes(imp: Imports, root: ast.AST) -> Iterator[ast.AST]:
    """The nodes under root in source order, skipping what ct.static_eval & co run on host."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.Call) and imp.ct(node.func) in STATIC_CALLS:
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def check_module(tree: ast.Module) -> list[Hit]:
    """Every finding of every rule in one parsed file (ignore comments not applied)."""
    mod = Module(tree)
    hits: list[Hit] = []
    device: list[tuple[ast.FunctionDef, bool]] = []
    seen: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and mod.device_kind(node):
            device.append((node, mod.device_kind(node) == "kernel"))
            seen.add(id(node))
    # kernel = ct.kernel(some_def): the def is device code too (same scope only).
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]:
        defs = {n.name: n for n in _scope_walk(scope) if isinstance(n, ast.FunctionDef)}
        for call in _scope_walk(scope):
            if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name) \
                    and mod.imp.ct(call.func) in ("kernel", "function"):
                fn = defs.get(call.args[0].id)
                if fn is not None and id(fn) not in seen:
                    seen.add(id(fn))
                    device.append((fn, mod.imp.ct(call.func) == "kernel"))
    # Undecorated module-level helpers that device code calls are compiled as device code.
    queue = [fn for fn, _ in device]
    while queue:
        fn = queue.pop()
        for call in _device_nodes(mod.imp, fn):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                helper = mod.toplevel_defs.get(call.func.id)
                if helper is not None and id(helper) not in seen and not helper.decorator_list:
                    seen.add(id(helper))
                    device.append((helper, False))
                    queue.append(helper)
    for fn, is_kernel in device:
        Checker(mod, fn, is_kernel, hits).run({})
    hits.extend(_host_rules(mod))
    return hits


# --------------------------------------------------------------------------- host rules

def _host_rules(mod: Module) -> Iterator[Hit]:
    scopes: list[ast.AST] = [mod.tree] + [n for n in ast.walk(mod.tree)
                                          if isinstance(n, (ast.FunctionDef,
                                                            ast.AsyncFunctionDef))]
    for scope in scopes:
        local: dict[str, list[ast.expr | None]] = {}
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in ast.walk(scope.args):
                if isinstance(arg, ast.arg):
                    local[arg.arg] = [None]      # a parameter: not a known constant
        for node in _scope_walk(scope):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                local.setdefault(node.targets[0].id, []).append(node.value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
                for name in _assigned_names(node):
                    local.setdefault(name, []).append(None)

        def lookup(name: str, local=local) -> int | None:
            values = local.get(name)
            if values is None:
                return mod.consts.get(name)
            if len(values) == 1 and values[0] is not None:
                return mod.const_int(values[0], lookup)
            return None

        for node in _scope_walk(scope):
            if not isinstance(node, ast.Call):
                continue
            if mod.imp.ct(node.func) == "launch":
                yield from _grid_hits(mod, node, local, lookup)


def _scope_walk(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of one scope, not descending into nested function definitions."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _grid_hits(mod: Module, call: ast.Call, local: dict[str, list[ast.expr]],
               lookup: Callable[[str], int | None]) -> Iterator[Hit]:
    grid = _arg(call, 1, "grid")
    if isinstance(grid, ast.Name) and len(local.get(grid.id, ())) == 1:
        grid = local[grid.id][0]
    if not isinstance(grid, (ast.Tuple, ast.List)):
        return
    if len(grid.elts) > 3:
        yield Hit(grid.lineno, grid.col_offset + 1, "TP011",
                  f"launch grid has {len(grid.elts)} dimensions; CUDA grids have at most 3",
                  "fold the extra dimensions into one and split it with // and % in the "
                  "kernel")
        return
    for elt, (limit, axis) in zip(grid.elts, GRID_LIMITS):
        value = mod.const_int(elt, lookup)
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
        yield Hit(elt.lineno, elt.col_offset + 1, "TP011", why, fix)


# --------------------------------------------------------------------------- device rules

@dataclass
class Loop:
    """A for loop whose trip count comes from ct.num_tiles/ct.cdiv (a tile walk)."""

    targets: set[str]
    carried: set[str]           # names whose value flows from one iteration to the next


@dataclass
class Candidate:
    """An unpadded load in a tile walk, indexed by the walk's variable."""

    call: ast.Call
    loop: Loop
    array: str
    axis: int | None            # the index position the walk's variable drives
    rank: int


Sources = dict[int, "int | None"]   # candidate load id -> its walk axis in this value


class Checker:
    """Walks one device function's statements in order, applying the device rules."""

    def __init__(self, mod: Module, fn: ast.FunctionDef, is_kernel: bool, hits: list[Hit]):
        self.mod, self.imp, self.fn, self.is_kernel, self.hits = (
            mod, mod.imp, fn, is_kernel, hits)
        self.loops: list[Loop] = []
        self.taint: dict[str, Sources] = {}         # name -> candidate loads it holds
        self.candidates: dict[int, Candidate] = {}
        self.reported: set[tuple[int, int, str]] = set()
        self.array_rank = self._array_ranks()

    # ---- setup

    def _params(self) -> list[ast.arg]:
        a = self.fn.args
        return [*a.posonlyargs, *a.args, *a.kwonlyargs]

    def _array_ranks(self) -> dict[str, tuple[int, int]]:
        """Array name -> (rank, line) from the index tuples of its loads and stores."""
        reassigned = {name for stmt in ast.walk(self.fn) if isinstance(stmt, ast.stmt)
                      for name in _assigned_names(stmt)}
        seen: dict[str, set[int]] = {}
        where: dict[str, int] = {}
        for call in ast.walk(self.fn):
            if not isinstance(call, ast.Call) or self.imp.ct(call.func) not in ("load", "store"):
                continue
            array, rank = _arg(call, 0, "array"), self._index_rank(_arg(call, 1, "index"))
            if not isinstance(array, ast.Name) or array.id in reassigned or rank is None:
                continue
            seen.setdefault(array.id, set()).add(rank)
            where.setdefault(array.id, call.lineno)
        return {k: (next(iter(v)), where[k]) for k, v in seen.items() if len(v) == 1}

    def _index_rank(self, index: ast.expr | None) -> int | None:
        """How many entries an index has, when that is plain from the source."""
        if isinstance(index, ast.Tuple):
            starred = any(isinstance(e, ast.Starred) for e in index.elts)
            return None if starred else len(index.elts)
        if isinstance(index, ast.Constant) and type(index.value) is int or (
                isinstance(index, ast.Call) and self.imp.ct(index.func) == "bid"):
            return 1
        return None   # a name may hold a tuple

    def run(self, outer: dict[str, Val]) -> None:
        env = dict(outer)
        arrays = self._array_names()
        for p in self._params():
            if p.arg in arrays:
                env[p.arg] = Val(kind="array")
            elif self.is_kernel and self.mod.is_constant_annotation(p.annotation):
                env[p.arg] = Val(kind="scalar", const=True,
                                 rank=0 if self.mod.is_scalar_constant(p.annotation) else None)
            elif self.is_kernel and self.mod.is_runtime_annotation(p.annotation):
                env[p.arg] = Val(runtime_param=True)
            else:
                env[p.arg] = UNKNOWN
        self._block(self.fn.body, env)

    def _array_names(self) -> set[str]:
        out = set()
        for call in ast.walk(self.fn):
            if isinstance(call, ast.Call) and self.imp.ct(call.func) in (
                    "load", "store", "gather", "scatter", "num_tiles") or (
                    isinstance(call, ast.Call) and (self.imp.ct(call.func) or "").startswith(
                        "atomic_")):
                first = _arg(call, 0, "array")
                if isinstance(first, ast.Name):
                    out.add(first.id)
        return out

    # ---- reporting

    def hit(self, node: ast.AST, rule: str, message: str, fix: str) -> None:
        key = (node.lineno, node.col_offset, rule)
        if key not in self.reported:
            self.reported.add(key)
            self.hits.append(Hit(node.lineno, node.col_offset + 1, rule, message, fix))

    # ---- statements

    def _block(self, body: list[ast.stmt], env: dict[str, Val]) -> dict[str, Val]:
        for stmt in body:
            env = self._stmt(stmt, env)
        return env

    def _stmt(self, stmt: ast.stmt, env: dict[str, Val]) -> dict[str, Val]:
        if isinstance(stmt, ast.FunctionDef):
            Checker(self.mod, stmt, False, self.hits).run(env)
            env[stmt.name] = UNKNOWN
            return env
        if isinstance(stmt, (ast.AsyncFunctionDef, ast.ClassDef)):
            return env
        if isinstance(stmt, ast.Assign):
            self._exprs(env, stmt.value, *stmt.targets)
            value = self.eval(stmt.value, env)
            for target in stmt.targets:
                self._bind(target, value, stmt.value, env)
            return env
        if isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self._exprs(env, stmt.value, stmt.target)
                self._bind(stmt.target, self.eval(stmt.value, env), stmt.value, env)
            return env
        if isinstance(stmt, ast.AugAssign):
            as_binop = ast.BinOp(left=_as_load(stmt.target), op=stmt.op, right=stmt.value)
            ast.copy_location(as_binop, stmt)
            self._exprs(env, as_binop, stmt.target)
            self._bind(stmt.target, self.eval(as_binop, env), as_binop, env)
            return env
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            return self._for(stmt, env)
        if isinstance(stmt, ast.While):
            self._exprs(env, stmt.test)
            after = self._block(stmt.body, dict(env))
            after = self._block(stmt.orelse, _merge_env(env, after))
            return _merge_env(env, after)
        if isinstance(stmt, ast.If):
            self._exprs(env, stmt.test)
            return _merge_env(self._block(stmt.body, dict(env)),
                              self._block(stmt.orelse, dict(env)))
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            self._exprs(env, *(item.context_expr for item in stmt.items))
            for item in stmt.items:
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, UNKNOWN, None, env)
            return self._block(stmt.body, env)
        if isinstance(stmt, ast.Try):
            out = self._block(stmt.body, dict(env))
            for handler in stmt.handlers:
                out = _merge_env(out, self._block(handler.body, dict(env)))
            out = self._block(stmt.orelse, out)
            return self._block(stmt.finalbody, out)
        # Expr, Return, Assert, Raise, Delete, ...: check the expressions it holds.
        self._exprs(env, *(n for n in ast.iter_child_nodes(stmt) if isinstance(n, ast.expr)))
        return env

    def _for(self, stmt: ast.For | ast.AsyncFor, env: dict[str, Val]) -> dict[str, Val]:
        self._exprs(env, stmt.iter)
        walk = None
        it = stmt.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" \
                and any(self.eval(a, env).ntiles for a in it.args):
            walk = Loop(targets=_names_in(stmt.target), carried=_carried(stmt.body, env))
        body_env = dict(env)
        for name in _names_in(stmt.target):
            body_env[name] = Val(kind="scalar") if walk else UNKNOWN
        if walk:
            self.loops.append(walk)
        after = self._block(stmt.body, body_env)
        if walk:
            self.loops.pop()
        # After the loop a name holds its value from before or from the body: keep what
        # both agree on (valid cuTile keeps a carried value's type across iterations).
        after = _merge_env(env, after)
        return self._block(stmt.orelse, after)

    def _bind(self, target: ast.expr, value: Val, source: ast.expr | None,
              env: dict[str, Val]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
            if source is not None:
                self._flow(target.id, source)
        elif isinstance(target, (ast.Tuple, ast.List)):
            pairs = isinstance(source, ast.Tuple) and len(source.elts) == len(target.elts) \
                and not any(isinstance(e, ast.Starred) for e in (*source.elts, *target.elts))
            for i, elt in enumerate(target.elts):
                if pairs:        # i, j = ct.bid(0), ct.bid(1)
                    self._bind(elt, self.eval(source.elts[i], env), source.elts[i], env)
                else:
                    self._bind(elt.value if isinstance(elt, ast.Starred) else elt, UNKNOWN,
                               source, env)

    # ---- TP009: unpadded loads in tile walks that reach a reduction or a carried value
    #
    # The last tile of a ct.num_tiles/ct.cdiv walk may stick out past the array; without
    # padding its outside lanes are undetermined. Lanes that stay in place (elementwise
    # math, reductions along other axes) only land in output lanes that the
    # bounds-checked store drops, so that is fine. They do harm when they are reduced
    # along the walked axis (ct.sum/max/... over that axis or all axes, the K axis of
    # ct.mma), or added into a value carried across iterations, which folds every
    # tile onto the same lanes. Only those two cases are reported.

    def _sources(self, expr: ast.AST) -> Sources:
        """The candidate loads whose lanes reach this value, with the walked axis."""
        if isinstance(expr, ast.Name):
            return dict(self.taint.get(expr.id, {}))
        if isinstance(expr, ast.Call) and id(expr) in self.candidates:
            return {id(expr): self.candidates[id(expr)].axis}
        keep = isinstance(expr, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp,
                                 ast.Attribute))
        children: list[ast.AST] = [n for n in ast.iter_child_nodes(expr)
                                   if isinstance(n, ast.expr)]
        if isinstance(expr, ast.Call):
            name = self.imp.ct(expr.func)
            if name in STATIC_CALLS or name == "where":   # ct.where: the lanes are masked
                return {}
            keep = name in AXIS_PRESERVING or (
                name is None and isinstance(expr.func, ast.Attribute)
                and expr.func.attr == "astype")
            if name in REDUCTIONS and _keepdims(expr):
                keep, children = True, [_arg(expr, 0, "x")]
            elif name is not None:
                children = [*expr.args, *(k.value for k in expr.keywords)]
        out: Sources = {}
        for child in children:
            if child is None:
                continue
            for key, axis in self._sources(child).items():
                axis = axis if keep else None
                out[key] = axis if out.get(key, axis) == axis else None
        return out

    def _flow(self, name: str, source: ast.expr) -> None:
        loads = self._sources(source)
        self.taint[name] = loads
        for key, walked in loads.items():
            cand = self.candidates[key]
            # walked is None once the lanes were reshaped, transposed or mixed by an mma
            # (as in attention kernels that mask the edge by hand): say nothing then.
            if walked is not None and name in cand.loop.carried:
                self._report_unpadded(cand, f"folded into '{name}', which is carried "
                                            "across iterations")

    def _mixing_rule(self, call: ast.Call, name: str) -> None:
        """Report candidates whose walked axis this reduction or mma sums over."""
        if name in REDUCTIONS:
            axis = _arg(call, 1, "axis")
            first = _arg(call, 0, "x")
            for key, walked in (self._sources(first) if first is not None else {}).items():
                cand = self.candidates[key]
                if walked is None:
                    continue
                if axis is None or (isinstance(axis, ast.Constant) and axis.value is None):
                    self._report_unpadded(cand, f"reduced over all axes by ct.{name}")
                elif walked in _axes(axis, cand.rank):
                    self._report_unpadded(cand, f"reduced along the walked axis by ct.{name}")
        elif name in ("mma", "matmul"):
            for pos, kw, k_axis in ((0, "x", -1), (1, "y", -2)):
                operand = _arg(call, pos, kw)
                for key, walked in (self._sources(operand) if operand else {}).items():
                    cand = self.candidates[key]
                    if walked is not None and walked == k_axis % cand.rank:
                        self._report_unpadded(cand, f"summed over the K axis by ct.{name}")

    def _report_unpadded(self, cand: Candidate, how: str) -> None:
        self.hit(cand.call, "TP009",
                 f"ct.load of '{cand.array}' walks the tiles of a ct.num_tiles/ct.cdiv loop "
                 f"without padding_mode, and the loaded tile is {how}: the last tile may "
                 "stick out past the array, and its out-of-bounds lanes hold undetermined "
                 "values that end up in the result",
                 "add padding_mode=ct.PaddingMode.ZERO (NEG_INF for a max), or "
                 "'# tileproof: ignore[TP009] <why the extent is a multiple of the tile>'")

    # ---- expressions

    def _nodes(self, expr: ast.AST) -> Iterator[ast.AST]:
        return _device_nodes(self.imp, expr)

    def _exprs(self, env: dict[str, Val], *exprs: ast.expr) -> None:
        nodes = [node for expr in exprs for node in self._nodes(expr)]
        for node in nodes:   # register walk loads first: an enclosing call may reduce them
            if isinstance(node, ast.Call) and self.imp.ct(node.func) == "load":
                self._candidate(node)
        for node in nodes:
            if isinstance(node, ast.Call):
                self._call_rules(node, env)
            elif isinstance(node, ast.BinOp):
                self._binop_rule(node, node.left, node.right, env)
            elif isinstance(node, ast.Subscript):
                self._subscript_rule(node, env)

    def eval(self, node: ast.expr, env: dict[str, Val]) -> Val:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return Val(kind="scalar", const=True, is_bool=True, rank=0)
            if type(node.value) is int:
                return Val(kind="scalar", const=True, value=node.value, rank=0)
            if isinstance(node.value, float):
                return Val(kind="scalar", const=True, rank=0)
            return UNKNOWN
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in self.mod.consts:
                return Val(kind="scalar", const=True, value=self.mod.consts[node.id], rank=0)
            return UNKNOWN
        if isinstance(node, ast.Tuple):
            return Val(kind="tuple", rank=len(node.elts), dims=tuple(node.elts))
        if isinstance(node, ast.Compare):
            vals = [self.eval(n, env) for n in (node.left, *node.comparators)]
            kind, rank = "scalar", 0
            for v in vals:
                kind, rank, _ = _broadcast(Val(kind=kind, rank=rank), v)
            return Val(kind=kind, rank=rank, is_bool=True, const=all(v.const for v in vals))
        if isinstance(node, ast.BoolOp):
            vals = [self.eval(n, env) for n in node.values]
            return Val(kind="scalar", rank=0, is_bool=all(v.is_bool for v in vals),
                       const=all(v.const for v in vals))
        if isinstance(node, ast.UnaryOp):
            v = self.eval(node.operand, env)
            if isinstance(node.op, ast.Not):
                return Val(kind="scalar", rank=0, is_bool=True, const=v.const)
            if isinstance(node.op, ast.USub):
                return replace(v, is_bool=False, value=None if v.value is None else -v.value)
            return replace(v, value=None)
        if isinstance(node, ast.BinOp):
            return self._eval_binop(node.op, self.eval(node.left, env),
                                    self.eval(node.right, env))
        if isinstance(node, ast.IfExp):
            return _agree(self.eval(node.body, env), self.eval(node.orelse, env))
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value, env)
            added = _expand_dims_count(node.slice)
            if base.kind == "tile" and base.rank is not None and added is not None:
                return replace(base, rank=base.rank + added, dims=None)
            return UNKNOWN
        if isinstance(node, ast.Call):
            return self._eval_call(node, env)
        return UNKNOWN

    def _eval_binop(self, op: ast.operator, a: Val, b: Val) -> Val:
        kind, rank, dims = _broadcast(a, b)
        if isinstance(op, ast.MatMult):
            return Val(kind="tile")
        is_bool = isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and a.is_bool and b.is_bool
        dtype = a.dtype if a.dtype == b.dtype else a.dtype if b.const else \
            b.dtype if a.const else None
        return Val(kind=kind, rank=rank, dims=dims, dtype=dtype, is_bool=is_bool,
                   const=a.const and b.const, value=_fold(op, a.value, b.value),
                   runtime_param=a.runtime_param or b.runtime_param,
                   ntiles=a.ntiles or b.ntiles)

    def _dtype(self, node: ast.expr | None) -> str | None:
        name = self.imp.qualname(node) if node is not None else None
        if name is None:
            return None
        module, _, member = name.rpartition(".")
        return member if module in (CUDA_TILE, "numpy", "torch") else None

    def _eval_call(self, call: ast.Call, env: dict[str, Val]) -> Val:
        name = self.imp.ct(call.func)
        x = None
        if name is None and isinstance(call.func, ast.Attribute):
            base = self.eval(call.func.value, env)
            if base.kind != "tile":
                return UNKNOWN
            name, x = call.func.attr, base   # tile methods: t.reshape(...), t.astype(...)
            call = ast.Call(func=call.func, args=[call.func.value, *call.args],
                            keywords=call.keywords)
        if name is None:
            return UNKNOWN
        arg = lambda pos, kw: _arg(call, pos, kw)  # noqa: E731
        if x is None and name in SAME_SHAPE_UNARY | REDUCTIONS | {
                "astype", "transpose", "permute", "expand_dims", "reshape", "isnan"}:
            first = arg(0, "x")
            x = self.eval(first, env) if first is not None else UNKNOWN
        line = call.func.lineno
        if name == "load":
            dims = _dims(arg(2, "shape"))
            if dims is None:
                shape = arg(2, "shape")
                v = self.eval(shape, env) if shape is not None else UNKNOWN
                dims = v.dims if v.kind == "tuple" else None
            return Val(kind="tile", rank=None if dims is None else len(dims), dims=dims,
                       line=line)
        if name in ("full", "zeros", "ones"):
            dims = self._shape_dims(arg(0, "shape"), env)
            dtype = self._dtype(arg(2 if name == "full" else 1, "dtype"))
            return Val(kind="tile", rank=None if dims is None else len(dims), dims=dims,
                       dtype=dtype, is_bool=dtype == "bool_", line=line)
        if name == "arange":
            return Val(kind="tile", rank=1, dims=(arg(0, "size"),) if arg(0, "size") else None,
                       line=line)
        if name == "bid" or name == "num_blocks":
            return Val(kind="scalar", rank=0)
        if name in ("num_tiles", "cdiv"):
            return Val(kind="scalar", rank=0, ntiles=True)
        if name == "astype":
            dtype = self._dtype(arg(1, "dtype"))
            return replace(x, dtype=dtype, is_bool=dtype == "bool_", const=False, value=None,
                           line=line)
        if name in ("reshape", "broadcast_to"):
            dims = self._shape_dims(arg(1, "shape"), env)
            return Val(kind="tile", rank=None if dims is None else len(dims), dims=dims,
                       dtype=x.dtype if x else None, line=line)
        if name == "extract":
            dims = self._shape_dims(arg(2, "shape"), env)
            return Val(kind="tile", rank=None if dims is None else len(dims), dims=dims,
                       line=line)
        if name in ("transpose", "permute"):
            return Val(kind="tile", rank=x.rank, dtype=x.dtype, line=line)
        if name == "expand_dims":
            return Val(kind="tile", rank=None if x.rank is None else x.rank + 1, line=line)
        if name in REDUCTIONS:
            return self._eval_reduction(call, x)
        if name in SAME_SHAPE_UNARY or name == "isnan":
            return replace(x, is_bool=name == "isnan", const=False, value=None)
        if name in ("mma", "mma_scaled"):
            acc = arg(2 if name == "mma" else 4, "acc")
            return replace(self.eval(acc, env), line=line) if acc is not None else \
                Val(kind="tile")
        if name == "matmul":
            a, b = (self.eval(n, env) if n is not None else UNKNOWN
                    for n in (arg(0, "x"), arg(1, "y")))
            rank = max(a.rank, b.rank) if a.rank and b.rank and min(a.rank, b.rank) >= 2 \
                else None
            return Val(kind="tile", rank=rank, line=line)
        if name in ELEMENTWISE_BINARY | COMPARISONS | {"bitwise_and", "bitwise_or",
                                                       "bitwise_xor", "where"}:
            vals = [self.eval(n, env) for n in call.args]
            if not vals:
                return UNKNOWN
            out = vals[0] if name != "where" else vals[1] if len(vals) > 1 else UNKNOWN
            for v in vals[1:]:
                k, r, d = _broadcast(out, v)
                out = Val(kind=k, rank=r, dims=d, dtype=out.dtype if out.dtype == v.dtype
                          else None)
            is_bool = name in COMPARISONS or (name.startswith("bitwise")
                                              and all(v.is_bool for v in vals))
            return replace(out, is_bool=is_bool, const=False, value=None)
        if name == "gather":
            return Val(kind="tile", line=line)
        return UNKNOWN

    def _shape_dims(self, node: ast.expr | None, env: dict[str, Val]) -> tuple | None:
        dims = _dims(node)
        if dims is None and isinstance(node, ast.Name):
            v = self.eval(node, env)
            if v.kind == "tuple":
                return v.dims
            if v.kind == "scalar" and v.const:
                return (node,)
        return dims

    def _eval_reduction(self, call: ast.Call, x: Val) -> Val:
        if x.rank is None:
            return Val(kind="tile")
        axis, keep = _arg(call, 1, "axis"), _arg(call, None, "keepdims")
        if isinstance(keep, ast.Constant) and keep.value is True:
            return Val(kind="tile", rank=x.rank, line=call.lineno)
        if keep is not None and not (isinstance(keep, ast.Constant) and keep.value is False):
            return Val(kind="tile")
        if axis is None or (isinstance(axis, ast.Constant) and axis.value is None):
            return Val(kind="tile", rank=0, line=call.lineno)
        if isinstance(axis, ast.Constant) and type(axis.value) is int:
            return Val(kind="tile", rank=x.rank - 1, line=call.lineno)
        if isinstance(axis, ast.Tuple):
            return Val(kind="tile", rank=x.rank - len(axis.elts), line=call.lineno)
        return Val(kind="tile")

    # ---- expression rules

    def _call_rules(self, call: ast.Call, env: dict[str, Val]) -> None:
        name = self.imp.ct(call.func)
        if isinstance(call.func, ast.Subscript) and self.imp.ct(call.func.value) == "Constant":
            # On the host Constant[int](1) is just int(1); in device code it fails.
            self.hit(call, "TP012",
                     "ct.Constant[...] is a type annotation; calling it in device code does "
                     "not make a constant (cuTile: 'Cannot create constant from value of type "
                     "typing._AnnotatedAlias')",
                     "write the plain value (x = 1): values computed from literals are "
                     "compile-time constants already; ct.Constant only annotates parameters")
            return
        if name is None:
            if isinstance(call.func, ast.Attribute) and call.func.attr == "reshape" \
                    and self.eval(call.func.value, env).kind == "tile":
                self._pow2_rule(call, _arg(call, 0, "shape"), env, "reshape")
            self._host_rule(call, env)
            return
        if name == "load":
            self._element_index_rule(call, _arg(call, 1, "index"),
                                     _dims(_arg(call, 2, "shape")), "ct.load")
            self._pow2_rule(call, _arg(call, 2, "shape"), env, "ct.load")
            self._order_rule(call)
        elif name == "store":
            tile = _arg(call, 2, "tile")
            value = self.eval(tile, env) if tile is not None else UNKNOWN
            self._element_index_rule(call, _arg(call, 1, "index"), value.dims, "ct.store")
            self._store_rank_rule(call, value)
        elif name == "gather" and _arg(call, None, "shape") is not None:
            self.hit(call, "TP001",
                     "ct.gather called with shape=, as if it were ct.load: gather takes "
                     "element indices (one index tile per axis) and no tile shape",
                     "for tile-indexed access use ct.load(array, index=(tile indices), "
                     "shape=...); for gather pass element indices such as "
                     "i * TILE + ct.arange(TILE, dtype=ct.int32)")
        elif name in ("full", "zeros", "ones"):
            self._pow2_rule(call, _arg(call, 0, "shape"), env, f"ct.{name}")
        elif name == "arange":
            self._pow2_rule(call, _arg(call, 0, "size"), env, "ct.arange")
        elif name in ("reshape", "broadcast_to"):
            self._pow2_rule(call, _arg(call, 1, "shape"), env, f"ct.{name}")
        elif name == "extract":
            self._pow2_rule(call, _arg(call, 2, "shape"), env, "ct.extract")
        elif name == "num_tiles":
            self._pow2_rule(call, _arg(call, 2, "shape"), env, "ct.num_tiles")
            self._num_tiles_rule(call)
        elif name in ("mma", "mma_scaled"):
            self._accumulator_rule(call, env, _arg(call, 2 if name == "mma" else 4, "acc"))
        elif name in ARITH_FUNCS and len(call.args) >= 2:
            self._binop_rule(call, call.args[0], call.args[1], env, f"ct.{name}")
        if name in REDUCTIONS or name in ("mma", "matmul"):
            self._mixing_rule(call, name)

    def _element_index_rule(self, call: ast.Call, index: ast.expr | None,
                            dims: tuple[ast.expr, ...] | None, what: str) -> None:
        """TP001: index[i] is k * shape[i], an element offset instead of a tile index."""
        if index is None or dims is None:
            return
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        if len(items) != len(dims):
            return
        for item, dim in zip(items, dims):
            if not (isinstance(item, ast.BinOp) and isinstance(item.op, ast.Mult)):
                continue
            if isinstance(dim, ast.Constant) and dim.value == 1:
                continue
            for factor, other in ((item.right, item.left), (item.left, item.right)):
                if _same(factor, dim):
                    size, idx = ast.unparse(dim), ast.unparse(other)
                    self.hit(item, "TP001",
                             f"{what} index '{ast.unparse(item)}' is an element offset: "
                             f"the index counts tiles of size {size} along this axis, so "
                             f"this addresses tile {idx} * {size}, far past the intended one",
                             f"pass the tile index '{idx}'; {what} multiplies by the "
                             "tile shape itself")
                    break

    def _pow2_rule(self, call: ast.Call, shape: ast.expr | None, env: dict[str, Val],
                   what: str) -> None:
        """TP003: every tile dimension must be a compile-time power of two."""
        dims = _dims(shape)
        if dims is None and isinstance(shape, ast.Name):
            v = self.eval(shape, env)
            dims = v.dims if v.kind == "tuple" else (shape,)
        for dim in dims or ():
            v = self.eval(dim, env)
            if v.runtime_param:
                self.hit(dim, "TP003",
                         f"{what} tile dimension '{ast.unparse(dim)}' comes from a kernel "
                         "argument that is not ct.Constant: tile shapes must be compile-time "
                         "constants (cuTile: 'Expected a constant integer tuple')",
                         f"annotate the parameter as {ast.unparse(dim)}: ct.Constant[int] "
                         "(array sizes stay runtime; only tile sizes must be constants)")
            elif v.value is not None and v.value > 0 and not _is_pow2(v.value):
                up = 1 << (v.value - 1).bit_length()
                text = ast.unparse(dim)
                shown = text if text == str(v.value) else f"{text} = {v.value}"
                self.hit(dim, "TP003",
                         f"{what} tile dimension {shown} is not a power of two; cuTile "
                         "tile dimensions must be powers of two",
                         f"use {up // 2} or {up} and let padding and the bounds-checked "
                         "store handle the ragged edge")

    def _order_rule(self, call: ast.Call) -> None:
        """TP004: order='F' permutes the tile space; it is not 'give me the transpose'."""
        order = _arg(call, None, "order")
        if isinstance(order, ast.Constant) and order.value == "F":
            self.hit(order, "TP004",
                     "ct.load(..., order='F') reverses which array axis each index and shape "
                     "entry refers to; it does not transpose the tile you would get with the "
                     "default order (index and shape must then be given in reversed axis "
                     "order, or shapes and results come out wrong)",
                     "load with the default order and transpose explicitly: "
                     "ct.transpose(ct.load(...)) or ct.permute(tile, (1, 0))")

    def _binop_rule(self, node: ast.AST, left: ast.expr, right: ast.expr,
                    env: dict[str, Val], what: str | None = None) -> None:
        """TP005: arithmetic between two booleans (cuTile: 'does not support bool')."""
        if what is None and not isinstance(node.op, ARITH_OPS):
            return
        a, b = self.eval(left, env), self.eval(right, env)
        if not (a.is_bool and b.is_bool) or (a.const and b.const):
            return
        op = what or ast.unparse(node)
        self.hit(node, "TP005",
                 f"arithmetic on two boolean values in '{op}': cuTile rejects +, -, *, / on "
                 "bool ('Binary arithmetic op does not support bool')",
                 "combine masks with & or |, or cast first: "
                 "ct.astype(cond, ct.int32); use ct.where(mask, x, 0) to zero lanes")

    def _subscript_rule(self, node: ast.Subscript, env: dict[str, Val]) -> None:
        """TP006: tiles accept only None/.../: subscripts (expand_dims); arrays none."""
        base = self.eval(node.value, env)
        text = ast.unparse(node)
        if base.kind == "array":
            self.hit(node, "TP006",
                     f"'{text}' subscripts an array inside a kernel; arrays are not "
                     "subscriptable in cuTile",
                     "load one element with ct.load(array, index=(...), shape=()), a tile "
                     "with ct.load, or arbitrary elements with ct.gather")
        elif base.kind == "tile" and (isinstance(node.ctx, ast.Store)
                                      or _expand_dims_count(node.slice) is None):
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
            self.hit(node, "TP006", f"'{text}' {what}", fix)

    def _num_tiles_rule(self, call: ast.Call) -> None:
        """TP007: ct.num_tiles' shape needs one entry per array axis."""
        array, shape = _arg(call, 0, "array"), _dims(_arg(call, 2, "shape"))
        if not isinstance(array, ast.Name) or shape is None or array.id not in self.array_rank:
            return
        rank, line = self.array_rank[array.id]
        if shape and len(shape) != rank:   # shape=() (one element per tile) is valid
            self.hit(call, "TP007",
                     f"ct.num_tiles({array.id}, ..., shape=...) gives a {len(shape)}-d tile "
                     f"shape, but {array.id} is {rank}-d (its ct.load/ct.store index at line "
                     f"{line} has {rank} entries)",
                     f"pass the full {rank}-d tile shape used to load {array.id}, e.g. "
                     "shape=(tm, tk) for axis=1 of a 2-d array")

    def _store_rank_rule(self, call: ast.Call, value: Val) -> None:
        """TP008: a stored tile must have the index's rank (or be 0-d)."""
        n = self._index_rank(_arg(call, 1, "index"))
        if n is None or value.kind != "tile" or not value.rank:
            return
        if value.rank != n:
            made = f" (made at line {value.line})" if value.line else ""
            self.hit(call, "TP008",
                     f"ct.store of a {value.rank}-d tile{made} with a {n}-entry index: the "
                     "tile's rank must equal the index's and the array's (tileiras fails "
                     "with only 'Return code 3')",
                     f"reshape it first: ct.reshape(tile, <a {n}-d shape>); with reductions, "
                     "keepdims=True keeps the rank easy to follow")

    def _candidate(self, call: ast.Call) -> None:
        """TP009 setup: remember an unpadded load that walks a ct.num_tiles loop."""
        if id(call) in self.candidates or not self.loops or any(
                kw.arg in ("padding_mode", "padding_value", "check_bounds") or kw.arg is None
                for kw in call.keywords):
            return
        index, array = _arg(call, 1, "index"), _arg(call, 0, "array")
        if index is None:
            return
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        dims = _dims(_arg(call, 2, "shape"))
        for loop in reversed(self.loops):
            axes = [i for i, item in enumerate(items) if _names_in(item) & loop.targets]
            if len(axes) == 1 and dims is not None and (
                    len(dims) != len(items) or (isinstance(dims[axes[0]], ast.Constant)
                                                and dims[axes[0]].value == 1)):
                return   # a scalar load, or a tile 1 wide along the walk: never sticks out
            if axes:
                self.candidates[id(call)] = Candidate(
                    call, loop, ast.unparse(array) if array is not None else "?",
                    axes[0] if len(axes) == 1 else None, len(items))
                return

    def _accumulator_rule(self, call: ast.Call, env: dict[str, Val],
                          acc: ast.expr | None) -> None:
        """TP010: ct.mma accumulates in the acc dtype; float16/bfloat16 loses the sum."""
        value = self.eval(acc, env) if acc is not None else UNKNOWN
        if value.dtype not in LOW_PRECISION:
            return
        made = f" (created at line {value.line})" if value.line else ""
        extra = ("; bfloat16 accumulators are not supported by ct.mma at all"
                 if value.dtype == "bfloat16" else "")
        self.hit(acc, "TP010",
                 f"the ct.mma accumulator '{ast.unparse(acc)}' is {value.dtype}{made}: mma "
                 f"keeps the acc dtype, so every partial sum is rounded to {value.dtype}"
                 f"{extra}",
                 "create the accumulator with dtype=ct.float32 and cast once before the "
                 "store: ct.astype(acc, out.dtype)")

    def _host_rule(self, call: ast.Call, env: dict[str, Val]) -> None:
        """TP002: calls the cuTile compiler rejects in device code."""
        func = call.func
        if isinstance(func, ast.Name) and func.id not in env and func.id not in \
                self.mod.shadowed:
            if func.id in HOST_BUILTINS:
                alt = HOST_BUILTINS[func.id]
                self.hit(call, "TP002",
                         f"{func.id}() is a host builtin; cuTile device code rejects it "
                         f"('{func.id}() is not supported in device code')",
                         (f"use {alt}" if alt else "do it on the host") +
                         ", or compute it on the host and pass a ct.Constant argument")
                return
            if func.id == "len" and call.args:
                v = self.eval(call.args[0], env)
                if v.kind in ("array", "tile"):
                    what = ast.unparse(call.args[0])
                    self.hit(call, "TP002",
                             f"len({what}) on {'an array' if v.kind == 'array' else 'a tile'}"
                             ": cuTile supports len() only on tuples",
                             f"use {what}.shape[0] (or len({what}.shape) for the rank)")
                return
        name = self.imp.qualname(func)
        if name is None or name.startswith(CUDA_TILE):
            return
        module, _, member = name.rpartition(".")
        if name.split(".")[0] not in HOST_MODULES or (module == "numpy"
                                                      and member in NUMPY_DTYPES):
            return
        fix = HOST_FIXES.get(name, "the ct.* equivalent")
        self.hit(call, "TP002",
                 f"{name}() is a host function; cuTile compiles device code itself and "
                 "rejects it ('is not supported in device code')",
                 f"use {fix}; or compute the value on the host and pass it as a "
                 "ct.Constant argument; ct.static_eval(...) runs host Python at compile time")


def _as_load(target: ast.expr) -> ast.expr:
    if isinstance(target, ast.Name):
        return ast.copy_location(ast.Name(id=target.id, ctx=ast.Load()), target)
    return target


def _expand_dims_count(index: ast.expr) -> int | None:
    """How many axes a valid tile subscript adds, or None if it is not a valid one."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    added = 0
    for item in items:
        if isinstance(item, ast.Constant) and item.value is None:
            added += 1
        elif isinstance(item, ast.Constant) and item.value is Ellipsis:
            continue
        elif isinstance(item, ast.Slice) and item.lower is None and item.upper is None \
                and item.step is None:
            continue
        else:
            return None
    return added


def _keepdims(call: ast.Call) -> bool:
    keep = _arg(call, None, "keepdims")
    return isinstance(keep, ast.Constant) and keep.value is True


def _axes(axis: ast.expr, rank: int) -> set[int]:
    """The axes a literal axis argument names, normalized; empty when not literal."""
    items = axis.elts if isinstance(axis, ast.Tuple) else [axis]
    out = set()
    for item in items:
        negative = isinstance(item, ast.UnaryOp) and isinstance(item.op, ast.USub)
        literal = item.operand if negative else item
        value = literal.value if isinstance(literal, ast.Constant) else None
        if type(value) is not int:
            return set()
        value = -value if negative else value
        out.add(value % rank if rank else value)
    return out


def _carried(body: list[ast.stmt], before: dict[str, Val]) -> set[str]:
    """Names bound before a loop that its body reads before (re)binding them."""
    bound: set[str] = set()
    carried: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id not in bound and node.id in before:
                carried.add(node.id)
            elif isinstance(node.ctx, ast.Store):
                bound.add(node.id)
        elif isinstance(node, ast.Assign):
            visit(node.value)
            for target in node.targets:
                visit(target)
        elif isinstance(node, ast.AugAssign):
            visit(_as_load(node.target))
            visit(node.value)
            visit(node.target)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                               ast.Lambda)):
            return
        else:
            for child in ast.iter_child_nodes(node):
                visit(child)

    for stmt in body:
        visit(stmt)
    return carried
