"""Property-based tests of every parser and loader: only tileproof's own errors escape, each one line.

Each target feeds one parser or loader generated input: random text and bytes,
near-valid input built from the formats' own pieces (``inf MiB``, ``x @
file:///a.whl``, NUL bytes, 5,000-digit numbers, 1,000-deep nesting) and
mutations of real committed files. A target passes when the call returns or
raises a ``TileproofError`` whose message is one non-empty line; any other
exception is a bug.

The budget is ``TILEPROOF_FUZZ_EXAMPLES`` examples per target (100, seeded, in the test
suite); ``tests/benchmarks/fuzz_parsers.py`` runs 10,000 and commits the
result. ``EXAMPLES_RUN`` counts the calls each target made.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import get_args

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tileproof.claims import spec as claims
from tileproof.records import lessons, parsers, safe_read, store, tolerances
from tileproof.records.errors import TileproofError
from tileproof.records.redact import RedactionRule, random_looking, redact
from tileproof.toolchain import build, find

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = int(os.environ.get("TILEPROOF_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=EXAMPLES <= 200,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])
"""Fixed budget and, in the suite, a fixed seed: the same examples every run."""

EXAMPLES_RUN: Counter[str] = Counter()


def own_errors_only(target: str, fn, *args):
    """``fn(*args)``; a TileproofError must be one non-empty line, anything else fails."""
    EXAMPLES_RUN[target] += 1
    try:
        return fn(*args)
    except TileproofError as e:
        msg = str(e)
        assert msg.strip(), f"not one line: {msg!r}"
        assert "\n" not in msg, f"not one line: {msg!r}"
        assert "\r" not in msg, f"not one line: {msg!r}"
        return e


# --- pieces ---------------------------------------------------------------------------

HOSTILE = ["inf", "-inf", "nan", "1e400", "9" * 5000, "[N/A]", "", " ", "\x00", "\r", "\r\n", "\n", '"', "'",
           "@", " @ ", "#", "==", ".whl", "-", "/", "\\", ",", ":", "MiB", "MHz", "file:///a.whl", "x @ file:///a.whl",
           "\ufeff", "\u2028", "é", "[" * 1000, "{" * 50, "REG:", "SHARED:", "Function ", "release ",
           ", V", "13.4", "sm_", "Editable", "(", ")", "*", "&a", "!!python/object", "---", "- ", "  "]
piece = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12), st.integers(-10**20, 10**20).map(str),
                  st.floats(allow_nan=True, allow_infinity=True).map(repr))
words = st.lists(piece, max_size=12).map("".join)


def lines(line: st.SearchStrategy[str], size: int = 20) -> st.SearchStrategy[str]:
    return st.lists(line, max_size=size).map("\n".join)


def mutated(data: bytes) -> st.SearchStrategy[bytes]:
    """``data`` with up to 8 random splices: bytes replaced, cut or inserted at random offsets."""
    edit = st.tuples(st.integers(0, max(len(data) - 1, 0)), st.integers(0, 40), st.binary(max_size=16))

    def apply(edits):
        out = bytearray(data)
        for at, cut, new in edits:
            at = min(at, len(out))
            out[at:at + cut] = new
        return bytes(out)

    return st.lists(edit, min_size=1, max_size=8).map(apply)


def deep(opener: str, closer: str) -> st.SearchStrategy[str]:
    return st.integers(1, 3000).map(lambda n: opener * n + closer * n)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30,
)


# --- transcript parsers ---------------------------------------------------------------

freeze_line = st.one_of(
    st.builds(lambda n, v: f"{n}=={v}", words, words),
    st.builds(lambda n, u: f"{n} @ {u}", words, words.map(lambda w: w + ".whl")),
    st.builds(lambda n, u, f: f"{n} @ file:///{u}/{f}.whl", words, words, words),
    st.builds(lambda n, v: f"# Editable Git install with no remote ({n}=={v})", words, words),
    st.builds(lambda p: f"-e {p}", words),
    words,
)


@FUZZ
@given(st.one_of(lines(freeze_line), st.text()))
def test_parse_pip_freeze(text):
    out = own_errors_only("parse_pip_freeze", parsers.parse_pip_freeze, text)
    assert isinstance(out, dict)


gpu_cell = st.one_of(piece, st.builds(lambda n, u: f"{n} {u}", piece, st.sampled_from(["MiB", "MHz", ""])))
gpu_header = st.lists(st.sampled_from(list(parsers.GPU_QUERY_FIELDS) + ["clocks.current.sm", "memory.total [MiB]"])
                      | piece, max_size=10).map(", ".join)
gpu_row = st.lists(gpu_cell, max_size=10).map(", ".join)


@FUZZ
@given(st.one_of(st.builds(lambda h, rows: h + "\n" + rows, gpu_header, lines(gpu_row, 6)), st.text()))
def test_parse_gpu_query(text):
    out = own_errors_only("parse_gpu_query", parsers.parse_gpu_query, text)
    assert isinstance(out, list)


@FUZZ
@given(st.one_of(st.builds(lambda a, b, c: f"Cuda compilation tools, release {a}, V{b}{c}", piece, piece, words),
                 st.text()))
def test_parse_release(text):
    out = own_errors_only("parse_release", find.parse_release, text)
    assert out is None or isinstance(out, str)


REAL_SMI = (REPO / "tests/data/gpu/nvidia-smi.txt").read_bytes()
smi_head = st.builds(lambda d, mo, day, h, mi, sec, y: f"{d} {mo} {day} {h}:{mi}:{sec} {y}",
                     st.sampled_from(["Mon", "Sun", "Xyz", ""]), st.sampled_from(["Jan", "Feb", "Dec", "Foo"]),
                     piece | st.integers(-5, 40).map(str), piece | st.integers(0, 99).map("{:02d}".format),
                     st.integers(0, 99).map("{:02d}".format), st.integers(0, 99).map("{:02d}".format),
                     piece | st.integers(0, 99999).map(str))


@FUZZ
@given(st.one_of(mutated(REAL_SMI).map(lambda b: b.decode("utf-8", "replace")), smi_head, st.text()))
def test_smi_clock(text):
    out = own_errors_only("smi_clock", parsers.smi_clock, text)
    assert out is None or out.tzinfo is None


res_line = st.one_of(
    st.builds(lambda f: f"  Function {f}:", words),
    st.builds(lambda fields: " ".join(fields),
              st.lists(st.builds(lambda k, v: f"{k}:{v}", st.sampled_from(["REG", "SHARED", "STACK", "LOCAL",
                                                                              "CONSTANT[0]", "TEXTURE"]) | piece,
                                 st.integers(0, 10**30).map(str) | piece), max_size=6)),
    words,
)


@FUZZ
@given(st.one_of(lines(res_line, 12), st.text()))
def test_parse_res_usage(text):
    out = own_errors_only("parse_res_usage", build.parse_res_usage, text)
    assert isinstance(out, list)


@FUZZ
@given(words)
def test_parse_target(value):
    own_errors_only("parse_target", build.parse_target, value)


# --- loaders of files -----------------------------------------------------------------


class Scratch:
    """A throwaway repository per example: hypothesis cannot share pytest's tmp_path."""

    def __enter__(self) -> Path:
        self.dir = Path(tempfile.mkdtemp(prefix="tileproof-fuzz-"))
        return self.dir

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def put(root: Path, rel: str, data: bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


REAL_RECORD = (REPO / "tests/data/records/day79/runs/FIXTURE-20260901T120100Z-run-00000001.json").read_bytes()
record_bytes = st.one_of(
    mutated(REAL_RECORD),
    st.binary(max_size=2000),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.builds(lambda v: json.dumps({**json.loads(REAL_RECORD), "report": v}).encode(), json_values),
    deep("[", "]").map(str.encode),
    deep('{"a":', "}").map(lambda s: (s[:-1] + "1" + s[-1:]).encode()),
    st.just(b"9" * 5000),
)


@FUZZ
@given(record_bytes)
def test_load_record(data):
    with Scratch() as root:
        path = put(root, f"{store.RUNS}/20990101T000000Z-run-00000000.json", data)
        own_errors_only("store.load_record", store.load_record, path)


REAL_LESSON = (REPO / "lessons/tile-reduction-spike.md").read_bytes()
front_keys = st.sampled_from(["lesson_version", "id", "title", "status", "programs", "hardware", "results",
                              "performance", "path", "checks", "program", "check", "bound", "result", "run_id"])
yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | words | st.sampled_from(["", ".", "..", "kernels/",
                                                                                      "kernels/x.py", "cpp/y.cu"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(front_keys | words, inner, max_size=5),
    max_leaves=25,
)


def lesson_with(front: object) -> bytes:
    return ("---\n" + yaml.safe_dump(front, allow_unicode=True) + "---\nbody\n").encode("utf-8", "surrogatepass")


lesson_bytes = st.one_of(
    mutated(REAL_LESSON),
    st.binary(max_size=1000),
    yaml_values.map(lesson_with),
    st.builds(lambda p: lesson_with({"lesson_version": 1, "id": "x", "title": "t", "status": "draft",
                                     "programs": [{"path": p, "checks": ["c"]}], "results": []}),
              st.sampled_from(["", ".", "/", "..", "kernels", "cpp/"]) | words),
    deep("[", "]").map(lambda s: f"---\na: {s}\n---\n".encode()),
    st.integers(1, 1500).map(lambda n: ("---\n" + "".join("  " * i + "a:\n" for i in range(n)) + "---\n").encode()),
)


@FUZZ
@given(lesson_bytes)
def test_lesson_load(data):
    with Scratch() as root:
        path = put(root, f"{lessons.LESSONS}/x.md", data)
        own_errors_only("lessons.load_path", lessons.load_path, path, "lessons/x.md", root)


@FUZZ
@given(st.one_of(lesson_bytes.map(lambda b: b.decode("utf-8", "replace")), st.text()))
def test_lesson_parse(text):
    own_errors_only("lessons.parse", lessons.parse, "lessons/x.md", text)


REAL_CLAIMS = (REPO / "lessons/claims/tile-reduction-spike.claims.yaml").read_bytes()
claims_bytes = st.one_of(
    mutated(REAL_CLAIMS),
    st.binary(max_size=1000),
    yaml_values.map(lambda v: yaml.safe_dump(v, allow_unicode=True).encode("utf-8", "surrogatepass")),
    deep("[", "]").map(str.encode),
    st.integers(1, 1500).map(lambda n: "".join("  " * i + "a:\n" for i in range(n)).encode()),
)


@FUZZ
@given(claims_bytes)
def test_claims_load_file(data):
    with Scratch() as root:
        path = put(root, "lessons/claims/doc.claims.yaml", data)
        put(root, "lessons/claims/snippets/k.py", b"")
        own_errors_only("claims.load_file", claims.load_file, path, "lessons/claims/doc.claims.yaml")


TABLE_HEAD = ("from dataclasses import dataclass\n\n@dataclass(frozen=True)\nclass Tolerance:\n"
              "    rtol: object\n    atol: object\n\n")
number = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30), st.text(max_size=5),
                   st.none())


