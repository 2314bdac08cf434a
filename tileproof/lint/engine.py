"""The lint API: findings for a file's text or for files and folders, ignores applied.

A finding (``records.findings.Finding``) prints as ``path:line:col: RULE message (fix: ...)``; a file
that does not parse is one (TP000). A finding is silenced on its own line by ``# tileproof: ignore[TP003] <reason>``;
the reason is required, and an ignore without one (or naming an unknown rule) is itself a
finding (TP900) and silences nothing.

Which code is device code and what is known about its values is ``lint.interp``; the rules
are one module each under ``lint/rules/``, in the one table of ``lint.rule_table``; the
command is ``commands/lint.py``. Standard library only: linting never imports cuda.tile or
the code it reads.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import tileproof.lint.rules  # noqa: F401  (registers every rule)
from tileproof.lint.interp import check_module
from tileproof.lint.rule_table import ENGINE_RULES, table
from tileproof.records import python_source
from tileproof.records.findings import Finding

__all__ = ["RULES", "lint_paths", "lint_source", "python_files"]

RULES: dict[str, tuple[str, str]] = table()
"""id -> (slug, one-line description) of every rule, sorted; ``--list-rules`` prints it."""

_IGNORE = re.compile(r"#\s*tileproof:\s*ignore\[([^\]]*)\](.*)$")


def _at(path: str, line: int, col: int, rule: str, message: str, fix: str = "") -> Finding:
    return Finding(path, rule, message, fix, line=line, col=col)


def lint_source(source: str, path: str) -> list[Finding]:
    """Every finding in one file's text, ignore comments applied, sorted."""
    try:
        tree = python_source.parse(source, path)
    except SyntaxError as e:
        return [_at(path, e.lineno or 1, e.offset or 1, "TP000", f"cannot parse: {e.msg}")]
    ignores, bad = _ignore_comments(source, path)
    findings = [_at(path, h.line, h.col, h.rule, h.message, h.fix)
                for h in check_module(tree) if h.rule not in ignores.get(h.line, ())]
    return sorted(findings + bad)


def lint_paths(paths: list[Path]) -> list[Finding]:
    """Lint every ``.py`` file under the given files and folders, sorted by path."""
    findings: list[Finding] = []
    for file in python_files(paths):
        try:
            source = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            findings.append(_at(str(file), 1, 1, "TP000", f"cannot parse: not UTF-8 ({e.reason})"))
            continue
        findings.extend(lint_source(source, str(file)))
    return sorted(findings)


def python_files(paths: list[Path]) -> list[Path]:
    """Every ``.py`` file under the given files and folders (hidden and __pycache__ skipped), sorted."""
    files: set[Path] = set()
    for path in paths:
        if path.is_dir():
            files.update(p for p in path.rglob("*.py")
                         if "__pycache__" not in p.parts
                         and not any(part.startswith(".") for part in p.relative_to(path).parts))
        elif path.exists():
            files.add(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
    return sorted(files)


def _ignore_comments(source: str, path: str) -> tuple[dict[int, set[str]], list[Finding]]:
    """Line -> rule ids silenced there, and a TP900 finding for each malformed ignore."""
    ignores: dict[int, set[str]] = {}
    bad: list[Finding] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return ignores, bad
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        match = _IGNORE.search(tok.string)
        if match is None:
            continue
        line, col = tok.start[0], tok.start[1] + 1
        ids = [i.strip().upper() for i in match.group(1).split(",") if i.strip()]
        reason = match.group(2).strip(" \t-:—")
        unknown = [i for i in ids if i not in RULES or i in ENGINE_RULES]
        if not ids or unknown:
            what = f"unknown rule id {', '.join(unknown)}" if unknown else "no rule id"
            bad.append(_at(path, line, col, "TP900",
                           f"ignore comment names {what}; it silences nothing",
                           "name the rule(s) being silenced, e.g. ignore[TP003] "
                           "(python -m tileproof lint-kernels --list-rules lists them)"))
        elif not reason:
            bad.append(_at(path, line, col, "TP900",
                           f"ignore[{', '.join(ids)}] has no reason; it silences nothing",
                           f"say why the code is right: # tileproof: ignore[{ids[0]}] "
                           "<reason>"))
        else:
            ignores.setdefault(line, set()).update(ids)
    return ignores, bad
