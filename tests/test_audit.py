"""The audit: a clean tree passes; each tamper is caught by the right rule.

The tree (tests/data/audit/audit_tree.py) is written through tileproof.store,
with real-shaped transcripts, and its published lesson is published by
``tileproof publish`` itself. Each tamper case names the exact set of rules it
must fire: the rule it is about, plus the ones that follow from it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "audit"))
import audit_tree  # noqa: E402

from tileproof.__main__ import main  # noqa: E402
from tileproof.catalog import byte_pass as audit_scan  # noqa: E402
from tileproof.catalog import index as file_index  # noqa: E402
from tileproof.gather import audit as audit_run  # noqa: E402
from tileproof.gather.audit import RULES  # noqa: E402
from tileproof.judge.audit.rules import evidence, gpu, packages, sessions, toolchain, verdicts  # noqa: E402
from tileproof.records import store  # noqa: E402
from tileproof.records.findings import Finding  # noqa: E402
from tileproof.records.models import CheckReport  # noqa: E402


def rules(result) -> set[str]:
    return {f.rule for f in result.findings}


# --- tampering helpers -----------------------------------------------------------------


def record_file(root: Path, rec) -> Path:
    return store.record_path(root, rec.run_id)


def reseal(root: Path, rec, **update) -> None:
    """Rewrite a record with changed fields and a correct seal: a careful forger."""
    new = type(rec).model_validate(rec.model_copy(update=update).model_dump())  # every field, as written
    new = new.model_copy(update={"seal": store.seal_of(new)})
    record_file(root, rec).write_text(new.model_dump_json(indent=2) + "\n")


def edit_json(root: Path, rec, change) -> None:
    """Edit the record's JSON by hand, seal untouched: a careless forger."""
    path = record_file(root, rec)
    raw = json.loads(path.read_text())
    change(raw)
    path.write_text(json.dumps(raw, indent=2) + "\n")


def with_env(rec, **update):
    return rec.environment.model_copy(update=update)


def flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01
    path.write_bytes(bytes(data))


def t_transcript_byte(root, info):
    flip_byte(root / info["run"].step.stdout.path)


def t_transcript_deleted(root, info):
    (root / info["run"].report_file.path).unlink()


def t_verdict_edited(root, info):
    edit_json(root, info["run"], lambda raw: raw.update(verdict="failed"))


def t_verdict_resealed(root, info):
    reseal(root, info["run"], verdict="failed")


def t_gated_to_passed(root, info):
    reseal(root, info["gated"], verdict="passed", reason="every check passed")


def t_cc_edited(root, info):
    rec = info["run"]
    edit_json(root, rec, lambda raw: raw["environment"]["gpu"].update(compute_capability="8.0"))


def t_cc_resealed(root, info):
    rec = info["run"]
    gpu = rec.environment.gpu.model_copy(update={"compute_capability": "8.0", "runtime_compute_capability": "8.0"})
    device = rec.report.device.model_copy(update={"compute_capability": "8.0"})
    report = rec.report.model_copy(update={"device": device})
    reseal(root, rec, environment=with_env(rec, gpu=gpu), report=report)


def t_runtime_cc(root, info):
    rec = info["run"]
    reseal(root, rec, environment=with_env(rec, gpu=rec.environment.gpu.model_copy(
        update={"runtime_compute_capability": "8.6"})))


def t_driver(root, info):
    rec = info["run"]
    reseal(root, rec, environment=with_env(rec, gpu=rec.environment.gpu.model_copy(
        update={"driver_version": "575.57.08"})))


def t_lesson_flipped(root, info):
    path = root / "lessons" / "02-softmax.md"
    path.write_text(path.read_text().replace("status: draft", "status: published", 1))


def t_lesson_source_changed(root, info):
    (root / "kernels" / "vector_add.py").write_text(audit_tree.VECTOR_ADD + "# edited after the run\n")


def t_lesson_broken(root, info):
    path = root / "lessons" / "02-softmax.md"
    path.write_text(path.read_text().replace("lesson_version: 1", "lesson_version: 7", 1))


def t_orphan(root, info):
    (root / "evidence" / "notes").mkdir()
    (root / "evidence" / "notes" / "benchmark.txt").write_text("a file no record references\n")


