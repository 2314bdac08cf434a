"""The one tolerance table, read from kernels/tolerances.py and rendered for C++.

The Python programs read ``kernels/tolerances.py`` directly. The C++ programs in
``cpp/`` cannot, so ``nox -s schema`` renders the same numbers into the committed
header ``cpp/tolerances.h`` and a test fails when the two disagree.

Stdlib only, and importable on its own. The table file is parsed, never executed
(``ast`` + ``ast.literal_eval``): reading it runs no repository code, and neither the
``kernels`` package nor ``cuda.tile`` is imported.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from pathlib import Path

from tileproof.records import python_source
from tileproof.records.errors import InputRefused, TileproofError
from tileproof.records.safe_read import read_text

TABLE_FILE = Path("kernels/tolerances.py")
"""The table, relative to the repository root."""

HEADER_FILE = Path("cpp/tolerances.h")
"""The generated C++ header, relative to the repository root."""

TABLE_PATHS = (TABLE_FILE.as_posix(), HEADER_FILE.as_posix())
"""The table and its rendering: a version-1 run record lists one of them as a whole-file source;
a version-2 record attests the entries of its checks instead (``entry_digest``)."""

REGENERATE = "nox -s schema"
"""The command that rewrites HEADER_FILE from TABLE_FILE."""

Table = dict[str, tuple[float, float]]
"""Check name -> (rtol, atol)."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CPP_KEYWORDS = frozenset(
    """alignas alignof and asm auto bitand bitor bool break case catch char class
    const consteval constexpr constinit continue decltype default delete do double
    else enum explicit export extern false float for friend goto if inline int long
    mutable namespace new noexcept not nullptr operator or private protected public
    register requires return short signed sizeof static struct switch template this
    throw true try typedef typeid typename union unsigned using virtual void volatile
    while xor""".split()  # noqa: SIM905 (the keywords as the standard lists them read better than 92 quoted strings)
)


class ToleranceTableError(TileproofError):
    """kernels/tolerances.py is missing, or its TOLERANCES cannot be used."""


def load_table(repo_root: Path) -> Table:
    """Read ``TOLERANCES`` from ``kernels/tolerances.py`` without executing the file.

    The file is parsed with :mod:`ast`; the table's assignment must be a dict literal of
    ``"name": Tolerance(rtol=<number>, atol=<number>)`` (positional also accepted; a number is
    a literal or ``float("inf")``-style text). Anything else is one error naming file and line.
    """
    path = Path(repo_root) / TABLE_FILE
    if not path.is_file():
        raise ToleranceTableError(f"{path}: not found (the tolerance table must exist before the C++ header)")
    return parse_table(_source(Path(repo_root)), path)


def parse_table(text: str, path: Path | str = TABLE_FILE) -> Table:
    """``TOLERANCES`` from the text of a table file (``load_table``'s rules; ``path`` names it in errors):
    also how a committed version of the table, read back from git history, is read."""
    path = Path(path)
    try:
        tree = python_source.parse(text, str(path))
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else f"{path}"
        raise ToleranceTableError(f"{where}: not valid Python ({exc.msg}) (fix: correct the syntax)") from None
    node = table_node(path, tree)
    if not isinstance(node, ast.Dict):  # empty is a course's first table: new-lesson adds the first entry
        raise ToleranceTableError(
            f"{path}:{node.lineno}: TOLERANCES must be a dict literal of check name -> Tolerance "
            "(fix: write the table out literally)"
        )
    table: Table = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if key is None:
            raise ToleranceTableError(f"{path}:{value.lineno}: TOLERANCES: '**' unpacking is not a literal "
                                      "(fix: write every entry out)")
        name = _check_name(path, _literal_at(path, key, "a check name"))
        table[name] = _bounds(path, name, value)
    return table


def entry_digest(name: str, rtol: float, atol: float) -> str:
    """sha256 of one entry's canonical JSON ``{"atol", "name", "rtol"}``: what a run record attests
    for each of its checks. Only the numbers and the name count; the derivation comment above an
    entry can be reworded without staling any evidence."""
    body = {"name": name, "rtol": float(rtol), "atol": float(atol)}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def entry_digests(table: Table, names) -> dict[str, str]:
    """check name → ``entry_digest`` for each of ``names`` that the table has (sorted by name)."""
    return {n: entry_digest(n, *table[n]) for n in sorted(set(names)) if n in table}


def _source(repo_root: Path) -> str:
    """The table's text through ``safe_read`` (a regular file inside the repository, at most 1 MiB, UTF-8)."""
    try:
        return read_text(repo_root, TABLE_FILE, "tolerances")
    except InputRefused as exc:
        raise ToleranceTableError(str(exc)) from None


