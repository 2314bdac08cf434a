"""Python source of a course (a program, the tolerance table, the reference table) read into a syntax tree without
running any of it, whatever the text holds: :func:`parse` fails only with ``SyntaxError``, one line naming the file.

A committed file is hostile input. Besides bad syntax and NUL bytes, a text can nest past what the interpreter's
parser survives: a sum of 200,000 terms (``x = 1+1+...``) raises ``RecursionError`` while its tree is built on
Python 3.11 and later, and overflows the C stack (a segmentation fault) on 3.10, whose conversion of the tree into
Python objects has no depth guard. A tree the parser survives may still be too deep for a recursive walk over it
(``ast.NodeVisitor``, ``ast.literal_eval``): the lint's visitors raised ``RecursionError`` at 2,000 terms. So:

- a text longer than :data:`MAX_CHARS` is refused before it is parsed;
- before 3.11 the parse runs in a thread whose stack (:data:`STACK_BYTES`) holds the deepest tree a text of that
  length can make (2,000,000 levels measured, in 4 MB of ``+1``);
- a tree nested deeper than :data:`MAX_DEPTH` is refused, on every Python alike.
"""

from __future__ import annotations

import ast
import sys
import threading
from typing import Literal

MAX_CHARS = 4 << 20
"""Longest source parsed (the course's programs are a few kB; the tolerance table's reader caps it at 1 MiB)."""
MAX_DEPTH = 200
"""Deepest syntax tree accepted, counted in nodes from the module down (a lesson program nests about 20; Python's own
tokenizer stops at 200 open brackets). A recursive walk takes two or three frames a level, well inside the
interpreter's 1,000."""
STACK_BYTES = 256 << 20
"""The parsing thread's stack before Python 3.11 (address space: the pages a parse touches are all it uses)."""

Mode = Literal["exec", "eval"]
_STACK_SIZE = threading.Lock()
"""``threading.stack_size`` is process-wide: one parse at a time sets it, starts its thread and puts it back."""


def parse(text: str, shown: str) -> ast.Module:
    """``ast.parse(text, shown)``, or ``SyntaxError`` (its ``lineno`` where the parser gave one) whenever the text
    cannot be read into a tree that later walks survive: see the module's docstring."""
    tree = _checked(text, shown, "exec")
    assert isinstance(tree, ast.Module)
    return tree


def parse_expression(text: str, shown: str) -> ast.expr:
    """One expression (``ast.parse(text, shown, "eval").body``), by :func:`parse`'s rules."""
    tree = _checked(text, shown, "eval")
    assert isinstance(tree, ast.Expression)
    return tree.body


def _checked(text: str, shown: str, mode: Mode) -> ast.AST:
    if len(text) > MAX_CHARS:
        raise SyntaxError(f"{len(text):,} characters, more than the {MAX_CHARS:,} tileproof parses", (shown, 1, 1, ""))
    tree = _parsed(text, shown, mode) if sys.version_info >= (3, 11) else parsed_in_thread(text, shown, mode)
    depth = _depth(tree)
    if depth > MAX_DEPTH:
        raise SyntaxError(f"nested {depth} levels deep, past the {MAX_DEPTH} tileproof reads", (shown, 1, 1, ""))
    return tree


def parsed_in_thread(text: str, shown: str, mode: Mode) -> ast.AST:
    """:func:`_parsed` in a thread with a stack of :data:`STACK_BYTES` (how :func:`parse` runs before 3.11)."""
    out: list[ast.AST | BaseException] = []

    def run() -> None:
        try:
            out.append(_parsed(text, shown, mode))
        except BaseException as e:  # noqa: BLE001  # raised again below, in the caller's thread, as inline
            out.append(e)

    with _STACK_SIZE:
        before = threading.stack_size(STACK_BYTES)
        try:
            worker = threading.Thread(target=run, name="tileproof-parse")
            worker.start()
        finally:
            threading.stack_size(before)
    worker.join()
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def _parsed(text: str, shown: str, mode: Mode) -> ast.AST:
    try:
        return ast.parse(text, shown, mode)
    except SyntaxError as e:
        if e.filename == shown and e.lineno:
            raise
        # a NUL byte on 3.11 says neither the file nor the line
        raise SyntaxError(e.msg, (shown, e.lineno or 1, e.offset or 1, e.text or "")) from None
    except ValueError as e:  # a NUL byte (3.10), a lone surrogate
        raise SyntaxError(f"cannot be parsed ({e})", (shown, 1, 1, "")) from None
    except (RecursionError, MemoryError):  # nesting past the parser's own guard
        raise SyntaxError("nested deeper than Python's parser goes", (shown, 1, 1, "")) from None


def _depth(tree: ast.AST) -> int:
    """How many nodes deep ``tree`` goes (the module itself is 1), walked without recursion."""
    deepest, todo = 0, [(tree, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        todo.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest
