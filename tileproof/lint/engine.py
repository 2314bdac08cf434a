"""``lint-kernels``: static checks for known cuTile mistakes, before anything compiles.

    python -m tileproof lint-kernels [PATH ...]      (default: kernels)

One line per finding, ``path:line:col: RULE message (fix: ...)``, sorted; exit status 1
when there is any finding (a file that does not parse is one, TP000), 0 when clean.
A finding is silenced on its own line by ``# tileproof: ignore[TP003] <reason>``; the
reason is required, and an ignore without one (or naming an unknown rule) is itself a
finding (TP900) and silences nothing.

The rules themselves live in ``lint_rules.py``; this module is the API and the CLI.
Standard library only: linting never imports cuda.tile or the code it reads.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

from tileproof.lint.rules import RULES, check_module

__all__ = ["RULES", "Finding", "add_arguments", "lint_paths", "lint_source", "run"]

_IGNORE = re.compile(r"#\s*tileproof:\s*ignore\[([^\]]*)\](.*)$")


@dataclass(frozen=True, order=True)
class Finding:
    """One problem at one place in one file."""

    path: str
    line: int
    col: int
    rule: str
    message: str
    fix: str = ""

    def format(self) -> str:
        """The ``path:line:col: RULE message (fix: ...)`` line the CLI prints."""
        text = f"{self.path}:{self.line}:{self.col}: {self.rule} {self.message}"
        return f"{text} (fix: {self.fix})" if self.fix else text


def lint_source(source: str, path: str) -> list[Finding]:
    """Every finding in one file's text, ignore comments applied, sorted."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as e:
        return [Finding(path, e.lineno or 1, e.offset or 1, "TP000",
                        f"cannot parse: {e.msg}")]
    except ValueError as e:   # e.g. a NUL byte in the source
        return [Finding(path, 1, 1, "TP000", f"cannot parse: {e}")]
    ignores, bad = _ignore_comments(source, path)
    findings = [Finding(path, h.line, h.col, h.rule, h.message, h.fix)
                for h in check_module(tree) if h.rule not in ignores.get(h.line, ())]
    return sorted(findings + bad)


def lint_paths(paths: list[Path]) -> list[Finding]:
    """Lint every ``.py`` file under the given files and folders, sorted by path."""
    findings: list[Finding] = []
    for file in _python_files(paths):
        try:
            source = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            findings.append(Finding(str(file), 1, 1, "TP000",
                                    f"cannot parse: not UTF-8 ({e.reason})"))
            continue
        findings.extend(lint_source(source, str(file)))
    return sorted(findings)


def _python_files(paths: list[Path]) -> list[Path]:
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
        unknown = [i for i in ids if i not in RULES or i in ("TP000", "TP900")]
        if not ids or unknown:
            what = f"unknown rule id {', '.join(unknown)}" if unknown else "no rule id"
            bad.append(Finding(path, line, col, "TP900",
                               f"ignore comment names {what}; it silences nothing",
                               "name the rule(s) being silenced, e.g. ignore[TP003] "
                               "(python -m tileproof lint-kernels --list-rules lists them)"))
        elif not reason:
            bad.append(Finding(path, line, col, "TP900",
                               f"ignore[{', '.join(ids)}] has no reason; it silences nothing",
                               f"say why the code is right: # tileproof: ignore[{ids[0]}] "
                               "<reason>"))
        else:
            ignores.setdefault(line, set()).update(ids)
    return ignores, bad


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``lint-kernels`` command line."""
    parser.add_argument("paths", nargs="*", type=Path, default=[Path("kernels")],
                        help="files or folders to check (default: kernels)")
    parser.add_argument("--list-rules", action="store_true",
                        help="print every rule id, slug and description, and exit")


def run(args: argparse.Namespace) -> int:
    """Print the findings; 1 when there are any, 0 when clean, 2 for a missing path."""
    if args.list_rules:
        for rule, (slug, description) in RULES.items():
            print(f"{rule}  {slug:<26} {description}")
        return 0
    try:
        findings = lint_paths(list(args.paths))
    except FileNotFoundError as e:
        print(f"lint-kernels: {e} (fix: pass existing files or folders)", file=sys.stderr)
        return 2
    for finding in findings:
        print(finding.format())
    if findings:
        files = len({f.path for f in findings})
        print(f"{len(findings)} finding(s) in {files} file(s)", file=sys.stderr)
    return 1 if findings else 0