def table_node(path: Path, tree: ast.Module) -> ast.expr:
    """The value assigned to ``TOLERANCES`` at module level (exactly once): ``load_table`` reads it,
    ``new-lesson`` appends entries to it."""
    found: list[ast.expr] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TOLERANCES"  # noqa: SIM114
                                                for t in stmt.targets):  # (one arm per assignment form)
            found.append(stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                and stmt.target.id == "TOLERANCES" and stmt.value is not None:
            found.append(stmt.value)
    if not found:
        raise ToleranceTableError(f"{path}: no module-level TOLERANCES = {{...}} assignment "
                                  "(fix: define the table as a dict literal)")
    if len(found) > 1:
        raise ToleranceTableError(f"{path}:{found[1].lineno}: TOLERANCES is assigned twice "
                                  "(fix: keep one literal table)")
    return found[0]


def _literal_at(path: Path, node: ast.expr, what: str) -> object:
    """``ast.literal_eval`` of one node, or one error line naming file and line."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ToleranceTableError(
            f"{path}:{node.lineno}: {what} '{ast.unparse(node)}' is not a literal; the table is read "
            "without running the file (fix: write the value out as a literal)"
        ) from None


def _number(path: Path, name: str, node: ast.expr) -> object:
    """A literal, or ``float("<text>")`` (the only way to write inf/nan), never executed code."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" \
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        try:
            return float(node.args[0].value)
        except ValueError:
            pass
    return _literal_at(path, node, f"TOLERANCES[{name!r}] value")


def _check_name(path: Path, name: object) -> str:
    """A check name must also be a C++ identifier, since the header names it."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or name in _CPP_KEYWORDS:
        raise ToleranceTableError(
            f"{path}: check name {name!r} is not usable in C++ (use letters, digits and _; not a keyword)"
        )
    return name


def _bounds(path: Path, name: str, entry: ast.expr) -> tuple[float, float]:
    """(rtol, atol) from a ``Tolerance(rtol=..., atol=...)`` call: literal, finite and non-negative."""
    if not (isinstance(entry, ast.Call) and isinstance(entry.func, (ast.Name, ast.Attribute))
            and (entry.func.id if isinstance(entry.func, ast.Name) else entry.func.attr) == "Tolerance"):
        raise ToleranceTableError(
            f"{path}:{entry.lineno}: TOLERANCES[{name!r}] needs numeric rtol and atol: write "
            f"Tolerance(rtol=..., atol=...), not '{ast.unparse(entry)}'"
        )
    given: dict[str, ast.expr] = dict(zip(("rtol", "atol"), entry.args, strict=False))
    given.update({kw.arg: kw.value for kw in entry.keywords if kw.arg is not None})
    if set(given) != {"rtol", "atol"} or len(entry.args) > 2 or any(kw.arg is None for kw in entry.keywords):
        raise ToleranceTableError(f"{path}:{entry.lineno}: TOLERANCES[{name!r}] needs numeric rtol and atol, "
                                  f"got '{ast.unparse(entry)}'")
    out: dict[str, float] = {}
    for field in ("rtol", "atol"):
        value = _number(path, name, given[field])
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ToleranceTableError(f"{path}:{given[field].lineno}: TOLERANCES[{name!r}] needs numeric rtol "
                                      f"and atol ({field} is {value!r})")
        out[field] = float(value)
        if not math.isfinite(out[field]) or out[field] < 0:
            raise ToleranceTableError(f"{path}: TOLERANCES[{name!r}].{field} = {out[field]!r}; "
                                      "must be finite and >= 0")
    return out["rtol"], out["atol"]


def _literal(value: float) -> str:
    """A C++ double literal that parses back to exactly ``value`` (repr is shortest round-trip)."""
    return repr(float(value))


def render_cpp_header(table: Table) -> str:
    """The text of cpp/tolerances.h for ``table``; the same table always gives the same text."""
    for name in table:
        _check_name(TABLE_FILE, name)
    width = max((len(name) for name in table), default=0) + 3
    rows = []
    for name, (rtol, atol) in sorted(table.items()):
        quoted = f'"{name}",'.ljust(width)
        rows.append(f"    {{{quoted} {_literal(rtol)}, {_literal(atol)}}},")
    return _HEADER_TEMPLATE.format(
        source=TABLE_FILE.as_posix(), command=REGENERATE, rows="\n".join(rows)
    )


def has_header(repo_root: Path) -> bool:
    """Whether the tree has a header to keep current: the table and the ``cpp/`` folder both exist."""
    return (Path(repo_root) / TABLE_FILE).is_file() and (Path(repo_root) / HEADER_FILE).parent.is_dir()


def cpp_header(repo_root: Path) -> str:
    """The text cpp/tolerances.h must have: the tree's table, rendered (``store.write_generated`` writes it)."""
    return render_cpp_header(load_table(repo_root))


_HEADER_TEMPLATE = """\
// GENERATED by `{command}` from {source}. DO NOT EDIT.
// Change the table in {source} and run `{command}`;
// tests/test_tolerances.py fails while this file and the table disagree.
//
// An element passes when it is finite and |got - want| <= atol + rtol * |want|.
// Look a check up at compile time: tileproof::tolerances::get("matmul").
// A name that is not in the table does not compile.
#pragma once

#include <string_view>

namespace tileproof::tolerances {{

struct Tolerance {{
    const char* name;
    double rtol;
    double atol;
}};

inline constexpr Tolerance table[] = {{
{rows}
}};

consteval Tolerance get(std::string_view name) {{
    for (const Tolerance& entry : table) {{
        if (name == entry.name) return entry;
    }}
    throw "check name not in {source}";  // ill-formed in a constant expression
}}

}}  // namespace tileproof::tolerances
"""
