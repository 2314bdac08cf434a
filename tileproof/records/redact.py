"""Credential redaction for everything written to ``evidence/``: pure functions, one rule table.

Transcripts and pip freeze are meant to be committed, so a credential a program
prints (or a ``https://user:token@host/`` in an editable install's URL) is
replaced by ``[REDACTED:<rule>]`` before the bytes are written. The record keeps
how many matches each rule replaced (``Redactions``), never the value.

The rules run in table order over the bytes, each over what the ones before left:
the material of a signing key this process holds goes first (``watch_key``: the raw seed, as
hex, decimal or a bytes literal, and base64 in any alignment and any line split, so any PEM or
key file that holds it), then private key blocks whole (PEM, PGP, and PEM written with ``\n``
escapes inside JSON, up to the END line), then tokens with a known shape (GitHub, GitLab, Slack,
PyPI, AWS key ids, JWTs, Hugging Face, npm, Google API keys and OAuth tokens, OpenAI,
Anthropic, Stripe), webhook URLs (Slack, Discord), credentials in URLs (userinfo, also
``redis://:pw@``; query parameters such as ``access_token`` and ``X-Amz-Signature``), HTTP
authorization headers, passwords on a command line (``curl -u user:pw``, ``sshpass -p pw``)
or in a ``.netrc`` line, a value after a secret-looking name (``KEY=value``, ``KEY: value``,
JSON ``"key": "value"``, ``--password value``), a high-entropy value after a name that merely
contains a secret-looking word, a bare AWS secret access key and, last, any long random-looking
run of base64 characters. A value an earlier rule replaced is never counted again. Every pattern
is bounded (no nested unbounded repetition), so a 64 MiB transcript is scanned in linear time.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import threading
from collections import Counter
from collections.abc import Callable
from functools import cached_property
from typing import Literal

RedactionRule = Literal[
    "url-userinfo", "github-token", "aws-access-key", "bearer-token", "pypi-token", "secret-assignment",
    "private-key", "gitlab-token", "slack-token", "url-query-secret", "basic-auth", "aws-secret-key",
    "json-secret", "cli-secret-flag", "high-entropy-secret",
    "signing-key", "pgp-private-key", "jwt", "huggingface-token", "npm-token", "google-api-key",
    "google-oauth-token", "openai-key", "anthropic-key", "stripe-key", "webhook-url", "cli-user-password",
    "sshpass-password", "netrc-password", "random-run",
]
"""The closed set of rules; a record counts replacements per rule (records written before a rule existed
name only the rules of their time: the first six, then up to ``high-entropy-secret``)."""

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


RUN_MIN_LENGTH = 32
"""Shortest run of base64 characters the ``random-run`` rule replaces."""
RUN_MIN_BITS = 4.2
"""Least entropy per character of such a run (random base64 of 32 characters has about 4.6)."""
RUN_MIN_EACH = 3
"""Least upper-case letters past F, lower-case letters past f and digits, each, in such a run: hex in
either case (a digest, a GPU's uuid), a word joined by ``_``/``-`` or a run id is not one."""


_UPPER, _LOWER, _DIGIT = re.compile(rb"[G-Z]"), re.compile(rb"[g-z]"), re.compile(rb"[0-9]")


RUN_MIN_CHANGES = 0.45
"""Least share of neighbouring characters of such a run that differ in kind (upper case, lower case, digit,
other): about 0.64 in random base64, under 0.3 in a path or a run id; a C++ mangled name has about 0.43."""


def _kind(c: int) -> int:
    return 0 if 65 <= c <= 90 else 1 if 97 <= c <= 122 else 2 if 48 <= c <= 57 else 3


def kind_changes(value: bytes) -> float:
    """Share of neighbouring characters of ``value`` that differ in kind (see :data:`RUN_MIN_CHANGES`)."""
    kinds = [_kind(c) for c in value]
    return sum(a != b for a, b in zip(kinds, kinds[1:], strict=False)) / max(1, len(kinds) - 1)


def random_run(value: bytes) -> bool:
    """What the ``random-run`` rule replaces: a run of at least :data:`RUN_MIN_LENGTH` base64 characters
    with :data:`RUN_MIN_EACH` of each of ``G-Z``, ``g-z`` and digits, at least :data:`RUN_MIN_BITS` per
    character, kinds changing as in random text (:data:`RUN_MIN_CHANGES`), and not a path or a C++
    mangled name (``_Z``)."""
    return (len(value) >= RUN_MIN_LENGTH and not value.startswith((b"/", b"_Z"))
            and len(_UPPER.findall(value)) >= RUN_MIN_EACH and len(_LOWER.findall(value)) >= RUN_MIN_EACH
            and len(_DIGIT.findall(value)) >= RUN_MIN_EACH
            and entropy(value) >= RUN_MIN_BITS and kind_changes(value) >= RUN_MIN_CHANGES)


def bare_aws_secret(value: bytes) -> bool:
    """A bare AWS secret access key: 40 characters of upper and lower case letters, and a digit, ``/`` or
    ``+`` (a git commit id is lower case hex), at least 4 bits per character."""
    return (re.search(rb"[A-Z]", value) is not None and re.search(rb"[a-z]", value) is not None
            and re.search(rb"[0-9/+]", value) is not None and entropy(value) >= 4.0)


def not_an_id_pair(value: bytes) -> bool:
    """``-u 1000:1000`` (docker's uid:gid) is not a user's password."""
    return not value.isdigit()


MARKER = b"[REDACTED:"
"""How every replacement begins (``[REDACTED:<rule>]``)."""

Rule = tuple[RedactionRule, re.Pattern[bytes], int, Callable[[bytes], bool] | None]
"""(rule, pattern, group to replace (0: the whole match), a test the group's bytes must pass or None)."""

_PEM_BODY = rb"(?:[A-Za-z0-9+/=\s:,.-]|\\[nr/])"
r"""A character of a PEM block's body or headers, or a ``\n``/``\r``/``\/`` escape of JSON (a service-account
key file holds its PEM as one JSON string)."""

_RULES: tuple[Rule, ...] = (
    ("private-key", re.compile(
        rb"-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY-----(?:" + _PEM_BODY + rb"*?-----END (?:[A-Z0-9]{1,20} )"
        rb"{0,4}PRIVATE KEY-----|" + _PEM_BODY + rb"*)"), 0, None),
    ("pgp-private-key", re.compile(
        rb"-----BEGIN PGP PRIVATE KEY BLOCK-----(?:" + _PEM_BODY + rb"*?-----END PGP PRIVATE KEY BLOCK-----|"
        + _PEM_BODY + rb"*)"), 0, None),
    ("url-userinfo", re.compile(rb"(?<=://)([^/\s:@]*:[^/\s@]+)(?=@)"), 1, None),
    ("github-token", re.compile(rb"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), 0, None),
    ("gitlab-token", re.compile(rb"\bgl(?:pat|dt|rt|cbt|ptt|oas|soat|ffct|imt|ft)-[A-Za-z0-9_-]{20,}"), 0, None),
    ("slack-token", re.compile(rb"\bxox[abeoprs]-[A-Za-z0-9-]{10,}"), 0, None),
    ("aws-access-key", re.compile(rb"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), 0, None),
    ("pypi-token", re.compile(rb"\bpypi-[A-Za-z0-9_-]{16,}"), 0, None),
    ("jwt", re.compile(rb"\beyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,65536}\.[A-Za-z0-9_-]{0,4096}"), 0, None),
    ("huggingface-token", re.compile(rb"\bhf_[A-Za-z0-9]{30,}"), 0, None),
    ("npm-token", re.compile(rb"\bnpm_[A-Za-z0-9]{30,}"), 0, None),
    ("google-api-key", re.compile(rb"\bAIza[0-9A-Za-z_-]{35}"), 0, None),
    ("google-oauth-token", re.compile(rb"\bya29\.[0-9A-Za-z_-]{20,}"), 0, None),
    ("anthropic-key", re.compile(rb"\bsk-ant-[A-Za-z0-9_-]{20,}"), 0, None),
    ("openai-key", re.compile(rb"\bsk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20}T3BlbkFJ"
                              rb"[A-Za-z0-9]{20})"), 0, None),
    ("stripe-key", re.compile(rb"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), 0, None),
    ("webhook-url", re.compile(
        rb"https://(?:hooks\.slack\.com/(?:services|workflows|triggers)|(?:ptb\.|canary\.)?discord(?:app)?\.com/"
        rb"api/webhooks)/([A-Za-z0-9/_-]{10,4096})"), 1, None),
    ("url-query-secret", re.compile(
        rb"(?i)[?&](?:access_token|private_token|token|auth|key|api_?key|sig|signature|x-amz-signature|"
        rb"x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential)=([^&#\s\"'<>]+)"), 1, None),
    ("bearer-token", re.compile(rb"(?i)(?<=bearer )[A-Za-z0-9._~+/=-]{8,}"), 0, None),
    ("basic-auth", re.compile(rb"(?i)\bauthorization[\"']?\s{0,8}[:=]\s{0,8}[\"']?basic\s{1,8}([A-Za-z0-9+/]{4,}=*)"),
     1, None),
    ("cli-user-password", re.compile(
        rb"(?<![\w-])(?:-u|-U|--user|--proxy-user)(?:\s{1,8}|=)[\"']?[^\s:\"'@/]{1,256}:([^\s\"']{1,4096})"), 1,
     not_an_id_pair),
    ("sshpass-password", re.compile(
        rb"\bsshpass\s{1,8}(?:-[dfP]\s{0,8}\S{1,256}\s{1,8}|-[ev]\s{1,8}){0,4}-p\s{0,8}[\"']?([^\s\"']{1,4096})"), 1,
     None),
    ("netrc-password", re.compile(
        rb"(?i)\b(?:login|account)\s{1,8}\S{1,256}\s{1,8}password\s{1,8}(\S{1,4096})"), 1, None),
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
    ("aws-secret-key", re.compile(rb"(?<![A-Za-z0-9/+=_-])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=_-])"), 1,
     bare_aws_secret),
    ("random-run", re.compile(rb"(?<![A-Za-z0-9+/=_-])([A-Za-z0-9+/_-]{32,65536})={0,2}(?![A-Za-z0-9+/=_-])"), 1,
     random_run),
)

# --- the signing key's own material ---------------------------------------------------------

_HEX_GAP = rb"(?:[\s\"',;:._-]|\\[nrt]|\\x|0x|0X){0,8}"
r"""What may stand between two hex digits of a key: spaces and line breaks (any split), quotes and commas
(a list of strings), ``:`` (``bytes.hex(':')``), ``\x`` and ``0x`` (a C or Python byte list)."""
_B64_GAP = rb"(?:[\s\"',]|\\[nrt]){0,8}"
r"""What may stand between two base64 characters of a key: line breaks of any length, or their JSON escapes,
and the quotes and commas of a string split over several literals."""
_DEC_GAP = rb"[\s,;:\[\]()]{1,8}"
"""What separates the decimal bytes of a key (``list(seed)``, ``[154, 1, ...]``)."""
_TOKEN_AFTER, _TOKEN_BEFORE = re.compile(rb"[A-Za-z0-9+/=_-]*"), re.compile(rb"[A-Za-z0-9+/=_-]*\Z")
"""What a match is widened over, on both sides: the rest of the base64 or hex token it sits in, at most
:data:`WIDEN` bytes each way."""
WIDEN = 4096


def _b64_needles(seed: bytes) -> list[bytes]:
    """The base64 text (standard and URL-safe alphabets) that encodes ``seed`` wherever it sits in a longer
    blob: for each of the three alignments, the characters that only ``seed``'s bits decide."""
    out = []
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(bytes(shift) + seed)
            first, last = -(-8 * shift // 6), (8 * (shift + len(seed))) // 6
            out.append(text[first:last])
    return out


def _spread(chars: bytes, gap: bytes, ignore_case: bool = False) -> bytes:
    def one(c: int) -> bytes:
        ch = bytes([c])
        if ignore_case and ch.isalpha():
            return b"[" + ch.lower() + ch.upper() + b"]"
        return re.escape(ch)
    return gap.join(one(c) for c in chars)


def _repr_byte(b: int) -> bytes:
    """A regex for byte ``b`` as Python's bytes literal writes it, or as the byte itself where printable."""
    alts = [re.escape(b"\\x%02x" % b)]
    if b == 0x5C:  # a backslash is always written escaped
        alts.append(re.escape(b"\\\\"))
    elif 32 <= b < 127:
        alts.append(re.escape(bytes([b])))
        if b in b"'\"":  # a quote is escaped only when it is the literal's own quote character
            alts.append(re.escape(b"\\" + bytes([b])))
    named = {9: b"\\t", 10: b"\\n", 13: b"\\r"}
    if b in named:
        alts.append(re.escape(named[b]))
    return b"(?:" + b"|".join(alts) + b")"


class KeyWatch:
    r"""The private material of one signing key, found in any encoding tileproof knows (the ``signing-key``
    rule): the raw 32-byte seed; its hex (any case, any split, ``:``/``0x``/``\x`` between bytes); its
    decimal bytes; a Python bytes literal of it; and its base64 in either alphabet, at any alignment and
    split into lines of any length (so every PEM, PKCS#8, OpenSSH or JWK form that holds it, whatever its
    header says). ``seen`` counts the matches replaced in this process."""

    def __init__(self, seed: bytes):
        self.keyid = hashlib.sha256(b"tileproof-key-watch" + seed).hexdigest()
        self._seed = seed

    @property
    def seen(self) -> int:
        """Matches of this key replaced in this process so far (by any watch of the same key)."""
        with _WATCH_LOCK:
            return _SEEN[self.keyid]

    @cached_property
    def patterns(self) -> tuple[re.Pattern[bytes], ...]:
        seed = self._seed
        hex_digits = seed.hex().encode()
        return (
            re.compile(re.escape(seed)),
            re.compile(_spread(hex_digits, _HEX_GAP, ignore_case=True)),
            re.compile(_DEC_GAP.join(str(b).encode() for b in seed) + rb"(?![0-9])"),  # a literal start: fast
            re.compile(b"".join(_repr_byte(b) for b in seed)),
            *(re.compile(_spread(n, _B64_GAP)) for n in _b64_needles(seed)),
        )

    def spans(self, data: bytes) -> list[tuple[int, int]]:
        """Where the key's material is in ``data``: each match widened over the token it sits in, merged."""
        found = []
        for pattern in self.patterns:
            for m in pattern.finditer(data):
                before = _TOKEN_BEFORE.search(data, max(0, m.start() - WIDEN), m.start())
                after = _TOKEN_AFTER.match(data, m.end(), m.end() + WIDEN)
                found.append((m.start() - len(before.group()) if before else m.start(),
                              after.end() if after else m.end()))
        merged: list[tuple[int, int]] = []
        for start, end in sorted(found):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    def found_in(self, data: bytes) -> bool:
        return any(p.search(data) for p in self.patterns)


_WATCHED: dict[str, KeyWatch] = {}
_SEEN: Counter[str] = Counter()
_WATCH_LOCK = threading.Lock()


def watch_key(watch: KeyWatch) -> None:
    """Look for ``watch``'s key in everything this process redacts from now on (``signing.load_signer``
    calls it for the key it loads)."""
    with _WATCH_LOCK:
        _WATCHED.setdefault(watch.keyid, watch)


def watching() -> bool:
    """Whether this process watches a key (``watch_key``): then what ``redact`` gives depends on the process too,
    not only on the bytes."""
    with _WATCH_LOCK:
        return bool(_WATCHED)


def watched_key_in(data: bytes) -> bool:
    """Whether a watched key's material is in ``data`` (what ``store.write_evidence`` refuses to store)."""
    with _WATCH_LOCK:
        watched = list(_WATCHED.values())
    return any(w.found_in(data) for w in watched)


def _redact_keys(data: bytes) -> tuple[bytes, int]:
    with _WATCH_LOCK:
        watched = list(_WATCHED.values())
    total = 0
    for watch in watched:
        spans = watch.spans(data)
        if not spans:
            continue
        marker = MARKER + b"signing-key]"
        parts, at = [], 0
        for start, end in spans:
            parts += [data[at:start], marker]
            at = end
        data = b"".join([*parts, data[at:]])
        with _WATCH_LOCK:
            _SEEN[watch.keyid] += len(spans)
        total += len(spans)
    return data, total


def redact(data: bytes) -> tuple[bytes, dict[RedactionRule, int]]:
    """``data`` with every credential replaced, and the count per rule that matched."""
    counts: Counter[RedactionRule] = Counter()
    data, keys = _redact_keys(data) if _WATCHED else (data, 0)
    if keys:
        counts["signing-key"] = keys
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