def t_interrupted_run(root, info):
    folder = root / "evidence" / "20251129T120000Z-run-0badc0de"
    folder.mkdir()
    (folder / "run.stdout.txt").write_text("check vector_add: ok\n")
    (folder / "run.stderr.txt").write_text("")


def t_future_schema(root, info):
    raw = json.loads(record_file(root, info["run"]).read_text())
    raw.update(schema_version=2, run_id=raw["run_id"].replace("-run-", "-run-f"), future_field=True)
    (root / "runs" / f"{raw['run_id']}.json").write_text(json.dumps(raw, indent=2))


def t_not_json(root, info):
    (root / "runs" / "20991231T000000Z-run-00000000.json").write_text("{ not json")


def t_renamed(root, info):
    path = record_file(root, info["compile"])
    path.rename(path.with_name("20250101T000000Z-compile-00000000.json"))


def t_exit_code(root, info):
    rec = info["run"]
    reseal(root, rec, step=rec.step.model_copy(update={"exit_code": 3}))


def t_report_edited(root, info):
    rec = info["run"]
    checks = [c.model_copy(update={"max_abs_err": 1e-9}) for c in rec.report.checks]
    reseal(root, rec, report=rec.report.model_copy(update={"checks": checks}))


def t_report_not_passed(root, info):
    rec = info["run"]
    reseal(root, rec, report=rec.report.model_copy(update={"passed": False}))


def t_packages(root, info):
    rec = info["run"]
    reseal(root, rec, environment=with_env(rec, packages={**rec.environment.packages, "numpy": "1.26.4"}))


def t_toolchain(root, info):
    rec = info["compile"]
    tc = rec.toolchain
    tools = [t.model_copy(update={"version": "13.5.41"}) if t.name == "tileiras" else t for t in tc.tools]
    reseal(root, rec, toolchain=tc.model_copy(update={"tools": tools}))


def t_session_missing(root, info):
    record_file(root, info["session"]).unlink()


def t_session_counts(root, info):
    reseal(root, info["t4_session"], verdict_counts={"passed": 2})


def t_evidence_path(root, info):
    rec = info["run"]
    stdout = rec.step.stdout.model_copy(update={"path": "../outside.txt"})
    reseal(root, rec, step=rec.step.model_copy(update={"stdout": stdout}))


def t_build_verdict(root, info):
    rec = info["compile"]
    b = rec.builds[0]
    failed = b.model_copy(update={"step": b.step.model_copy(update={"exit_code": 1})})
    reseal(root, rec, builds=[failed, *rec.builds[1:]])


CASES = {
    # the plain tampers: a file edited, deleted or added, its record's seal left as it was
    "transcript-byte-edited": (t_transcript_byte, {"evidence-digest"}),
    "transcript-deleted": (t_transcript_deleted, {"evidence-missing"}),
    "verdict-edited": (t_verdict_edited, {"record-seal", "verdict-exit-code", "verdict-report", "session-runs",
                                          "lesson-published-without-evidence"}),
    "cc-edited": (t_cc_edited, {"record-seal", "cc-transcript", "cc-runtime", "lesson-published-without-evidence"}),
    "lesson-flipped-to-published": (t_lesson_flipped, {"lesson-published-without-evidence"}),
    "unreferenced-evidence-file": (t_orphan, {"evidence-orphan"}),
    "future-schema-version": (t_future_schema, {"record-schema"}),
    "run-without-record": (t_interrupted_run, {"evidence-orphan"}),
    # the same tampers by a forger who recomputes the seal, and the other rules
    "verdict-resealed": (t_verdict_resealed, {"verdict-exit-code", "verdict-report", "session-runs",
                                              "lesson-published-without-evidence"}),
    "gated-resealed-as-passed": (t_gated_to_passed, {"verdict-exit-code", "verdict-report", "session-runs"}),
    "cc-resealed": (t_cc_resealed, {"cc-transcript", "report-transcript", "lesson-published-without-evidence"}),
    "runtime-cc-resealed": (t_runtime_cc, {"cc-runtime", "lesson-published-without-evidence"}),
    "driver-resealed": (t_driver, {"gpu-transcript", "lesson-rederive"}),  # the published hardware block, too
    "exit-code-resealed": (t_exit_code, {"verdict-exit-code"}),
    "report-resealed": (t_report_edited, {"report-transcript", "lesson-rederive"}),  # its published result cell
    "report-passed-resealed": (t_report_not_passed, {"verdict-report", "report-transcript",
                                                     "lesson-published-without-evidence"}),
    "packages-resealed": (t_packages, {"packages-freeze"}),
    "toolchain-mixed": (t_toolchain, {"toolchain-mixed"}),
    "build-verdict": (t_build_verdict, {"build-verdict"}),
    "session-record-deleted": (t_session_missing, {"session-incomplete"}),
    "session-counts": (t_session_counts, {"session-runs"}),
    "evidence-path-outside": (t_evidence_path, {"evidence-path", "evidence-orphan"}),
    "record-not-json": (t_not_json, {"record-schema"}),
    "record-renamed": (t_renamed, {"record-name"}),
    "program-changed-after-publish": (t_lesson_source_changed, {"lesson-published-without-evidence"}),
    "lesson-front-invalid": (t_lesson_broken, {"lesson-front"}),
}


