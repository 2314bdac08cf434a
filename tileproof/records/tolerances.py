"""The one tolerance table, read from kernels/tolerances.py and rendered for C++.

The Python programs read ``kernels/tolerances.py`` directly. The C++ programs in
``cpp/`` cannot, so ``nox -s schema`` renders the same numbers into the committed
header ``cpp/tolerances.h`` and a test fails when the two disagree.

Stdlib only, and importable on its own: the table file is loaded by path, so
neither the ``kernels`` package nor ``cuda.tile`` is imported.
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path

try:
    from tileproof.records.errors import TileproofError as _Base
    from tileproof.records.safe_read import read_bytes as _safe_read
except ImportError:  # loaded by path, outside the package
    _Base, _safe_read = Exception, None

TABLE_FILE = Path("kernels/tolerances.py")
"""The table, relative to the repository root."""

HEADER_FILE = Path("cpp/tolerances.h")
"""The generated C++ header, relative to the repository root."""

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
    while xor""".split()
)


class ToleranceTableError(_Base):
    """kernels/tolerances.py is missing, or its TOLERANCES cannot be used."""


def load_table(repo_root: Path) -> Table:
    """Import ``kernels/tolerances.py`` by file path and return its checks as (rtol, atol)."""
    path = Path(repo_root) / TABLE_FILE
    if not path.is_file():
        raise ToleranceTableError(f"{path}: not found (the tolerance table must exist before the C++ header)")
    module = _import_by_path(path, _source(Path(repo_root), path))
    raw = getattr(module, "TOLERANCES", None)
    if not isinstance(raw, dict) or not raw:
        raise ToleranceTableError(f"{path}: TOLERANCES must be a non-empty dict of check name -> Tolerance")
    return {_check_name(path, name): _bounds(path, name, entry) for name, entry in raw.items()}


def _source(repo_root: Path, path: Path) -> bytes:
    """The table's bytes, through ``safe_read`` inside the package (a regular file
    inside the repository, at most 1 MiB); read plainly when loaded by path."""
    if _safe_read is None:
        return path.read_bytes()
    try:
        return _safe_read(repo_root, TABLE_FILE, "tolerances")
    except _Base as exc:
        raise ToleranceTableError(str(exc)) from None


def _import_by_path(path: Path, source: bytes) -> object:
    """Execute ``source`` (read from ``path``) as a throwaway module, without touching its package."""
    name = "_tileproof_tolerance_table"
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses/NamedTuple may look their module up
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except (Exception, SystemExit) as exc:  # the file is someone else's code: report, don't crash (nor exit)
        raise ToleranceTableError(f"{path}: importing it failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.modules.pop(name, None)
    return module


def _check_name(path: Path, name: object) -> str:
    """A check name must also be a C++ identifier, since the header names it."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or name in _CPP_KEYWORDS:
        raise ToleranceTableError(
            f"{path}: check name {name!r} is not usable in C++ (use letters, digits and _; not a keyword)"
        )
    return name


def _bounds(path: Path, name: str, entry: object) -> tuple[float, float]:
    """(rtol, atol) from a Tolerance-like entry: finite and non-negative."""
    try:
        rtol, atol = float(entry.rtol), float(entry.atol)  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError) as exc:
        raise ToleranceTableError(f"{path}: TOLERANCES[{name!r}] needs numeric rtol and atol ({exc})") from exc
    for field, value in (("rtol", rtol), ("atol", atol)):
        if not math.isfinite(value) or value < 0:
            raise ToleranceTableError(f"{path}: TOLERANCES[{name!r}].{field} = {value!r}; must be finite and >= 0")
    return rtol, atol


def _literal(value: float) -> str:
    """A C++ double literal that parses back to exactly ``value`` (repr is shortest round-trip)."""
    return repr(float(value))


def render_cpp_header(table: Table) -> str:
    """The text of cpp/tolerances.h for ``table``; the same table always gives the same text."""
    for name in table:
        _check_name(TABLE_FILE, name)
    width = max(len(name) for name in table) + 3
    rows = []
    for name, (rtol, atol) in sorted(table.items()):
        quoted = f'"{name}",'.ljust(width)
        rows.append(f"    {{{quoted} {_literal(rtol)}, {_literal(atol)}}},")
    return _HEADER_TEMPLATE.format(
        source=TABLE_FILE.as_posix(), command=REGENERATE, rows="\n".join(rows)
    )


def write_cpp_header(repo_root: Path) -> Path:
    """Regenerate cpp/tolerances.h from kernels/tolerances.py; returns the header's path."""
    target = Path(repo_root) / HEADER_FILE
    text = render_cpp_header(load_table(repo_root))
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text, encoding="utf-8", newline="\n")
        tmp.replace(target)
    return target


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