def table_source(entries: list[tuple[object, object, object]]) -> bytes:
    body = ", ".join(f"{name!r}: Tolerance({r!r}, {a!r})" for name, r, a in entries)
    return (TABLE_HEAD + f"TOLERANCES = {{{body}}}\n").replace("inf", "float('inf')").replace(
        "nan", "float('nan')").encode("utf-8", "surrogatepass")


table_bytes = st.one_of(
    st.lists(st.tuples(words | st.integers(), number, number), max_size=5).map(table_source),
    st.binary(max_size=500),
    st.sampled_from([b"TOLERANCES = {}\n", b"TOLERANCES = 1\n", b"raise SystemExit(3)\n", b"\x00",
                     b"TOLERANCES = {'a': 1}\n", b"x = (" * 300, b"x = " + b"-" * 100_000 + b"1",
                     b"x = 1" + b"+1" * 200_000, b"x = a" + b".a" * 200_000]),
)


@FUZZ
@given(table_bytes)
def test_tolerance_table(data):
    with Scratch() as root:
        put(root, tolerances.TABLE_FILE.as_posix(), data)
        own_errors_only("tolerances.load_table", tolerances.load_table, root)


# --- the safe reader itself -----------------------------------------------------------

entry_kinds = st.sampled_from(["file", "link-inside", "link-outside", "link-dangling", "fifo", "dir", "missing",
                               "dir-link"])