def test_clean_tree_passes(audit_copy):
    root, _ = audit_copy
    result = audit_run.audit(root)
    assert result.findings == []
    assert result.validated == 6
    assert result.evidence_files == 19
    by_id = {lesson.id: lesson for lesson in result.lessons}
    assert by_id["01-vector-add"].publishable
    assert by_id["01-vector-add"].status == "published"
    draft = by_id["02-softmax"]
    assert draft.status == "draft"
    assert not draft.publishable
    assert [r.outcome for r in draft.missing] == ["gated"]
    assert "02-softmax" in draft.summary()
    assert "gated" in draft.summary()


@pytest.mark.parametrize("tamper, expected", CASES.values(), ids=CASES.keys())
def test_tamper_is_caught(audit_copy, tamper, expected):
    root, info = audit_copy
    tamper(root, info)
    result = audit_run.audit(root)
    assert rules(result) == expected, "\n".join(map(str, result.findings))
    assert expected <= set(RULES)


def test_tamper_findings_name_the_file(audit_copy):
    root, info = audit_copy
    t_transcript_byte(root, info)
    t_future_schema(root, info)
    t_lesson_flipped(root, info)
    t_orphan(root, info)
    found = {f.rule: f for f in audit_run.audit(root).findings}
    assert found["evidence-digest"].file == info["run"].step.stdout.path
    assert info["run"].run_id in found["evidence-digest"].reason
    assert "step.stdout" in found["evidence-digest"].reason
    assert found["record-schema"].file.startswith("runs/")
    assert "version 2" in found["record-schema"].reason
    assert "reads 1" in found["record-schema"].reason
    assert found["lesson-published-without-evidence"].file == "lessons/02-softmax.md"
    assert "gated" in found["lesson-published-without-evidence"].reason
    assert found["evidence-orphan"].file == "evidence/notes/benchmark.txt"


def test_orphan_folder_is_one_finding(audit_copy):
    root, info = audit_copy
    t_interrupted_run(root, info)
    (finding,) = audit_run.audit(root).findings
    assert finding.file == "evidence/20251129T120000Z-run-0badc0de/"
    assert "2 files" in finding.reason
    assert "no runs/20251129T120000Z-run-0badc0de.json" in finding.reason


def test_seal_catches_whitespace_only_edit(audit_copy):
    root, info = audit_copy
    path = record_file(root, info["run"])
    raw = json.loads(path.read_text())
    raw["reason"] = raw["reason"]  # same content, different bytes: compact JSON
    path.write_text(json.dumps(raw))
    result = audit_run.audit(root)
    assert rules(result) == set()  # canonical content is unchanged: nothing was forged
    path.write_text(json.dumps(raw).replace('"duration_s": 2.0', '"duration_s": 2'))
    (finding,) = audit_run.audit(root).findings
    assert finding.rule == "record-seal"
    assert "bytes changed" in finding.reason


# --- the CLI ---------------------------------------------------------------------------


def test_cli_clean_writes_reports_and_exits_0(audit_copy, capsys):
    root, _ = audit_copy
    assert main(["audit", "--allow-no-history", "--root", str(root), "--update-committed-report"]) == 0
    assert (root / "evidence" / "AUDIT.md").read_text().startswith("# tileproof audit")
    assert "<!DOCTYPE html>" in (root / "evidence" / "audit.html").read_text()
    out = capsys.readouterr().out
    assert "lessons/02-softmax.md: draft, 0/1 required rows have evidence" in out
    assert main(["audit", "--allow-no-history", "--root", str(root)]) == 0, "the reports themselves are never orphans"
    assert not [p for p in (root / "evidence").iterdir() if ".tmp" in p.name]


