"""The abstract interpreter behind the device-code rules of ``lint-kernels``.

Inside device code it walks the statements in order and tracks, per local name (``lint.values.Val``), what
little can be known for certain: tile or array, rank, the literal shape expressions, a
literal dtype, boolean-ness, compile-time constancy. Anything it cannot know stays
unknown, and a rule that needs an unknown fact stays silent: a missed mistake costs a
compile, a false alarm costs trust in the tool.

It also keeps the facts of tile walks (``for`` loops over ``ct.num_tiles``/``ct.cdiv``):
which unpadded loads walk them and which values their lanes reach. At every device node
(``ast.Call``, ``ast.BinOp``, ``ast.Subscript``) and every ``Bind`` of a name it hands the
event to the rules registered for it (``registry.rules_for``); it knows no rule itself.
``device_functions`` says which functions are device code; ``host_scopes`` gives the host
rules each scope's known constants.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, replace

from tileproof.lint.names import (
    AXIS_PRESERVING,
    COMPARISONS,
    CUDA_TILE,
    ELEMENTWISE_BINARY,
    REDUCTIONS,
    SAME_SHAPE_UNARY,
    STATIC_CALLS,
    Module,
    assigned_names,
    call_arg,
    device_nodes,
    fold,
    literal_dims,
    names_in,
    scope_walk,
)
from tileproof.lint.rule_table import HOST_LAUNCH, Hit, hits, rules_for
from tileproof.lint.values import UNKNOWN, Val, agree, broadcast, merge_env


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


@dataclass(frozen=True)
class Bind:
    """The event of a value flowing into a local name: ``name = source``."""

    node: ast.expr
    """The source expression (where a report about the binding points)."""
    name: str
    loads: Sources
    """The walk loads whose lanes reach the new value, with their walked axis (``sources``)."""


class Interpreter:
    """Walks one device function's statements in order, handing each event to its rules."""

    def __init__(self, mod: Module, fn: ast.FunctionDef, is_kernel: bool, found: list[Hit]):
        self.mod, self.imp, self.fn, self.is_kernel, self.found = (
            mod, mod.imp, fn, is_kernel, found)
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
                      for name in assigned_names(stmt)}
        seen: dict[str, set[int]] = {}
        where: dict[str, int] = {}
        for call in ast.walk(self.fn):
            if not isinstance(call, ast.Call) or self.imp.ct(call.func) not in ("load", "store"):
                continue
            array, rank = call_arg(call, 0, "array"), self.index_rank(call_arg(call, 1, "index"))
            if not isinstance(array, ast.Name) or array.id in reassigned or rank is None:
                continue
            seen.setdefault(array.id, set()).add(rank)
            where.setdefault(array.id, call.lineno)
        return {k: (next(iter(v)), where[k]) for k, v in seen.items() if len(v) == 1}

    def index_rank(self, index: ast.expr | None) -> int | None:
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
                first = call_arg(call, 0, "array")
                if isinstance(first, ast.Name):
                    out.add(first.id)
        return out

    # ---- reporting

    def dispatch(self, event: object, key: object, env: dict[str, Val]) -> None:
        """Run every rule registered for ``key`` on ``event``; one hit per place and rule."""
        for rule in rules_for(key):
            for hit in hits(rule, rule.fn(self, event, env)):
                if (hit.line, hit.col, hit.rule) not in self.reported:
                    self.reported.add((hit.line, hit.col, hit.rule))
                    self.found.append(hit)

    # ---- statements

    def _block(self, body: list[ast.stmt], env: dict[str, Val]) -> dict[str, Val]:
        for stmt in body:
            env = self._stmt(stmt, env)
        return env

    def _stmt(self, stmt: ast.stmt, env: dict[str, Val]) -> dict[str, Val]:
        if isinstance(stmt, ast.FunctionDef):
            Interpreter(self.mod, stmt, False, self.found).run(env)
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
            as_binop = ast.BinOp(left=as_load(stmt.target), op=stmt.op, right=stmt.value)
            ast.copy_location(as_binop, stmt)
            self._exprs(env, as_binop, stmt.target)
            self._bind(stmt.target, self.eval(as_binop, env), as_binop, env)
            return env
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            return self._for(stmt, env)
        if isinstance(stmt, ast.While):
            self._exprs(env, stmt.test)
            after = self._block(stmt.body, dict(env))
            after = self._block(stmt.orelse, merge_env(env, after))
            return merge_env(env, after)
        if isinstance(stmt, ast.If):
            self._exprs(env, stmt.test)
            return merge_env(self._block(stmt.body, dict(env)),
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
                out = merge_env(out, self._block(handler.body, dict(env)))
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
            walk = Loop(targets=names_in(stmt.target), carried=carried(stmt.body, env))
        body_env = dict(env)
        for name in names_in(stmt.target):
            body_env[name] = Val(kind="scalar") if walk else UNKNOWN
        if walk:
            self.loops.append(walk)
        after = self._block(stmt.body, body_env)
        if walk:
            self.loops.pop()
        # After the loop a name holds its value from before or from the body: keep what
        # both agree on (valid cuTile keeps a carried value's type across iterations).
        after = merge_env(env, after)
        return self._block(stmt.orelse, after)

    def _bind(self, target: ast.expr, value: Val, source: ast.expr | None,
              env: dict[str, Val]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
            if source is not None:
                self._flow(target.id, source, env)
        elif isinstance(target, (ast.Tuple, ast.List)):
            pairs = isinstance(source, ast.Tuple) and len(source.elts) == len(target.elts) \
                and not any(isinstance(e, ast.Starred) for e in (*source.elts, *target.elts))
            for i, elt in enumerate(target.elts):
                if pairs and isinstance(source, ast.Tuple):        # i, j = ct.bid(0), ct.bid(1)
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
    def sources(self, expr: ast.AST) -> Sources:
        """The candidate loads whose lanes reach this value, with the walked axis."""
        if isinstance(expr, ast.Name):
            return dict(self.taint.get(expr.id, {}))
        if isinstance(expr, ast.Call) and id(expr) in self.candidates:
            return {id(expr): self.candidates[id(expr)].axis}
        keep = isinstance(expr, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp,
                                 ast.Attribute))
        children: list[ast.AST | None] = [n for n in ast.iter_child_nodes(expr)
                                   if isinstance(n, ast.expr)]
        if isinstance(expr, ast.Call):
            name = self.imp.ct(expr.func)
            if name in STATIC_CALLS or name == "where":   # ct.where: the lanes are masked
                return {}
            keep = name in AXIS_PRESERVING or (
                name is None and isinstance(expr.func, ast.Attribute)
                and expr.func.attr == "astype")
            if name in REDUCTIONS and keepdims(expr):
                keep, children = True, [call_arg(expr, 0, "x")]
            elif name is not None:
                children = [*expr.args, *(k.value for k in expr.keywords)]
        out: Sources = {}
        for child in children:
            if child is None:
                continue
            for key, axis in self.sources(child).items():
                axis = axis if keep else None
                out[key] = axis if out.get(key, axis) == axis else None
        return out

    def _flow(self, name: str, source: ast.expr, env: dict[str, Val]) -> None:
        loads = self.sources(source)
        self.taint[name] = loads
        self.dispatch(Bind(source, name, loads), Bind, env)

    def _nodes(self, expr: ast.AST) -> Iterator[ast.AST]:
        return device_nodes(self.imp, expr)

    def _exprs(self, env: dict[str, Val], *exprs: ast.expr) -> None:
        nodes = [node for expr in exprs for node in self._nodes(expr)]
        for node in nodes:   # register walk loads first: an enclosing call may reduce them
            if isinstance(node, ast.Call) and self.imp.ct(node.func) == "load":
                self._candidate(node)
        for node in nodes:
            if isinstance(node, (ast.Call, ast.BinOp, ast.Subscript)):
                self.dispatch(node, type(node), env)

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
            kind: str = "scalar"
            rank: int | None = 0
            for v in vals:
                kind, rank, _ = broadcast(Val(kind=kind, rank=rank), v)
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
            return agree(self.eval(node.body, env), self.eval(node.orelse, env))
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value, env)
            added = expand_dims_count(node.slice)
            if base.kind == "tile" and base.rank is not None and added is not None:
                return replace(base, rank=base.rank + added, dims=None)
            return UNKNOWN
        if isinstance(node, ast.Call):
            return self._eval_call(node, env)
        return UNKNOWN

    def _eval_binop(self, op: ast.operator, a: Val, b: Val) -> Val:
        kind, rank, dims = broadcast(a, b)
        if isinstance(op, ast.MatMult):
            return Val(kind="tile")
        is_bool = isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and a.is_bool and b.is_bool
        dtype = a.dtype if a.dtype == b.dtype else a.dtype if b.const else \
            b.dtype if a.const else None
        return Val(kind=kind, rank=rank, dims=dims, dtype=dtype, is_bool=is_bool,
                   const=a.const and b.const, value=fold(op, a.value, b.value),
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
        x, method = UNKNOWN, False
        if name is None and isinstance(call.func, ast.Attribute):
            base = self.eval(call.func.value, env)
            if base.kind != "tile":
                return UNKNOWN
            name, x, method = call.func.attr, base, True   # tile methods: t.reshape(...), t.astype(...)
            call = ast.Call(func=call.func, args=[call.func.value, *call.args],
                            keywords=call.keywords)
        if name is None:
            return UNKNOWN
        arg = lambda pos, kw: call_arg(call, pos, kw)  # noqa: E731
        if not method and name in SAME_SHAPE_UNARY | REDUCTIONS | {
                "astype", "transpose", "permute", "expand_dims", "reshape", "isnan"}:
            first = arg(0, "x")
            x = self.eval(first, env) if first is not None else UNKNOWN
        line = call.func.lineno
        made = self._made(name, call, env)
        if made is not None:
            return made
        if name == "astype":
            dtype = self._dtype(arg(1, "dtype"))
            return replace(x, dtype=dtype, is_bool=dtype == "bool_", const=False, value=None,
                           line=line)
        if name in ("reshape", "broadcast_to"):
            dims = self._shape_dims(arg(1, "shape"), env)
            return Val(kind="tile", rank=None if dims is None else len(dims), dims=dims,
                       dtype=x.dtype, line=line)
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
            return self._elementwise(name, call, env)
        if name == "gather":
            return Val(kind="tile", line=line)
        return UNKNOWN

    def _made(self, name: str, call: ast.Call, env: dict[str, Val]) -> Val | None:
        """A tile or scalar a cuTile function makes from nothing but its arguments (``load``, ``full``,
        ``arange``, ``bid``...); None for any other function."""
        arg = lambda pos, kw: call_arg(call, pos, kw)  # noqa: E731
        line = call.func.lineno
        if name == "load":
            dims = literal_dims(arg(2, "shape"))
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
            size = arg(0, "size")
            return Val(kind="tile", rank=1, dims=(size,) if size else None, line=line)
        if name == "bid" or name == "num_blocks":
            return Val(kind="scalar", rank=0)
        if name in ("num_tiles", "cdiv"):
            return Val(kind="scalar", rank=0, ntiles=True)
        return None

    def _elementwise(self, name: str, call: ast.Call, env: dict[str, Val]) -> Val:
        """An element-wise binary function, a comparison, a bitwise one or ``where``: its arguments broadcast."""
        vals = [self.eval(n, env) for n in call.args]
        if not vals:
            return UNKNOWN
        out = vals[0] if name != "where" else vals[1] if len(vals) > 1 else UNKNOWN
        for v in vals[1:]:
            k, r, d = broadcast(out, v)
            out = Val(kind=k, rank=r, dims=d, dtype=out.dtype if out.dtype == v.dtype
                      else None)
        is_bool = name in COMPARISONS or (name.startswith("bitwise")
                                          and all(v.is_bool for v in vals))
        return replace(out, is_bool=is_bool, const=False, value=None)

    def _shape_dims(self, node: ast.expr | None, env: dict[str, Val]) -> tuple | None:
        dims = literal_dims(node)
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
        axis, keep = call_arg(call, 1, "axis"), call_arg(call, None, "keepdims")
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

    def _candidate(self, call: ast.Call) -> None:
        """Remember an unpadded load that walks a ct.num_tiles loop (what TP009 looks at)."""
        if id(call) in self.candidates or not self.loops or any(
                kw.arg in ("padding_mode", "padding_value", "check_bounds") or kw.arg is None
                for kw in call.keywords):
            return
        index, array = call_arg(call, 1, "index"), call_arg(call, 0, "array")
        if index is None:
            return
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        dims = literal_dims(call_arg(call, 2, "shape"))
        for loop in reversed(self.loops):
            axes = [i for i, item in enumerate(items) if names_in(item) & loop.targets]
            walked_dim = dims[axes[0]] if len(axes) == 1 and dims is not None and len(dims) > axes[0] \
                else None
            if len(axes) == 1 and dims is not None and (
                    len(dims) != len(items) or (isinstance(walked_dim, ast.Constant)
                                                and walked_dim.value == 1)):
                return   # a scalar load, or a tile 1 wide along the walk: never sticks out
            if axes:
                self.candidates[id(call)] = Candidate(
                    call, loop, ast.unparse(array) if array is not None else "?",
                    axes[0] if len(axes) == 1 else None, len(items))
                return


def as_load(target: ast.expr) -> ast.expr:
    if isinstance(target, ast.Name):
        return ast.copy_location(ast.Name(id=target.id, ctx=ast.Load()), target)
    return target


def expand_dims_count(index: ast.expr) -> int | None:
    """How many axes a valid tile subscript adds, or None if it is not a valid one."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    added = 0
    for item in items:
        if isinstance(item, ast.Constant) and item.value is None:
            added += 1
        elif isinstance(item, ast.Constant) and item.value is Ellipsis:  # noqa: SIM114 (one arm per valid item)
            continue
        elif isinstance(item, ast.Slice) and item.lower is None and item.upper is None \
                and item.step is None:
            continue
        else:
            return None
    return added


def keepdims(call: ast.Call) -> bool:
    keep = call_arg(call, None, "keepdims")
    return isinstance(keep, ast.Constant) and keep.value is True


def literal_axes(axis: ast.expr, rank: int) -> set[int]:
    """The axes a literal axis argument names, normalized; empty when not literal."""
    items = axis.elts if isinstance(axis, ast.Tuple) else [axis]
    out = set()
    for item in items:
        negative = isinstance(item, ast.UnaryOp) and isinstance(item.op, ast.USub)
        literal = item.operand if isinstance(item, ast.UnaryOp) and negative else item
        value = literal.value if isinstance(literal, ast.Constant) else None
        if type(value) is not int:
            return set()
        value = -value if negative else value
        out.add(value % rank if rank else value)
    return out


def carried(body: list[ast.stmt], before: dict[str, Val]) -> set[str]:
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
            visit(as_load(node.target))
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


# --------------------------------------------------------------------------- a whole file

def device_functions(mod: Module) -> list[tuple[ast.FunctionDef, bool]]:
    """Every device function of the file, with whether it is a kernel (else a device function).

    Decorated ones (``@ct.kernel``, ``@ct.function``), defs wrapped in the same scope
    (``k = ct.kernel(some_def)``), and undecorated module-level helpers device code calls.
    """
    device: list[tuple[ast.FunctionDef, bool]] = []
    seen: set[int] = set()
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.FunctionDef) and mod.device_kind(node):
            device.append((node, mod.device_kind(node) == "kernel"))
            seen.add(id(node))
    for scope in [mod.tree, *(n for n in ast.walk(mod.tree) if isinstance(n, ast.FunctionDef))]:
        defs = {n.name: n for n in scope_walk(scope) if isinstance(n, ast.FunctionDef)}
        for call in scope_walk(scope):
            if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name) \
                    and mod.imp.ct(call.func) in ("kernel", "function"):
                fn = defs.get(call.args[0].id)
                if fn is not None and id(fn) not in seen:
                    seen.add(id(fn))
                    device.append((fn, mod.imp.ct(call.func) == "kernel"))
    queue = [fn for fn, _ in device]
    while queue:
        fn = queue.pop()
        for call in device_nodes(mod.imp, fn):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                helper = mod.toplevel_defs.get(call.func.id)
                if helper is not None and id(helper) not in seen and not helper.decorator_list:
                    seen.add(id(helper))
                    device.append((helper, False))
                    queue.append(helper)
    return device


@dataclass(frozen=True)
class HostScope:
    """One host scope (the module or a function): what each local name was assigned."""

    mod: Module
    local: dict[str, list[ast.expr | None]]
    """name -> every value assigned to it in this scope (None: not a plain assignment)."""

    def lookup(self, name: str) -> int | None:
        """The constant integer a name holds here, when it is assigned exactly once."""
        values = self.local.get(name)
        if values is None:
            return self.mod.consts.get(name)
        if len(values) == 1 and values[0] is not None:
            return self.mod.const_int(values[0], self.lookup)
        return None


def host_scopes(mod: Module) -> Iterator[tuple[HostScope, ast.AST]]:
    """Every scope of the file with its assignments, and the scope's node."""
    scopes: list[ast.AST] = [mod.tree] + [n for n in ast.walk(mod.tree)
                                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        local: dict[str, list[ast.expr | None]] = {}
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for a in ast.walk(scope.args):
                if isinstance(a, ast.arg):
                    local[a.arg] = [None]      # a parameter: not a known constant
        for node in scope_walk(scope):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                local.setdefault(node.targets[0].id, []).append(node.value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
                for name in assigned_names(node):
                    local.setdefault(name, []).append(None)
        yield HostScope(mod, local), scope


def check_module(tree: ast.Module) -> list[Hit]:
    """Every finding of every registered rule in one parsed file (ignore comments not applied)."""
    mod = Module(tree)
    found: list[Hit] = []
    for fn, is_kernel in device_functions(mod):
        Interpreter(mod, fn, is_kernel, found).run({})
    launch_rules = rules_for(HOST_LAUNCH)
    for host, scope in host_scopes(mod):
        for node in scope_walk(scope):
            if isinstance(node, ast.Call) and mod.imp.ct(node.func) == "launch":
                for rule in launch_rules:
                    found.extend(hits(rule, rule.fn(host, node)))
    return found