reader_kinds = st.sampled_from(sorted(safe_read.LIMITS))
rel_paths = st.one_of(st.sampled_from(["evidence/r/a.txt", "runs/x.json", "lessons/x.md", "a", "../a", "/etc/passwd",
                                       "", ".", "evidence/../../a", "evidence//r/./a.txt"]), words)


def make(root: Path, rel: str, entry: str, data: bytes) -> None:
    """Put one entry of kind ``entry`` at ``root/rel`` (when it stays inside ``root``)."""
    try:
        path = root / safe_read.relative(root, rel)
    except TileproofError:
        return
    if entry == "missing" or len(str(path)) > 3000:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if entry == "file":
            path.write_bytes(data)
        elif entry == "fifo":
            os.mkfifo(path)
        elif entry == "dir":
            path.mkdir()
        elif entry == "dir-link":
            if path.parent == root:
                return
            path.parent.rename(path.parent.with_name(path.parent.name + ".real"))
            path.parent.symlink_to(path.parent.with_name(path.parent.name + ".real"))
        else:
            target = {"link-inside": root / "target", "link-outside": Path("/etc/hostname"),
                      "link-dangling": root / "gone"}[entry]
            put(root, "target", data)
            path.symlink_to(target)
    except (OSError, ValueError):  # names the file system refuses (too long, NUL, a file where a folder goes)
        pass