def test_cli_by_default_rewrites_nothing(audit_copy, capsys):
    """A plain audit leaves every file as it was; the last line says no report was written. The one thing
    it adds is its verified-file index, in the folder git ignores (catalog.index)."""
    root, _ = audit_copy
    cache = root / file_index.FOLDER
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and cache not in p.parents}
    assert main(["audit", "--allow-no-history", "--root", str(root)]) == 0
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert {p: b for p, b in after.items() if cache not in p.parents} == before
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("audit: 6 records, 19 evidence files, 2 lessons: 0 findings; wrote no report")


def test_cli_report_dir_writes_both_reports_outside_evidence(audit_copy, tmp_path):
    root, _ = audit_copy
    out = tmp_path / "reports"
    assert main(["audit", "--allow-no-history", "--root", str(root), "--report-dir", str(out)]) == 0
    assert (out / "AUDIT.md").read_text().startswith("# tileproof audit")
    assert "<!DOCTYPE html>" in (out / "audit.html").read_text()
    assert not (root / "evidence" / "AUDIT.md").exists()


def test_cli_findings_exit_1(audit_copy, capsys):
    root, info = audit_copy
    t_orphan(root, info)
    assert main(["audit", "--allow-no-history", "--root", str(root), "--no-write"]) == 1
    captured = capsys.readouterr()
    assert "evidence/notes/benchmark.txt: evidence-orphan: no record references this file" in captured.out
    assert "1 finding" in captured.err
    assert not (root / "evidence" / "AUDIT.md").exists()


def test_cli_custom_outputs_are_not_orphans(audit_copy):
    root, _ = audit_copy
    md, html = root / "evidence" / "custom.md", root / "evidence" / "custom.html"
    assert main(["audit", "--allow-no-history", "--root", str(root), "--md", str(md), "--html", str(html)]) == 0
    assert md.is_file()
    assert html.is_file()


# --- the rules as pure functions -------------------------------------------------------

GOOD = audit_tree.check("vector_add", True)
BAD = audit_tree.check("vector_add", False)


def _report(gate="ok", checks=(GOOD,), passed=None):
    checks = list(checks)
    if passed is None:
        passed = gate == "ok" and bool(checks) and all(c.passed for c in checks)
    return CheckReport(report_version=1, program="kernels/vector_add.py", seed=1, device=None, gate=gate,
                       gate_message="", checks=checks, passed=passed)


VERDICTS = {
    "passed": ("passed", 0, False, _report(), set()),
    "passed-exit-1": ("passed", 1, False, _report(), {"verdict-exit-code"}),
    "passed-no-report": ("passed", 0, False, None, {"verdict-report"}),
    "passed-check-failed": ("passed", 0, False, _report(checks=[BAD]), {"verdict-report"}),
    "passed-no-checks": ("passed", 0, False, _report(checks=[]), {"verdict-report"}),
    "failed": ("failed", 1, False, _report(checks=[BAD]), set()),
    "failed-exit-0": ("failed", 0, False, _report(checks=[BAD]), {"verdict-exit-code"}),
    "failed-all-passed": ("failed", 1, False, _report(), {"verdict-report"}),
    "failed-gate-below": ("failed", 1, False, _report("below-sm80", []), {"verdict-report"}),
    "gated": ("gated", 1, False, _report("below-sm80", []), set()),
    "gated-gate-ok": ("gated", 1, False, _report(), {"verdict-report"}),
    "gated-exit-0": ("gated", 0, False, _report("below-sm80", []), {"verdict-exit-code"}),
    "no-gpu": ("no-gpu", 1, False, _report("no-gpu", []), set()),
    "no-gpu-gate-ok": ("no-gpu", 1, False, _report(), {"verdict-report"}),
    "timeout": ("timeout", None, True, None, set()),
    "timeout-not-timed-out": ("timeout", 1, False, None, {"verdict-exit-code"}),
    "passed-but-timed-out": ("passed", None, True, _report(), {"verdict-exit-code"}),
    "error-crash": ("error", 134, False, None, set()),
    "error-but-all-passed": ("error", 0, False, _report(), {"verdict-report"}),
    "report-passed-lies": ("failed", 1, False, _report(checks=[BAD], passed=True), {"verdict-report"}),
}


