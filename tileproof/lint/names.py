"""What a linted file's names refer to, and what is known file-wide, before any rule runs.

``Imports`` resolves aliases (``ct.load`` -> ``cuda.tile.load``); ``Module`` holds the
file's constant integers, ``ct.Constant`` aliases and top-level functions, and tells device
code (``@ct.kernel``/``@ct.function``) from host code. The small ``ast`` helpers here are
shared by the interpreter and the rules. Nothing of the linted file is imported or run; a string
annotation is parsed by ``records.python_source``'s rules.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from tileproof.records import python_source

CUDA_TILE = "cuda.tile"
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


def call_arg(call: ast.Call, pos: int | None, name: str) -> ast.expr | None:
    """The argument bound to parameter `name` (position `pos` when passed positionally)."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if pos is not None and pos < len(call.args) and not any(
            isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
        return call.args[pos]
    return None


def literal_dims(node: ast.expr | None) -> tuple[ast.expr, ...] | None:
    """The dimension expressions of a literal shape: (a, b), [a, b], or a bare int."""
    if isinstance(node, (ast.Tuple, ast.List)):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return None
        return tuple(node.elts)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return (node,)
    return None


def same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def is_pow2(n: int) -> bool:
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


FOLD: dict[type, Callable[[int, int], int | None]] = {
    ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
    ast.FloorDiv: lambda x, y: x // y, ast.Mod: lambda x, y: x % y,
    ast.LShift: lambda x, y: x << y if y < 64 else None, ast.RShift: lambda x, y: x >> y,
    ast.Pow: lambda x, y: x ** y if 0 <= y < 128 else None,
}


def fold(op: ast.operator, x: int | None, y: int | None) -> int | None:
    fn = FOLD.get(type(op))
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
            for target in assigned_names(stmt):
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
            return fold(node.op, self.const_int(node.left, lookup),
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
                node = python_source.parse_expression(node.value, "<annotation>")
            except SyntaxError:
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

    def is_scalar_constant(self, node: ast.expr | None) -> bool:
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


def assigned_names(stmt: ast.stmt) -> Iterator[str]:
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    for t in targets:
        for node in ast.walk(t):
            if isinstance(node, ast.Name):
                yield node.id


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def device_nodes(imp: Imports, root: ast.AST) -> Iterator[ast.AST]:
    """The nodes under root in source order, skipping what ct.static_eval & co run on host."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.Call) and imp.ct(node.func) in STATIC_CALLS:
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def scope_walk(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of one scope, not descending into nested function definitions."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))

