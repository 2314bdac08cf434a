"""Credential redaction for everything written to ``evidence/``: pure functions, one rule table.

Transcripts and pip freeze are meant to be committed, so a credential a program
prints (or a ``https://user:token@host/`` in an editable install's URL) is
replaced by ``[REDACTED:<rule>]`` before the bytes are written. The record keeps
how many matches each rule replaced (``Redactions``), never the value.

The rules run in table order over the bytes, each over what the ones before left:
a private key block goes whole first, then tokens with a known shape (GitHub,
GitLab, Slack, PyPI, AWS key ids), credentials in URLs (userinfo, query
parameters such as ``access_token`` and ``X-Amz-Signature``), HTTP authorization
headers, a value after a secret-looking name (``KEY=value``, ``KEY: value``, JSON
``"key": "value"``, ``--password value``) and, last, a high-entropy value after a
name that merely contains a secret-looking word. A value an earlier rule replaced
is never counted again. Every pattern is bounded (no nested unbounded repetition), so
a 64 MiB transcript is scanned in linear time.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Literal

RedactionRule = Literal[
    "url-userinfo", "github-token", "aws-access-key", "bearer-token", "pypi-token", "secret-assignment",
    "private-key", "gitlab-token", "slack-token", "url-query-secret", "basic-auth", "aws-secret-key",
    "json-secret", "cli-secret-flag", "high-entropy-secret",
]
"""The closed set of rules; a record counts replacements per rule (the first six are those of records
written before the others existed: such a record's counts name only those)."""

SECRET_WORD = rb"(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?)"
"""A name that ends with one of these names a secret (``DB_PASSWORD``, ``"api_key"``, ``--auth-token``)."""
_NAME = rb"(?:[A-Za-z0-9]{1,40}[_.-]){0,4}" + SECRET_WORD
"""A secret-looking name: a few words joined by ``_ . -`` whose last word is a :data:`SECRET_WORD`."""

ENTROPY_MIN_BITS = 3.0
"""Least Shannon entropy per character of a value the ``high-entropy-secret`` rule replaces."""
ENTROPY_MIN_LENGTH = 16
"""Shortest value that rule replaces (a random 16-character key has about 3.6 bits per character)."""


def entropy(value: bytes) -> float:
    """Shannon entropy of ``value`` in bits per byte."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def random_looking(value: bytes) -> bool:
    """What the ``high-entropy-secret`` rule replaces: at least :data:`ENTROPY_MIN_LENGTH` characters,
    letters and digits both, :data:`ENTROPY_MIN_BITS` per character, and not a path or a URL."""
    return (len(value) >= ENTROPY_MIN_LENGTH and re.search(rb"[A-Za-z]", value) is not None
            and re.search(rb"[0-9]", value) is not None and not value.startswith((b"/", b"./", b"~/"))
            and b"://" not in value and entropy(value) >= ENTROPY_MIN_BITS)


MARKER = b"[REDACTED:"
"""How every replacement begins (``[REDACTED:<rule>]``)."""

Rule = tuple[RedactionRule, re.Pattern[bytes], int, Callable[[bytes], bool] | None]
"""(rule, pattern, group to replace (0: the whole match), a test the group's bytes must pass or None)."""

_RULES: tuple[Rule, ...] = (
    ("private-key", re.compile(
        rb"-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY-----(?:[A-Za-z0-9+/=\s:,.-]*?-----END (?:[A-Z0-9]{1,20} )"
        rb"{0,4}PRIVATE KEY-----|[A-Za-z0-9+/=\s:,.-]*)"), 0, None),
    ("url-userinfo", re.compile(rb"(?<=://)([^/\s:@]+:[^/\s@]+)(?=@)"), 1, None),
    ("github-token", re.compile(rb"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), 0, None),
    ("gitlab-token", re.compile(rb"\bgl(?:pat|dt|rt|cbt|ptt|oas|soat|ffct|imt|ft)-[A-Za-z0-9_-]{20,}"), 0, None),
    ("slack-token", re.compile(rb"\bxox[abeoprs]-[A-Za-z0-9-]{10,}"), 0, None),
    ("aws-access-key", re.compile(rb"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), 0, None),
    ("pypi-token", re.compile(rb"\bpypi-[A-Za-z0-9_-]{16,}"), 0, None),
    ("url-query-secret", re.compile(
        rb"(?i)[?&](?:access_token|private_token|token|auth|key|api_?key|sig|signature|x-amz-signature|"
        rb"x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential)=([^&#\s\"'<>]+)"), 1, None),
    ("bearer-token", re.compile(rb"(?i)(?<=bearer )[A-Za-z0-9._~+/=-]{8,}"), 0, None),
    ("basic-auth", re.compile(rb"(?i)\bauthorization[\"']?\s{0,8}[:=]\s{0,8}[\"']?basic\s{1,8}([A-Za-z0-9+/]{4,}=*)"),
     1, None),
    ("aws-secret-key", re.compile(
        rb"(?i)(?:\b|_)secret_?access_?key[\"']?\s{0,8}[=:]\s{0,8}[\"']?([A-Za-z0-9/+=]{16,})"), 1, None),
    ("json-secret", re.compile(rb"(?i)\"" + _NAME + rb"\"\s{0,8}:\s{0,8}\"((?:[^\"\\\n]|\\.){1,4096})\""), 1, None),
    ("json-secret", re.compile(rb"(?i)\"" + _NAME + rb"\"\s{0,8}:\s{0,8}([^\s,}\]\"\[{]{1,4096})"), 1,
     lambda value: value not in (b"null", b"true", b"false")),
    ("cli-secret-flag", re.compile(rb"(?i)(?<![\w-])--?" + _NAME + rb"(?![\w.-])\s{1,8}(?!-)([^\s\"']{1,4096})"),
     1, None),
    ("secret-assignment", re.compile(
        rb"(?i)\b(?:token|password|passwd|secret|api[_-]?key|access[_-]?key)\s*[=:]\s*[\"']?([^\s\"',;&]+)"), 1, None),
    ("high-entropy-secret", re.compile(
        rb"(?i)(?:secret|token|passw|pwd|credential|api[_-]?key|private[_-]?key|auth(?!or))[A-Za-z0-9_.-]{0,40}"
        rb"[\"']?\s{0,8}[=:]\s{0,8}[\"']?([A-Za-z0-9+/=_.~-]{16,4096})"), 1, random_looking),
)


def redact(data: bytes) -> tuple[bytes, dict[RedactionRule, int]]:
    """``data`` with every credential replaced, and the count per rule that matched."""
    counts: Counter[RedactionRule] = Counter()
    for rule, pattern, group, accept in _RULES:
        marker = MARKER + rule.encode() + b"]"

        def replace(m: re.Match[bytes], group: int = group, marker: bytes = marker, rule: RedactionRule = rule,
                    accept: Callable[[bytes], bool] | None = accept) -> bytes:
            whole = m.group(0)
            start, end = m.start(group) - m.start(0), m.end(group) - m.start(0)
            kept = whole.find(MARKER, start, end)  # a value runs up to an earlier rule's marker, never over it
            end = end if kept < 0 else kept
            value = whole[start:end]
            if not value or (accept is not None and not accept(value)):
                return whole  # already replaced by an earlier rule, or not what this rule replaces
            counts[rule] += 1
            return whole[:start] + marker + whole[end:]

        data = pattern.sub(replace, data)
    return data, dict(sorted(counts.items()))


def merge(*counts: dict[RedactionRule, int]) -> dict[RedactionRule, int]:
    """Per-rule sums of several ``redact`` counts."""
    total: Counter[RedactionRule] = Counter()
    for c in counts:
        total.update(c)
    return dict(sorted(total.items()))