@pytest.mark.parametrize("verdict, code, timed_out, report, expected", VERDICTS.values(), ids=VERDICTS.keys())
def test_verdict_issues(audit_template, verdict, code, timed_out, report, expected):
    rec = audit_template[1]["run"]
    step = rec.step.model_copy(update={"exit_code": code, "timed_out": timed_out})
    rec = rec.model_copy(update={"verdict": verdict, "step": step, "report": report})
    assert {rule for rule, _ in verdicts.verdict_issues(rec)} == expected


def test_toolchain_issues_table(audit_template):
    tc = audit_tree.toolchain()
    assert toolchain.toolchain_issues(tc) == []
    mixed = audit_tree.toolchain({**audit_tree.TOOLS, "nvcc": "13.5.1"})
    ((rule, reason),) = toolchain.toolchain_issues(mixed)
    assert rule == "toolchain-mixed"
    assert "13.5: nvcc" in reason
    nvvm = tc.model_copy(update={"packages": {**tc.packages, "nvidia-nvvm": "13.3.0"}})
    assert toolchain.toolchain_issues(nvvm)[0][0] == "toolchain-mixed"
    wrong = tc.model_copy(update={"major_minor": "13.5"})
    assert "13.5 recorded" in toolchain.toolchain_issues(wrong)[0][1]


def test_freeze_names_and_packages(audit_template):
    env = audit_template[1]["env"]
    assert packages.freeze_names(audit_tree.PIP_FREEZE) == {"tileproof"}
    from tileproof.records.parsers import parse_pip_freeze

    freeze = parse_pip_freeze(audit_tree.PIP_FREEZE)
    assert packages.packages_issues(env, freeze) == []
    issues = packages.packages_issues(env, {**freeze, "numpy": "2.0.0", "extra-pkg": "1.0"})
    assert [r for r, _ in issues] == ["packages-freeze"]
    assert "numpy 2.3.5 recorded, pip freeze 2.0.0" in issues[0][1]
    assert "extra-pkg 1.0 in pip freeze" in issues[0][1]


def test_evidence_path_ok():
    assert evidence.evidence_path_ok("evidence/r/x.txt")
    for bad in ("runs/x.json", "/evidence/x", "evidence/../runs/x.json", "evidence//x", "evidence"):
        assert not evidence.evidence_path_ok(bad), bad


def test_transcripts_found_by_type(audit_template):
    info = audit_template[1]
    where = {w for w, _ in evidence.transcripts(info["run"])}
    assert where == {"environment.pip_freeze", "environment.nvidia_smi", "environment.nvidia_smi_query",
                     "step.stdout", "step.stderr", "report_file"}
    assert {w for w, _ in evidence.transcripts(info["compile"])} == {
        f"builds[{i}].step.{s}" for i in range(2) for s in ("stdout", "stderr")}
    assert evidence.transcripts(info["session"]) == []


def test_findings_sort_and_print():
    f = Finding("runs/a.json", "record-seal", "edited")
    assert str(f) == "runs/a.json: record-seal: edited"
    assert sorted([Finding("runs/b.json", "evidence-orphan", "y"), f])[0] == f


def test_parallel_scan_matches_inline(audit_copy, monkeypatch):
    root, _ = audit_copy
    inline = audit_run.audit(root)
    monkeypatch.setattr(audit_scan, "PARALLEL_MIN_RECORDS", 1)
    forked = audit_run.audit(root)
    assert forked.findings == inline.findings
    assert forked.evidence_bytes == inline.evidence_bytes


def test_the_forked_byte_helper_ends_once_its_result_is_taken(audit_copy, monkeypatch):
    """The byte helper's process serves one job: taking its result ends it (what it held is freed then, not at
    the command's end), and its result stays the same when taken again."""
    import multiprocessing

    from tileproof.runner import forked

    root, _ = audit_copy
    helper = forked.ForkedHelper(True)
    if helper.pool is None:
        pytest.skip("no fork here, or one CPU: the job runs inline")
    names = store.runs_listing(root).files
    done = helper.submit(audit_scan.byte_pass, str(root), names)
    first = done()
    assert helper.pool is None and multiprocessing.active_children() == []
    seals, disk, _diffs, _refused, _notes = first
    assert done() is first
    assert set(seals) == set(names) and len(disk) > 0


