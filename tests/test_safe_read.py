"""Hostile input files: links, FIFOs, huge or non-UTF-8 files and deep nesting are refused in one line.

Each case is an attack on a committed tree; before
``records.safe_read`` each one read a file outside the repository, blocked
forever, wrote outside the repository, or ended in a traceback.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from tileproof.claims import spec as claims
from tileproof.gather import audit
from tileproof.records import lessons, parsers, safe_read, store, tolerances
from tileproof.records.errors import InputRefused, RecordError, TileproofError
from tileproof.toolchain import build

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "tests/data/records/day79/runs/FIXTURE-20260901T120100Z-run-00000001.json"
NAME = "20990101T000000Z-run-00000000.json"


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert text
    assert "\n" not in text
    assert "fix:" in text
    return text


def within(seconds: float, fn, *args):
    """``fn(*args)`` in a daemon thread: fails (instead of hanging the suite) if it blocks."""
    out: dict = {}

    def call():
        try:
            out["value"] = fn(*args)
        except BaseException as e:  # handed to the test below
            out["error"] = e

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn.__name__} blocked for more than {seconds} s"
    if "error" in out:
        raise out["error"]
    return out.get("value")


# --- links --------------------------------------------------------------------------


def test_evidence_link_to_etc_passwd_is_refused(tmp_path):
    (tmp_path / "evidence" / "r").mkdir(parents=True)
    (tmp_path / "evidence" / "r" / "pip-freeze.txt").symlink_to("/etc/passwd")
    with pytest.raises(InputRefused) as err:
        safe_read.read_evidence(tmp_path, "evidence/r/pip-freeze.txt")
    assert err.value.kind == "symlink"
    assert "symbolic link" in one_line(err)


def test_evidence_link_inside_the_repo_is_refused_too(tmp_path):
    """Records and transcripts are plain files: even a link to a sibling is refused."""
    (tmp_path / "evidence" / "r").mkdir(parents=True)
    (tmp_path / "evidence" / "r" / "a.txt").write_text("a")
    (tmp_path / "evidence" / "r" / "b.txt").symlink_to("a.txt")
    with pytest.raises(InputRefused) as err:
        safe_read.read_evidence(tmp_path, "evidence/r/b.txt")
    assert err.value.kind == "symlink"


def test_evidence_under_a_linked_folder_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_text("secret")
    repo = tmp_path / "repo"
    (repo / "evidence").mkdir(parents=True)
    (repo / "evidence" / "r").symlink_to(outside)
    with pytest.raises(InputRefused) as err:
        safe_read.read_evidence(repo, "evidence/r/a.txt")
    assert err.value.kind == "symlink"
    assert "evidence/r" in one_line(err)


def test_record_link_in_runs_is_refused(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / NAME).symlink_to(RECORD)
    with pytest.raises(InputRefused) as err:
        store.load_record(tmp_path / "runs" / NAME)
    assert err.value.kind == "symlink"


def test_lesson_link_out_of_the_repo_is_refused(tmp_path):
    (tmp_path / "repo" / "lessons").mkdir(parents=True)
    (tmp_path / "elsewhere.md").write_text("---\nid: x\n---\n")
    (tmp_path / "repo" / "lessons" / "x.md").symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(InputRefused) as err:
        lessons.load_all(tmp_path / "repo")
    assert err.value.kind == "outside-repo"
    assert "outside the repository" in one_line(err)


def test_a_lesson_may_link_inside_the_repo(tmp_path):
    src = REPO / "lessons" / "tile-reduction-spike.md"
    (tmp_path / "lessons").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / src.name).write_bytes(src.read_bytes())
    (tmp_path / "lessons" / src.name).symlink_to(tmp_path / "docs" / src.name)
    assert [lesson.id for lesson in lessons.load_all(tmp_path)] == ["tile-reduction-spike"]


def test_paths_climbing_out_are_refused(tmp_path):
    for rel in ("../x", "/etc/passwd", "evidence/../../x"):
        with pytest.raises(InputRefused) as err:
            safe_read.read_bytes(tmp_path, rel, "evidence")
        assert err.value.kind == "outside-repo"
    with pytest.raises(InputRefused) as err:
        safe_read.read_evidence(tmp_path, "runs/x.json")
    assert err.value.kind == "outside-repo"


def test_tolerance_table_link_out_of_the_repo_is_refused(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "table.py").write_text((REPO / "kernels" / "tolerances.py").read_text())
    (tmp_path / "repo" / "kernels").mkdir(parents=True)
    (tmp_path / "repo" / "kernels" / "tolerances.py").symlink_to(tmp_path / "table.py")
    with pytest.raises(tolerances.ToleranceTableError, match="outside the repository"):
        tolerances.load_table(tmp_path / "repo")


# --- special files ------------------------------------------------------------------


def test_fifo_in_evidence_is_refused_without_blocking(tmp_path):
    (tmp_path / "evidence" / "r").mkdir(parents=True)
    os.mkfifo(tmp_path / "evidence" / "r" / "stdout.txt")
    with pytest.raises(InputRefused) as err:
        within(5, safe_read.read_evidence, tmp_path, "evidence/r/stdout.txt")
    assert err.value.kind == "special-file"
    assert "a FIFO" in one_line(err)


def test_fifo_as_record_or_lesson_is_refused_without_blocking(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "lessons").mkdir()
    os.mkfifo(tmp_path / "runs" / NAME)
    os.mkfifo(tmp_path / "lessons" / "x.md")
    with pytest.raises(InputRefused, match="a FIFO"):
        within(5, store.load_records, tmp_path)
    with pytest.raises(InputRefused, match="a FIFO"):
        within(5, lessons.load_all, tmp_path)


def test_device_and_directory_are_refused(tmp_path):
    (tmp_path / "evidence" / "d").mkdir(parents=True)
    with pytest.raises(InputRefused) as err:
        safe_read.read_bytes(tmp_path, "evidence/d", "evidence")
    assert err.value.kind == "special-file"
    assert "a directory" in str(err.value)
    (tmp_path / "lessons").mkdir()
    (tmp_path / "lessons" / "null.md").symlink_to("/dev/null")
    with pytest.raises(InputRefused) as err:
        safe_read.read_bytes(tmp_path, "lessons/null.md", "lesson")
    assert err.value.kind == "outside-repo"


# --- sizes, encodings, nesting: one line, not a traceback ---------------------------


def runs_with(root: Path, data: bytes) -> Path:
    (root / "runs").mkdir(exist_ok=True)
    path = root / "runs" / NAME
    path.write_bytes(data)
    return path


def test_record_with_one_non_utf8_byte_is_one_line(tmp_path):
    data = RECORD.read_bytes()
    path = runs_with(tmp_path, data[:100] + b"\xff" + data[101:])
    with pytest.raises(InputRefused) as err:
        store.load_record(path)
    assert err.value.kind == "not-utf8"
    assert "byte 100: not UTF-8 (byte 0xff)" in one_line(err)


def test_50_mb_of_random_bytes_in_runs_is_one_line(tmp_path):
    path = runs_with(tmp_path, os.urandom(50 * 1024 * 1024))
    with pytest.raises(InputRefused) as err:
        store.load_records(tmp_path)
    assert err.value.kind == "too-large"
    assert f"at most {safe_read.LIMITS['record']}" in one_line(err)
    assert str(path) in str(err.value)


def test_a_file_over_its_kind_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setitem(safe_read.LIMITS, "evidence", 10)
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "a").write_bytes(b"x" * 11)
    with pytest.raises(InputRefused) as err:
        safe_read.read_evidence(tmp_path, "evidence/a")
    assert err.value.kind == "too-large"


def test_bracket_repeated_100k_times_is_one_line(tmp_path):
    path = runs_with(tmp_path, b"[" * 100_000)
    with pytest.raises(InputRefused) as err:
        store.load_record(path)
    assert err.value.kind == "too-deep"
    assert "nests more than" in one_line(err)


def test_the_audit_reports_a_bracket_bomb_as_a_finding(tmp_path):
    runs_with(tmp_path, b"[" * 100_000)
    result = audit.audit(tmp_path)
    assert [(f.rule, f.file) for f in result.findings if f.rule == "record-schema"] == \
        [("record-schema", f"runs/{NAME}")]


def test_json_nested_past_the_cap_is_refused_without_recursion():
    text = "[" * (safe_read.MAX_DEPTH + 1) + "]" * (safe_read.MAX_DEPTH + 1)
    with pytest.raises(InputRefused, match="nests more than 64 levels"):
        safe_read.parse_json(text, "x.json")
    assert safe_read.parse_json("[" * safe_read.MAX_DEPTH + "]" * safe_read.MAX_DEPTH, "x.json")


def test_json_with_more_brackets_than_the_cap_but_shallow_is_read():
    """Past MAX_DEPTH brackets in all, the nesting is walked (below it, none can be that deep): wide is fine."""
    text = '{"a": [' + ", ".join(['{"b": "[[{{"}'] * safe_read.MAX_DEPTH) + "]}"
    assert len(safe_read.parse_json(text, "x.json")["a"]) == safe_read.MAX_DEPTH
    deep = '{"s": "' + "[" * safe_read.MAX_DEPTH + '", "d": ' + "[" * (safe_read.MAX_DEPTH + 1) + "]" * (
        safe_read.MAX_DEPTH + 1) + "}"
    with pytest.raises(InputRefused, match="nests more than 64 levels"):
        safe_read.parse_json(deep, "x.json")


def lesson_text(program_path: str) -> str:
    text = (REPO / "lessons" / "tile-reduction-spike.md").read_text()
    return text.replace("- path: cpp/tile_spike.cu", f"- path: {json.dumps(program_path)}", 1)


def test_lesson_program_with_empty_path_is_one_line():
    with pytest.raises(RecordError) as err:
        lessons.parse("lessons/tile-reduction-spike.md", lesson_text(""))
    assert "programs.0.path" in one_line(err)
    assert "is not a program" in str(err.value)


def test_flow_nesting_past_the_cap_is_refused_while_scanning():
    """PyYAML's scanner looks ahead over a line of ``[`` before the composer sees the first one, checking every
    pending level at each token; the loader refuses the level past MAX_DEPTH there, never scanning deeper."""
    loader = safe_read._CappedLoader("[" * 1000, "x.yaml")
    with pytest.raises(InputRefused, match="nests more than 64 levels"):
        while loader.check_token():
            loader.get_token()
    assert loader.flow_level == safe_read.MAX_DEPTH


def test_yaml_nested_1000_deep_is_one_line(tmp_path):
    nested = "".join("  " * i + "a:\n" for i in range(1000))
    with pytest.raises(InputRefused) as err:
        lessons.parse("lessons/x.md", "---\n" + nested + "---\n")
    assert err.value.kind == "too-deep"
    assert one_line(err).startswith("lessons/x.md: ")
    with pytest.raises(InputRefused, match="nests more than"):
        lessons.parse("lessons/x.md", "---\na: " + "[" * 1000 + "]" * 1000 + "\n---\n")
    path = tmp_path / "doc.claims.yaml"
    path.write_text(nested)
    with pytest.raises(InputRefused) as err:
        claims.load_file(path, "lessons/claims/doc.claims.yaml")
    assert err.value.kind == "too-deep"
    assert one_line(err).startswith("lessons/claims/doc.claims.yaml: ")


def test_yaml_alias_bomb_is_refused():
    rows = ["a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        rows.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    with pytest.raises(InputRefused, match="expands .* to more than"):
        safe_read.parse_yaml("\n".join(rows), "x.yaml")
    with pytest.raises(InputRefused, match="refers to a node that contains it"):
        safe_read.parse_yaml("a: &a [*a]", "x.yaml")


def test_claims_file_with_non_utf8_bytes_is_one_line(tmp_path):
    path = tmp_path / "doc.claims.yaml"
    path.write_bytes(b"claims_version: 1\ndocument: \xe9t\xe9\n")
    with pytest.raises(InputRefused) as err:
        claims.load_file(path, "lessons/claims/doc.claims.yaml")
    assert err.value.kind == "not-utf8"
    assert "byte 28: not UTF-8 (byte 0xe9)" in one_line(err)


def test_a_yaml_scalar_python_cannot_build_is_one_line():
    with pytest.raises(RecordError) as err:
        lessons.parse("lessons/x.md", "---\nid: 2020-99-99\n---\n")
    assert "month must be in 1..12" in one_line(err)


# --- strays in runs/ ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["notes.txt", "old.json.bak", ".20990101T000000Z-run-0.json.abc.tmp"])
def test_a_file_in_runs_that_is_not_a_record_is_reported(tmp_path, name):
    runs_with(tmp_path, RECORD.read_bytes())
    (tmp_path / "runs" / name).write_text("x")
    with pytest.raises(RecordError) as err:
        store.load_records(tmp_path)
    assert f"runs/{name}: is not a record" in one_line(err)
    assert ("leftover of an interrupted write" in str(err.value)) == name.endswith(".tmp")


def test_a_folder_in_runs_is_reported(tmp_path):
    (tmp_path / "runs" / "sub.json").mkdir(parents=True)
    assert store.stray_files(tmp_path) == ["sub.json"]
    (tmp_path / "runs" / ".gitkeep").write_text("")
    assert store.stray_files(tmp_path) == ["sub.json"]


# --- transcripts --------------------------------------------------------------------


def test_pip_freeze_wheel_without_version_gives_no_version():
    assert parsers.parse_pip_freeze("x @ file:///a.whl\nnumpy==2.1.0\n") == {"numpy": "2.1.0"}


@pytest.mark.parametrize("memory", ["inf MiB", "-inf MiB", "nan MiB", "1e400 MiB", "9" * 5000 + " MiB"])
def test_nvidia_smi_memory_that_is_no_number_is_none(memory):
    text = f"index, name, memory.total [MiB]\n0, NVIDIA H200, {memory}\n"
    [row] = parsers.parse_gpu_query(text)
    assert row["memory_total_mib"] is None
    assert row["name"] == "NVIDIA H200"


def test_nvidia_smi_line_csv_cannot_read_names_no_gpu():
    text = "index, name, uuid\n0, NVIDIA H200, GPU-1\n1, \"" + "x" * 200_000 + "\n2, NVIDIA H100, GPU-2\n"
    assert [r["uuid"] for r in parsers.parse_gpu_query(text)] == ["GPU-1", "GPU-2"]


def test_huge_numbers_do_not_escape_the_build_parsers():
    assert build.parse_res_usage("Function k:\nREG:" + "9" * 5000 + " SHARED:12\n")[0].shared_bytes == 12
    with pytest.raises(TileproofError, match="unknown target"):
        build.parse_target("sm_" + "9" * 5000)
    with pytest.raises(TileproofError, match="unknown target"):
        build.parse_target("9" * 5000 + ".0")


def test_error_messages_escape_line_breaks_from_the_input():
    err = TileproofError("--arch \r\nx: unknown target")
    assert str(err) == "--arch \\r\\nx: unknown target"
    assert "\n" not in str(RecordError("a\nb", "f", "p\u2028", "fix"))


# --- build/ -------------------------------------------------------------------------


def test_compile_refuses_a_build_link_out_of_the_repo(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "build").symlink_to(outside)
    proc = subprocess.run([sys.executable, "-m", "tileproof", "compile", "--root", str(repo)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "build: resolves to" in proc.stderr
    assert "outside the repository" in proc.stderr
    assert list(outside.iterdir()) == []


def test_a_build_folder_inside_the_repo_is_fine(tmp_path):
    assert safe_read.check_build_dir(tmp_path) == tmp_path / "build"
    (tmp_path / "cache").mkdir()
    (tmp_path / "build").symlink_to(tmp_path / "cache")
    assert safe_read.check_build_dir(tmp_path) == tmp_path / "build"
    (tmp_path / "build").unlink()
    (tmp_path / "build").write_text("")
    with pytest.raises(InputRefused, match="is not a folder"):
        safe_read.check_build_dir(tmp_path)


# --- every kind has a cap and a finding ---------------------------------------------


def test_every_problem_has_a_rule_and_every_kind_a_cap():
    import typing

    from tileproof.records.errors import InputProblem

    assert set(safe_read.RULES) == set(typing.get_args(InputProblem))
    assert set(safe_read.LIMITS) == set(typing.get_args(safe_read.InputKind))
    assert safe_read.LIMITS["evidence"] == 64 * 1024 * 1024


def test_committed_tree_reads_clean():
    """Every committed record, lesson and claims file passes the safe reader."""
    assert len(store.load_records(REPO)) == len(store.record_files(REPO)) > 0
    assert lessons.load_all(REPO)
    assert claims.load_all(REPO)
    from tileproof.judge.audit.rules.evidence import transcripts

    for rec in store.load_records(REPO):
        for t in transcripts(rec):
            safe_read.read_evidence(REPO, t[1].path)


def test_gate_evidence_reader_refuses_a_link_to_etc_passwd(tmp_path):
    """The gate (publish, and the audit's lesson rule) reads transcripts through the safe reader."""
    from tileproof.gather import tree

    (tmp_path / "evidence" / "r").mkdir(parents=True)
    (tmp_path / "evidence" / "r" / "pip-freeze.txt").symlink_to("/etc/passwd")
    (tmp_path / "evidence" / "r" / "ok.txt").write_bytes(b"ok")
    read = tree.evidence_reader(tmp_path)
    assert read("evidence/r/ok.txt") == b"ok"
    assert read("evidence/r/gone.txt") is None
    assert read("runs/x") is None
    with pytest.raises(InputRefused, match="symbolic link"):
        read("evidence/r/pip-freeze.txt")


def test_runner_registry_link_out_of_the_repo_is_refused(tmp_path):
    """The trust anchor is read like every other input; absent it is still the empty registry."""
    from tileproof.records.trust import runner_keys

    assert runner_keys.load_registry(tmp_path) is runner_keys.EMPTY
    (tmp_path / "keys.yaml").write_text("runners: []\n")
    (tmp_path / "repo" / "lessons").mkdir(parents=True)
    (tmp_path / "repo" / runner_keys.REGISTRY).symlink_to(tmp_path / "keys.yaml")
    with pytest.raises(InputRefused) as err:
        runner_keys.load_registry(tmp_path / "repo")
    assert err.value.kind == "outside-repo"
    assert one_line(err).startswith("lessons/runners.yaml: ")


def test_a_yaml_text_parsed_again_is_an_equal_value_of_its_own():
    text = "a: &x [1, {b: 2026-12-01}]\nc: *x\n"
    first = safe_read.parse_yaml(text, "one.yaml")
    first["a"][1]["b"] = "changed by its caller"
    first["a"].append(3)
    second = safe_read.parse_yaml(text, "two.yaml")
    assert second == yaml.safe_load(text)
    assert second is not first
    assert second["a"] is second["c"]  # an alias stays one object within a value


def test_a_yaml_text_that_fails_fails_every_time_under_its_callers_name():
    for shown in ("first.yaml", "second.yaml"):
        with pytest.raises(InputRefused) as err:
            safe_read.parse_yaml("a: &a [*a]", shown)
        assert one_line(err).startswith(f"{shown}: ")


def test_only_the_most_recent_yaml_texts_are_kept(monkeypatch):
    safe_read._kept.cache_clear()
    for i in range(safe_read.PARSED_KEPT + 10):
        assert safe_read.parse_yaml(f"n: {i}\n", "x.yaml") == {"n": i}
    info = safe_read._kept.cache_info()
    assert info.currsize == safe_read.PARSED_KEPT
    safe_read.parse_yaml(f"n: {safe_read.PARSED_KEPT + 9}\n", "x.yaml")  # the newest: kept
    assert safe_read._kept.cache_info().hits == info.hits + 1
    safe_read.parse_yaml("n: 0\n", "x.yaml")  # the oldest: dropped, parsed again
    assert safe_read._kept.cache_info().misses == info.misses + 1
    monkeypatch.setattr(safe_read, "PARSED_KEPT_CHARS", 100)  # parsing a real 1 MiB text takes a second
    big = "k: " + "x" * 100 + "\n"
    before = safe_read._kept.cache_info()
    assert safe_read.parse_yaml(big, "big.yaml") == {"k": "x" * 100}
    assert safe_read._kept.cache_info() == before  # never asked for, never kept


def test_refusals_cross_a_process_boundary_whole():
    """A forked helper's refusal is raised in the main process: pickled, it keeps its line and its kind."""
    refused = InputRefused("runs/a.json", "too-deep", "nests more than 64 levels deep", "flatten it", "x")
    again = pickle.loads(pickle.dumps(refused))
    assert (type(again), str(again), again.kind, again.field) == (InputRefused, str(refused), "too-deep", "x")
    error = RecordError("runs/b.json", "kind", "expected a kind", "restore it from git")
    back = pickle.loads(pickle.dumps(error))
    assert (type(back), str(back)) == (RecordError, str(error))
