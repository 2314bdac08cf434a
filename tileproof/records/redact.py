"""Credential redaction for everything written to ``evidence/``: pure functions, one rule table.

Transcripts and pip freeze are meant to be committed, so a credential a program
prints (or a ``https://user:token@host/`` in an editable install's URL) is
replaced by ``[REDACTED:<rule>]`` before the bytes are written. The record keeps
how many matches each rule replaced (``Redactions``), never the value.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal

RedactionRule = Literal[
    "url-userinfo", "github-token", "aws-access-key", "bearer-token", "pypi-token", "secret-assignment",
]
"""The closed set of rules; a record counts replacements per rule."""

_RULES: tuple[tuple[RedactionRule, re.Pattern[bytes], int], ...] = (
    # (rule, pattern, group to replace: 0 = the whole match)
    ("url-userinfo", re.compile(rb"(?<=://)([^/\s:@]+:[^/\s@]+)(?=@)"), 1),
    ("github-token", re.compile(rb"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), 0),
    ("aws-access-key", re.compile(rb"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), 0),
    ("bearer-token", re.compile(rb"(?i)(?<=bearer )[A-Za-z0-9._~+/=-]{8,}"), 0),
    ("pypi-token", re.compile(rb"\bpypi-[A-Za-z0-9_-]{16,}"), 0),
    ("secret-assignment", re.compile(
        rb"(?i)\b(?:token|password|passwd|secret|api[_-]?key|access[_-]?key)\s*[=:]\s*[\"']?([^\s\"',;&]+)"), 1),
)


def redact(data: bytes) -> tuple[bytes, dict[RedactionRule, int]]:
    """``data`` with every credential replaced, and the count per rule that matched."""
    counts: Counter[RedactionRule] = Counter()
    for rule, pattern, group in _RULES:
        marker = b"[REDACTED:" + rule.encode() + b"]"

        def replace(m: re.Match[bytes], group: int = group, marker: bytes = marker,
                    rule: RedactionRule = rule) -> bytes:
            if m.group(group).startswith(b"[REDACTED:"):
                return m.group(0)  # already replaced by an earlier rule
            counts[rule] += 1
            whole = m.group(0)
            start, end = m.start(group) - m.start(0), m.end(group) - m.start(0)
            return whole[:start] + marker + whole[end:]

        data = pattern.sub(replace, data)
    return data, dict(sorted(counts.items()))


def merge(*counts: dict[RedactionRule, int]) -> dict[RedactionRule, int]:
    """Per-rule sums of several ``redact`` counts."""
    total: Counter[RedactionRule] = Counter()
    for c in counts:
        total.update(c)
    return dict(sorted(total.items()))