@FUZZ
@given(rel_paths, entry_kinds, reader_kinds, st.binary(max_size=300) | st.text(max_size=100).map(str.encode))
def test_safe_read(rel, entry, kind, data):
    with Scratch() as root:
        make(root, rel, entry, data)
        got = own_errors_only("safe_read.read_text", safe_read.read_text, root, rel, kind)
        if isinstance(got, str):  # read: a regular file inside root, linked only where links are allowed
            assert got.encode() == data
            assert entry == "file" or (entry in ("link-inside", "dir-link") and kind not in safe_read.NO_LINKS)


@FUZZ
@given(st.one_of(st.text(), json_values.map(json.dumps), deep("[", "]"), deep('{"a":', "}")))
def test_safe_parse_json(text):
    got = own_errors_only("safe_read.parse_json", safe_read.parse_json, text, "x.json")
    if not isinstance(got, BaseException):  # read: never nested past the cap (the walk may be spared, never wrong)
        assert nesting(got) <= safe_read.MAX_DEPTH


def nesting(value) -> int:
    """How deep lists and mappings nest in ``value`` (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((c, depth + 1) for c in (item.values() if isinstance(item, dict) else item))
    return deepest


@FUZZ
@given(st.one_of(st.text(), yaml_values.map(yaml.safe_dump), deep("[", "]"), lines(words)))
def test_safe_parse_yaml(text):
    try:
        own_errors_only("safe_read.parse_yaml", safe_read.parse_yaml, text, "x.yaml")
    except yaml.YAMLError as e:  # documented: syntax errors stay YAMLError for the caller to place
        assert str(e)


# --- redaction ------------------------------------------------------------------------

SECRETS = [  # (how the value is written around it, the value): one per rule, values random below
    ("aws_secret_access_key={}", "AWS"), ("AWS_SECRET_ACCESS_KEY: {}", "AWS"), ('{{"password": "{}"}}', "PW"),
    ('{{"api_key": {}}}', "PW"), ("--password {}", "PW"), ("Authorization: Basic {}", "B64"), ("xoxb-{}", "TOK"),
    ("glpat-{}", "TOK"), ("ghp_{}", "TOK"), ("pypi-{}", "TOK"), ("https://u:{}@h/x", "PW"),
    ("x.whl?access_token={}", "PW"), ("x.whl?X-Amz-Signature={}", "PW"), ("password={}", "PW"),
    ("Bearer {}", "TOK"), ("CI_DEPLOY_TOKEN={}", "RANDOM"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----", "B64"),
]
alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
secret_values = {
    "AWS": st.text(alnum + "/+", min_size=40, max_size=40),
    "PW": st.text(alnum + "!%*", min_size=6, max_size=30),
    "B64": st.text(alnum + "+/", min_size=24, max_size=60),
    "TOK": st.text(alnum, min_size=24, max_size=40),
    "RANDOM": st.builds(lambda a, b: a + "7" + b + "Q", st.text(alnum, min_size=10, max_size=20),
                        st.text(alnum, min_size=10, max_size=20)).filter(lambda v: random_looking(v.encode())),
}
planted = st.sampled_from(SECRETS).flatmap(lambda s: secret_values[s[1]].map(lambda v: (s[0].format(v), v)))
around = st.one_of(words, st.sampled_from(["\n", " ", "", "\t", ": ", "=", '"', "&", "@", "-----BEGIN ", "xox",
                                          "a" * 5000, "token=" * 200, '"password":' * 200, "--password " * 200]))


@FUZZ
@given(st.lists(st.tuples(around, planted), max_size=6), around)
def test_redact(chunks, tail):
    """Every credential planted on a line of its own (whatever the lines around it hold) is gone from
    what redaction keeps, a second pass finds nothing, and the counts are the markers written, per rule."""
    text = "".join(f"{a}\n{p}\n" for a, (p, _v) in chunks) + tail
    out, counts = own_errors_only("redact.redact", redact, text.encode("utf-8", "surrogatepass"))
    for _a, (_p, value) in chunks:
        assert value.encode() not in out or value.encode() in text.replace(_p, "").encode("utf-8", "surrogatepass")
    assert redact(out) == (out, {})
    assert counts == {r: out.count(f"[REDACTED:{r}]".encode()) for r in counts}
    assert all(n > 0 for n in counts.values())
    assert set(counts) <= set(get_args(RedactionRule))


TARGETS = [test_parse_pip_freeze, test_parse_gpu_query, test_smi_clock, test_parse_release, test_parse_res_usage,
           test_parse_target, test_load_record, test_lesson_load, test_lesson_parse, test_claims_load_file,
           test_tolerance_table, test_safe_read, test_safe_parse_json, test_safe_parse_yaml, test_redact]
"""Every target, in the order the benchmark runs them."""