def test_hashed_reads_as_the_dict_of_tuples_it_keeps():
    """``audit_scan.Hashed``: each (size, sha256 hex) given back as given, in order, and a digest it cannot keep
    exactly (not lowercase hex of 32 bytes) refused, never altered."""
    import hashlib
    import pickle

    hashed, plain = audit_scan.Hashed(), {}
    for i, size in enumerate((0, 1, 2**40)):
        plain[f"evidence/f{i}"] = hashed[f"evidence/f{i}"] = (size, hashlib.sha256(bytes([i])).hexdigest())
    assert dict(hashed.items()) == plain and list(hashed) == list(plain) and len(hashed) == 3
    assert hashed.get("evidence/none") is None and "evidence/f1" in hashed
    assert dict(pickle.loads(pickle.dumps(hashed)).items()) == plain
    for bad in ("AB" * 32, "ab" * 31, "zz" * 32):
        with pytest.raises(ValueError):
            hashed["evidence/bad"] = (1, bad)
    assert "evidence/bad" not in hashed


def test_raw_seal_equals_store_seal(audit_template):
    root, info = audit_template
    for written in (info["run"], info["compile"], info["session"]):
        rec = store.load_record(record_file(root, written))
        raw = json.loads(record_file(root, rec).read_text())
        assert store.seal_of_json(raw) == store.seal_of(rec) == rec.seal != ""


def test_cc_issues_table(audit_template):
    env = audit_template[1]["env"]
    rows = [{"index": 0, "name": "NVIDIA H200", "uuid": env.gpu.uuid, "compute_capability": "9.0",
             "driver_version": "580.95.05"}]
    assert gpu.cc_issues(env, rows) == []
    assert gpu.cc_issues(env, None) == []  # no trustworthy transcript: the evidence rules speak
    assert [r for r, _ in gpu.cc_issues(env, [])] == ["cc-transcript"]
    no_gpu = env.model_copy(update={"gpu": None})
    ((rule, reason),) = gpu.cc_issues(no_gpu, rows)
    assert rule == "cc-transcript"
    assert "NVIDIA H200 (cc 9.0)" in reason
    no_query = env.model_copy(update={"nvidia_smi_query": None})
    assert [r for r, _ in gpu.cc_issues(no_query, None)] == ["cc-transcript"]
    # environment_version 3 names the GPU's PCI bus id: the transcript must say the same (one GPU among several)
    on_bus = env.model_copy(update={"gpu": env.gpu.model_copy(update={"pci_bus_id": "00000000:18:00.0"})})
    assert gpu.cc_issues(on_bus, [{**rows[0], "pci_bus_id": "00000000:18:00.0"}]) == []
    ((rule, reason),) = gpu.cc_issues(on_bus, [{**rows[0], "pci_bus_id": "00000000:2A:00.0"}])
    assert rule == "gpu-transcript"
    assert (reason == ("pci_bus_id '00000000:18:00.0' recorded, nvidia-smi says "
                                                   "'00000000:2A:00.0'"))


def test_session_issues_table(audit_template):
    info = audit_template[1]
    run, session = info["run"], info["session"]
    assert sessions.session_issues(session, [sessions.session_run("run.json", run)]) == []
    assert [r for r, _ in sessions.session_issues(session, [])] == ["session-runs", "session-runs"]
    extra = run.model_copy(update={"run_id": "20251129T120000Z-run-00000000"})
    issues = sessions.session_issues(session, [sessions.session_run(f"{r.run_id}.json", r) for r in (run, extra)])
    assert [r for r, _ in issues] == ["session-runs", "session-runs"]
    assert "not listed" in issues[0][1]


def test_report_diff_compares_json_values():
    embedded = {"program": "p", "checks": [{"max_abs_err": 0.0, "rtol": 1e-05}], "passed": True}
    spelled = b'{"passed": true, "checks": [{"rtol": 0.00001, "max_abs_err": 0}], "program": "p"}'
    assert verdicts.report_diff(embedded, spelled) == []
    assert verdicts.report_diff(embedded, spelled.replace(b"true", b"false")) == ["passed"]
    assert verdicts.report_diff(embedded, b"{ truncated") == "is not valid JSON"
    assert verdicts.report_diff(None, spelled) == "holds a check report the record lacks"
