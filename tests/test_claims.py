"""Claims: the files validate, each check kind on a tiny case, the verdict table, and
what publish asks (``claim_verdicts.refuted``). Real compiler calls are kept to three."""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import textwrap
import typing
from datetime import datetime, timezone
from pathlib import Path

import discovered  # noqa: E402
import pytest

from tileproof.claims import checks as claim_checks
from tileproof.claims import outcomes, quotes, spec
from tileproof.claims import status as claims
from tileproof.claims.checks import Here, judge_compile, varied_nvcc_argv
from tileproof.claims.outcomes import ProbeResult
from tileproof.commands import claims as claims_cmd
from tileproof.gather import tree
from tileproof.judge import claim_verdicts
from tileproof.records.errors import RecordError, TileproofError
from tileproof.records.models import (
    CLAIMS_SCHEMA_VERSION,
    CheckKind,
    ClaimResult,
    ClaimResultV1,
    ClaimsRecord,
    GpuFacts,
    ProbeKind,
    Step,
    Toolchain,
    Transcript,
)
from tileproof.records.store import digest, load_record, new_run_id, read_records, write_record
from tileproof.records.trust.runner_keys import load_registry
from tileproof.runner.capture import git_state, host_facts
from tileproof.toolchain.build import nvcc_argv

REPO = Path(__file__).resolve().parents[1]
SHIPPED = discovered.claims_documents()  # every lessons/claims/*.claims.yaml


def _toolchain() -> Toolchain:
    return Toolchain(version=1, source="pip", tools=[], packages={}, major_minor="13.4", coherent=True, problems=[])


def _here(root: Path, **over) -> Here:
    values = dict(root=root, run_id=new_run_id("claims"), tools=None, no_nvcc="no nvcc on this machine", header=None,
                  versions={"nvcc": None, "tileiras": "13.4.92", "cuda-tile": "1.7.0"}, toolchain=_toolchain(),
                  gpu=None, no_gpu="nvidia-smi not found: no NVIDIA driver on this machine",
                  env=claim_checks.with_tileproof(dict(__import__("os").environ)), gpu_env={}, gpu_arch="sm_90",
                  timeout=120.0)
    values.update(over)
    values["gpu_env"] = values["gpu_env"] or values["env"]
    return Here(**values)


def _spec(kind: str, **fields):
    """A check model from a dict, as a claims file would give it."""
    expected = fields.pop("_expected", None)
    return spec.Probe.model_validate({"check": {"kind": kind, **fields}, "expected": expected}).check


# --- the shipped claims files ----------------------------------------------------------


def test_shipped_claims_files_validate():
    files = spec.load_all(REPO)
    assert [f.spec.document for f in files] == SHIPPED
    counts = {f.spec.document: len(f.spec.claims) for f in files}
    assert counts["cutile-pitfalls"] >= 15
    assert counts["day79-cutile"] >= 10
    assert counts["tile-reduction-spike"] >= 7
    pitfalls = next(f for f in files if f.spec.document == "cutile-pitfalls")
    sections = {c.source.section.split(":")[0] for c in pitfalls.spec.claims}
    assert {f"Lesson {n}" for n in range(1, 16)} <= sections, "every one of the fifteen lessons has a claim"


@pytest.mark.parametrize("document", SHIPPED)
def test_asserted_quotes_are_in_their_documents(document):
    loaded = spec.load_all(REPO, [document])[0]
    if not (REPO / loaded.spec.path).is_file():
        pytest.skip(f"{loaded.spec.path} is not in this checkout")
    assert quotes.quote_problems(REPO, loaded) == []


def test_quote_matching_ignores_markdown_and_line_breaks():
    doc = "> The Tile API in CUDA 13.3 has no\n> additive reduction. It offers `reduce_max`,\n| `k` | 24 | 0 B |"
    assert quotes.quote_found(doc, "The Tile API in CUDA 13.3 has no additive reduction.")
    assert quotes.quote_found(doc, "It offers reduce_max")
    assert quotes.quote_found(doc, "| `k` | 24 | 0 B |")
    assert not quotes.quote_found(doc, "has an additive reduction")


# --- bad input: one line naming file and field ---------------------------------------------


def _write(tmp_path: Path, body: str, name: str = "doc.claims.yaml") -> Path:
    folder = tmp_path / "lessons" / "claims"
    (folder / "snippets").mkdir(parents=True, exist_ok=True)
    (folder / "snippets" / "k.py").write_text("# a snippet\n")
    path = folder / name
    path.write_text(textwrap.dedent(body))
    return path


GOOD = """\
    claims_version: 1
    document: doc
    path: lessons/doc.md
    claims:
    - id: one
      statement: s
      source: {section: Pitfalls}
      check: {kind: compile, snippet: snippets/k.py, kernel: k}
      expected: {outcome: fails, pattern: 'x'}
"""

BAD = [
    ("yaml-syntax", GOOD.replace("statement: s", "statement: [s"), "line", "not valid YAML"),
    ("unknown-field", GOOD.replace("statement: s", "statement: s\n      sourse: x"), "claims[0] (id one).sourse",
     "Extra inputs are not permitted"),
    ("outcome-misfit", GOOD.replace("outcome: fails", "outcome: declares"), "claims[0] (id one): expected.outcome",
     "does not fit a compile check"),
    ("bad-regex", GOOD.replace("pattern: 'x'", "pattern: '('"), "pattern", "not a valid regex"),
    ("no-probe", GOOD.replace("      check: {kind: compile, snippet: snippets/k.py, kernel: k}\n", "")
     .replace("      expected: {outcome: fails, pattern: 'x'}\n", ""), "claims[0] (id one)", "needs a check"),
    ("missing-snippet", GOOD.replace("snippets/k.py", "snippets/gone.py"), "check.snippet", "no such file"),
    ("duplicate-id", GOOD + GOOD.split("claims:\n")[1], "claims", "appears twice"),
    ("bad-kind", GOOD.replace("kind: compile", "kind: compiles"), "claims[0] (id one).check", "kind"),
]


@pytest.mark.parametrize("body,field,problem", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_claims_file_is_one_line(tmp_path, body, field, problem):
    path = _write(tmp_path, body)
    with pytest.raises(RecordError) as err:
        spec.load_file(path, "lessons/claims/doc.claims.yaml")
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("lessons/claims/doc.claims.yaml: ")
    assert field in text
    assert problem in text


def test_document_must_match_the_file_name(tmp_path):
    path = _write(tmp_path, GOOD, name="other.claims.yaml")
    with pytest.raises(RecordError, match="rename the file to doc.claims.yaml"):
        spec.load_file(path)


def test_unknown_document_suggests_the_closest(tmp_path):
    with pytest.raises(TileproofError, match="did you mean day79-cutile"):
        spec.load_all(REPO, ["day79-cutlie"])


# --- the nvcc command, varied -------------------------------------------------------------


def test_wrong_flag_argv_is_the_nvcc_command_with_one_change():
    nvcc, src, out = Path("/x/nvcc"), Path("k.cu"), Path("k.out")
    base = nvcc_argv(nvcc, src, "sm_90", out)
    change = spec.FlagChange(replace={"-std=c++20": "-std=c++17"})
    assert varied_nvcc_argv(nvcc, src, "sm_90", out, change=change) == [
        "-std=c++17" if a == "-std=c++20" else a for a in base]
    assert varied_nvcc_argv(nvcc, src, "sm_90", out, change=spec.FlagChange(drop=["-enable-tile"])) == [
        a for a in base if a != "-enable-tile"]
    added = varied_nvcc_argv(nvcc, src, "sm_90", out, change=spec.FlagChange(add=["-cubin"]))
    assert added.index("-cubin") == added.index("k.cu") - 1
    assert len(added) == len(base) + 1
    with pytest.raises(TileproofError, match="not in the nvcc command"):
        varied_nvcc_argv(nvcc, src, "sm_90", out, change=spec.FlagChange(drop=["-G"]))


# --- judging a compile transcript: the table --------------------------------------------------


def _step(exit_code: int | None, timed_out: bool = False) -> Step:
    t = Transcript(path="evidence/x.txt", sha256="0" * 64, bytes=0)
    now = datetime.now(timezone.utc)
    return Step(step_version=1,
                name="doc.one.check.aot", argv=["x"], started=now, ended=now, duration_s=1.0, exit_code=exit_code,
                timed_out=timed_out, stdout=t, stderr=t)


PY_REJECT = 'Traceback ...\ncuda.tile._exception.TypeCheckingError: Dimension #0 of shape (48,) is not a power of two\n'
JUDGE = [
    ("compiles-as-stated", 0, "exported", "compiles", [], [], "python", "as-stated"),
    ("compiles-but-stated-fails", 0, "exported", "fails", [], [], "python", "contradicts"),
    ("fails-with-pattern", 1, PY_REJECT, "fails", ["power of two"], [], "python", "as-stated"),
    ("fails-other-message", 1, PY_REJECT, "fails", ["warning #20360-D"], [], "python", "contradicts"),
    ("fails-but-stated-compiles", 1, PY_REJECT, "compiles", [], [], "python", "contradicts"),
    ("python-crash-outside-compiler", 1, "ModuleNotFoundError: No module named 'x'", "fails", [], [], "python",
     "error"),
    ("timeout", None, "", "fails", [], [], "python", "error"),
    ("tileiras-missing", 1, "cuda.tile._exception.X: 'tileiras' compiler not found", "fails", [], [], "python",
     "error"),
    ("nvcc-absent-pattern-found", 2, "x.cu(3): error: add -enable-tile", "fails", [], ["error[^\\n]*enable-tile"],
     "cpp", "contradicts"),
    ("nvcc-absent-pattern-clear", 2, "warning: add -enable-tile\nx.cu(3): error: host call", "fails", ["error"],
     ["error[^\\n]*enable-tile"], "cpp", "as-stated"),
]


@pytest.mark.parametrize("code,text,outcome,pattern,absent,lang,want", [j[1:] for j in JUDGE],
                         ids=[j[0] for j in JUDGE])
def test_judge_compile(code, text, outcome, pattern, absent, lang, want):
    expected = spec.Expected(outcome=outcome, pattern=pattern, absent=absent)
    got, why = judge_compile(_step(code, timed_out=code is None), text, expected, lang)
    assert got == want, why
    assert "\n" not in why


# --- the verdict table ----------------------------------------------------------------------------


def _p(role: str, outcome: str, why: str = "w") -> ProbeResult:
    return ProbeResult(role=role, kind="compile", outcome=outcome, why=why)


VERDICTS = [
    ("all-as-stated", [_p("wrong", "as-stated"), _p("right", "as-stated")], "confirmed"),
    ("wrong-contradicts", [_p("wrong", "contradicts"), _p("right", "as-stated")], "refuted"),
    ("right-contradicts", [_p("wrong", "as-stated"), _p("right", "contradicts")], "refuted"),
    ("contradiction-beats-unverifiable", [_p("wrong", "unverifiable"), _p("right", "contradicts")], "refuted"),
    ("needs-gpu", [_p("check", "as-stated"), _p("wrong", "unverifiable")], "unverifiable-here"),
    ("error-beats-all", [_p("wrong", "contradicts"), _p("right", "error")], "error"),
    ("single", [_p("check", "as-stated")], "confirmed"),
]


@pytest.mark.parametrize("probes,want", [v[1:] for v in VERDICTS], ids=[v[0] for v in VERDICTS])
def test_verdict_table(probes, want):
    verdict, why = outcomes.combine(probes)
    assert verdict == want
    assert ("wrong" in why or "right" in why) == (len(probes) > 1)


def test_same_reason_is_said_once():
    verdict, why = outcomes.combine([_p("wrong", "unverifiable", "needs a GPU"),
                                     _p("right", "unverifiable", "needs a GPU")])
    assert (verdict, why) == ("unverifiable-here", "wrong+right: needs a GPU")


# --- each check kind on a tiny case ---------------------------------------------------------------


HEADER = """\
// reduce_sum would be nice
template<class T> __tile_builtin__ reduction_result_t<T, 0>
    sum(T a, integral_constant<0> = {}) noexcept;
template<class T> __tile_builtin__ T iota() noexcept;
"""


@pytest.mark.parametrize("symbols,match,outcome,want", [
    (["sum"], "declaration", "declares", "as-stated"),
    (["sum"], "declaration", "lacks", "contradicts"),
    (["reduce_sum"], "declaration", "lacks", "as-stated"),   # only in a comment: not declared
    (["reduce_sum"], "identifier", "lacks", "contradicts"),  # but the word is there
    (["keepdims"], "identifier", "lacks", "as-stated"),
    (["iota", "prod"], "declaration", "declares", "contradicts"),
])
def test_header_check(tmp_path, symbols, match, outcome, want):
    header = tmp_path / "cuda_tile.h"
    header.write_text(HEADER)
    here = _here(tmp_path, header=header)
    check = _spec("header", symbols=symbols, match=match, _expected={"outcome": outcome})
    got = claim_checks.run_probe(here, "doc.one.check", "check", check, spec.Expected(outcome=outcome), tmp_path)
    assert got.outcome == want, got.why
    assert got.steps, "the lookup's transcript is evidence"
    assert (tmp_path / got.steps[0].stdout.path).is_file(), "the lookup's transcript is evidence"


def test_header_check_without_a_header_is_unverifiable(tmp_path):
    check = _spec("header", symbols=["sum"], _expected={"outcome": "lacks"})
    got = claim_checks.run_probe(_here(tmp_path), "d.c.check", "check", check, spec.Expected(outcome="lacks"), tmp_path)
    assert got.outcome == "unverifiable"
    assert "no cuda_tile.h" in got.why


@pytest.mark.parametrize("symbol,parameter,default,outcome,want", [
    ("json.dumps", "indent", "None", "declares", "as-stated"),
    ("json.dumps", "indent", "4", "declares", "contradicts"),
    ("json.dumps", "padding_value", None, "lacks", "as-stated"),
    ("json.no_such_thing", None, None, "declares", "contradicts"),
])
def test_api_check(tmp_path, symbol, parameter, default, outcome, want):
    check = _spec("api", symbol=symbol, parameter=parameter, default=default, _expected={"outcome": outcome})
    got = claim_checks.run_probe(_here(tmp_path), "d.c.check", "check", check, spec.Expected(outcome=outcome), tmp_path)
    assert got.outcome == want, got.why


def test_res_usage_entry_by_source_name():
    text = (REPO / "tests" / "data" / "nvcc" / "sm90-tilefatbin.res-usage.txt").read_text()
    from tileproof.toolchain.build import parse_res_usage

    entries = parse_res_usage(text)
    entry = claim_checks.find_function(entries, "tmax")
    assert (entry.registers, entry.shared_bytes) == (15, 1536)
    assert claim_checks.find_function(entries, "tma") is None
    assert claim_checks.within(15, (14, 16))
    assert not claim_checks.within(1536, (0, 0))


def test_not_checkable_is_unverifiable_with_its_reason(tmp_path):
    check = spec.NotCheckable(kind="not-checkable", reason="a contract, not a behaviour")
    got = claim_checks.run_probe(_here(tmp_path), "d.c.check", "check", check, None, tmp_path)
    assert got.outcome == "unverifiable"
    assert "a contract, not a behaviour" in got.why


def test_gpu_check_without_a_gpu_is_unverifiable_naming_why(tmp_path):
    (tmp_path / "p.py").write_text("raise SystemExit(0)\n")
    check = _spec("gpu", program="p.py", _expected={"outcome": "observed"})
    got = claim_checks.run_probe(_here(tmp_path), "d.c.wrong", "wrong", check, spec.Expected(outcome="observed"),
                                 tmp_path)
    assert got.outcome == "unverifiable"
    assert "needs a GPU (nvidia-smi not found" in got.why
    assert not got.steps


H200 = GpuFacts(index=0, name="NVIDIA H200", uuid="GPU-0", compute_capability="9.0", runtime_compute_capability="9.0",
                driver_version="580.159.04", memory_total_mib=None, clocks_sm_mhz=None, clocks_mem_mhz=None)


@pytest.mark.parametrize("script,want", [
    ('print(\'{"observed": true, "detail": "seen"}\')', "as-stated"),
    ('print(\'{"observed": false, "detail": "not seen"}\'); raise SystemExit(1)', "contradicts"),
    ('print(\'{"observed": false, "detail": "x"}\')', "error"),  # exit 0 disagrees with its report
    ('raise SystemExit(3)', "error"),
])
def test_gpu_report_line_and_exit_code(tmp_path, monkeypatch, script, want):
    monkeypatch.setattr(claim_checks, "missing_modules", lambda: [])
    (tmp_path / "p.py").write_text(script + "\n")
    check = _spec("gpu", program="p.py", _expected={"outcome": "observed"})
    here = _here(tmp_path, gpu=H200)
    got = claim_checks.run_probe(here, "d.c.check", "check", check, spec.Expected(outcome="observed"), tmp_path)
    assert got.outcome == want, got.why
    assert "NVIDIA H200 cc 9.0" in (got.toolchain or "")


def test_gpu_check_needing_an_old_card_is_unverifiable_on_a_new_one(tmp_path):
    (tmp_path / "p.py").write_text("raise SystemExit(0)\n")
    check = _spec("gpu", program="p.py", needs="cc<8.0", _expected={"outcome": "observed"})
    got = claim_checks.run_probe(_here(tmp_path, gpu=H200), "d.c.check", "check", check,
                                 spec.Expected(outcome="observed"), tmp_path)
    assert got.outcome == "unverifiable"
    assert "below compute capability 8.0" in got.why


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and not claim_checks.missing_modules()


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU, cupy and cuda-tile (nvidia-smi not found here)")
def test_gpu_claim_program_on_a_real_gpu(tmp_path):
    here = claim_checks.survey(tmp_path, new_run_id("claims"), need_gpu=True)
    folder = REPO / "lessons" / "claims"
    check = _spec("gpu", program="snippets/gpu_grid.py", args=["--case", "blocks-not-threads"],
                  _expected={"outcome": "observed"})
    got = claim_checks.run_probe(here, "d.c.check", "check", check, spec.Expected(outcome="observed"), folder)
    assert got.outcome == "as-stated", got.why


# --- real compiler calls (three) ---------------------------------------------------------------


def _toolchain_here(tmp_path) -> Here:
    try:
        return claim_checks.survey(tmp_path, new_run_id("claims"), need_gpu=False)
    except TileproofError as e:  # pragma: no cover - depends on the machine
        pytest.skip(str(e))


def test_real_nvcc_fails_with_the_headers_cxx20_error(tmp_path):
    here = _toolchain_here(tmp_path)
    if here.tools is None:
        pytest.skip("no nvcc in this interpreter (pip install 'tileproof[toolchain]')")
    (tmp_path / "x.cu").write_text("#include <cuda_tile.h>\nint main() { return 0; }\n")
    check = _spec("compile", snippet="x.cu", flags={"replace": {"-std=c++20": "-std=c++17"}},
                  _expected={"outcome": "fails"})
    expected = spec.Expected(outcome="fails", pattern=r'#error\s+"This file needs C\+\+20')
    got = claim_checks.run_probe(here, "d.cxx17.wrong", "wrong", check, expected, tmp_path)
    assert got.outcome == "as-stated", got.why
    assert "-std=c++17" in got.steps[0].argv
    assert got.toolchain.startswith("nvcc 13.")


PY_SNIPPET = """\
import cuda.tile as ct
from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature

@ct.kernel
def copy(a, b, t: ct.Constant[int]):
    ct.store(b, index=(ct.bid(0),), tile=ct.load(a, index=(ct.bid(0),), shape=(t,)))

A = ArrayConstraint(ct.float32, 1, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                    may_alias_internally=False, stride_constant=(1,), base_addr_divisible_by=16)
copy_48 = copy_64 = copy
AOT_SIGNATURES = {n: [KernelSignature([A, A, t], CallingConvention.cutile_python_v1())]
                  for n, t in (("copy_48", 48), ("copy_64", 64))}
"""


@pytest.mark.parametrize("kernel,outcome,pattern", [("copy_48", "fails", ["is not a power of two"]),
                                                    ("copy_64", "compiles", [])])
def test_real_aot_export(tmp_path, kernel, outcome, pattern):
    pytest.importorskip("cuda.tile")
    here = _toolchain_here(tmp_path)
    (tmp_path / "k.py").write_text(PY_SNIPPET)
    check = _spec("compile", snippet="k.py", kernel=kernel, _expected={"outcome": outcome})
    got = claim_checks.run_probe(here, f"d.{kernel}.check", "check", check,
                                 spec.Expected(outcome=outcome, pattern=pattern), tmp_path)
    assert got.outcome == "as-stated", got.why


# --- records: the command, and what publish asks ----------------------------------------------------


def _repo(tmp_path: Path, asserted: bool = True) -> Path:
    root = tmp_path / "repo"
    folder = root / "lessons" / "claims"
    (folder / "snippets").mkdir(parents=True)
    (folder / "snippets" / "k.py").write_text("# v1\n")
    (root / "lessons" / "doc.md").write_text("The doc says X.\n")
    (folder / "doc.claims.yaml").write_text(textwrap.dedent(f"""\
        claims_version: 1
        document: doc
        path: lessons/doc.md
        claims:
        - id: says-x
          statement: X holds.
          source: {{section: Intro, quote: The doc says X.}}
          asserted: {str(asserted).lower()}
          check: {{kind: compile, snippet: snippets/k.py, kernel: k}}
          expected: {{outcome: compiles}}
        - id: contract
          statement: Y is a contract.
          source: {{section: Intro}}
          check: {{kind: not-checkable, reason: a contract}}
        """))
    return root


def _record(root: Path, verdict: str, why: str = "wrong: compiles (exit 0)", when: str = "20990101T000000Z",
            snippet_sha: str | None = None) -> str:
    run_id = f"{when}-claims-{new_run_id('x')[-8:]}"
    snippet = root / "lessons" / "claims" / "snippets" / "k.py"
    files = [digest(root, snippet)]
    if snippet_sha:
        files = [files[0].model_copy(update={"sha256": snippet_sha})]
    result = ClaimResult(id="says-x", document="doc", statement="X holds.",
                         check=[ProbeKind(role="check", kind="compile")], verdict=verdict, why=why,
                         toolchain="cuda-tile 1.7.0, tileiras 13.4.92", steps=[])
    record = ClaimsRecord(schema_version=CLAIMS_SCHEMA_VERSION, kind="claims", run_id=run_id,
                          created=datetime.now(timezone.utc),
                          tileproof_version="0", git=git_state(root), host=host_facts(), toolchain=_toolchain(),
                          gpu=None, claims_files=files, results=[result])
    write_record(root, record)
    return run_id


def refuted(root, document):
    """The judge's refuted claims (``claim_verdicts.refuted``) over the inputs ``gather.tree`` reads for a
    lesson's decision (its records, today's claims file and snippets), as (claim id, why, run id)."""
    claims = tree.claims_today(root, document)
    today = tree.today_digests(root, sorted({p for ps in claims.snippets.values() for p in ps}))
    return [(r.claim_id, r.why, r.run_id) for r in claim_verdicts.refuted(document, tree.Tree.load(root).records,
                                                                         claims, today)]


def test_refuted_claims_names_claim_why_and_run(tmp_path):
    root = _repo(tmp_path)
    assert refuted(root, "doc") == []
    run = _record(root, "refuted")
    assert refuted(root, "doc") == [("says-x", "wrong: compiles (exit 0) [cuda-tile 1.7.0, tileiras 13.4.92]", run)]
    assert refuted(root, "no-claims-file") == []


def test_a_newer_unverifiable_does_not_hide_a_refutation(tmp_path):
    root = _repo(tmp_path)
    run = _record(root, "refuted", when="20990101T000000Z")
    _record(root, "unverifiable-here", why="needs a GPU", when="20990102T000000Z")
    assert [r[2] for r in refuted(root, "doc")] == [run]
    _record(root, "confirmed", why="compiles (exit 0)", when="20990103T000000Z")
    assert refuted(root, "doc") == []


def test_asserted_false_no_longer_blocks(tmp_path):
    root = _repo(tmp_path, asserted=False)
    _record(root, "refuted")
    assert refuted(root, "doc") == []


def test_a_changed_snippet_makes_the_refutation_stale_but_still_blocking(tmp_path):
    root = _repo(tmp_path)
    _record(root, "refuted", snippet_sha="0" * 64)
    (got,) = refuted(root, "doc")
    assert "stale: lessons/claims/snippets/k.py changed since; rerun nox -s claims" in got[1]
    assert any("refuted (stale)" in line for line in claims.status_lines(root))


def test_a_record_with_a_broken_seal_does_not_count(tmp_path):
    root = _repo(tmp_path)
    _record(root, "refuted")
    path = next((root / "runs").glob("*-claims-*.json"))
    body = json.loads(path.read_text())
    body["results"][0]["verdict"] = "confirmed"
    path.chmod(0o644)
    path.write_text(json.dumps(body))
    assert refuted(root, "doc") == []
    assert claims.claims_records(root) == []


def test_status_lines_list_every_claim(tmp_path):
    root = _repo(tmp_path)
    run = _record(root, "refuted")
    lines = claims.status_lines(root)
    assert lines[0].split() == ["DOCUMENT", "CLAIM", "VERDICT", "ASSERTED", "TOOLCHAIN", "RUN"]
    assert any(line.split()[:3] == ["doc", "says-x", "refuted"] and line.endswith(run) for line in lines)
    assert any(line.split()[:3] == ["doc", "contract", "unchecked"] for line in lines)


def _args(root: Path, *extra: str):
    parser = argparse.ArgumentParser()
    claims_cmd.add_arguments(parser)
    return parser.parse_args(["--root", str(root), "--jobs", "1", *extra])


def test_command_writes_one_record_and_exits_1_when_a_check_errors(tmp_path, capsys):
    root = _repo(tmp_path)  # its snippet declares no kernel: the export errors outside the compiler
    assert claims_cmd.run(_args(root)) == 1
    out = capsys.readouterr().out
    assert "\nerror              doc/says-x  " in out
    assert "\nunverifiable-here  doc/contract  not checkable by a program: a contract" in out
    (record,) = claims.claims_records(root)
    assert {r.id: r.verdict for r in record.results} == {"says-x": "error", "contract": "unverifiable-here"}
    assert {d.path for d in record.claims_files} >= {"lessons/claims/doc.claims.yaml", "lessons/claims/snippets/k.py",
                                                     "lessons/doc.md"}
    assert record.results[0].steps
    assert (root / record.results[0].steps[0].stderr.path).is_file()


def test_gpu_only_selects_claims_with_a_gpu_probe(tmp_path):
    files = spec.load_all(REPO)
    chosen = spec.selected(files, gpu_only=True)
    assert chosen
    assert all(any(p.check.kind == "gpu" for _r, p in c.probes()) for _f, c in chosen)
    assert {c.id for _f, c in chosen} >= {"p11-order-f-no-transpose", "launch-block-size-1"}


def test_list_runs_nothing(tmp_path, capsys):
    root = _repo(tmp_path)
    assert claims_cmd.run(_args(root, "--list")) == 0
    out = capsys.readouterr().out
    assert "says-x" in out
    assert "compile" in out
    assert not (root / "runs").exists()


def test_claim_checks_helpers_print_their_evidence(tmp_path, capsys):
    header = tmp_path / "cuda_tile.h"
    header.write_text(HEADER)
    assert claim_checks.main(["declared", str(header)]) == 0
    assert capsys.readouterr().out.split("\n")[:2] == ["3 sum reduction", "4 iota other"]
    assert claim_checks.main(["api", "json.dumps"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["found"]
    assert info["parameters"]["indent"] == "None"
    assert claim_checks.main(["nope"]) == 2


# --- the record's typed probes, and the old records -------------------------------------


def test_committed_version_1_claims_records_still_load_sealed():
    paths = sorted((REPO / "runs").glob("*-claims-*.json"))
    if not paths:
        pytest.skip("no committed claims records")
    loaded = [x for x in read_records(REPO, load_registry(REPO)) if isinstance(x.record, ClaimsRecord)]
    records = [x.record for x in loaded]
    assert {r.run_id for r in records} == {p.stem for p in paths}   # every one read, every seal intact
    assert {x.seal for x in loaded} == {"intact"}
    old = [r for r in records if r.schema_version == 1]
    assert old
    assert all(isinstance(res, ClaimResultV1) and isinstance(res.check, str) for r in old for res in r.results)


def test_command_writes_typed_probe_kinds_at_version_2(tmp_path):
    root = _repo(tmp_path)
    claims_cmd.run(_args(root))
    (record,) = claims.claims_records(root)
    assert record.schema_version == CLAIMS_SCHEMA_VERSION == 2
    assert {r.id: r.check for r in record.results} == {
        "says-x": [ProbeKind(role="check", kind="compile")],
        "contract": [ProbeKind(role="check", kind="not-checkable")],
    }
    raw = json.loads(next((root / "runs").glob("*-claims-*.json")).read_text())
    assert raw["results"][0]["check"] == [{"role": "check", "kind": "compile"}]


def test_a_pitfall_records_its_wrong_and_right_probes_in_order():
    files = spec.load_all(REPO)
    pair = next(c for f in files for c in f.spec.claims if c.wrong is not None and c.right is not None)
    assert [k.role for k in pair.probe_kinds()] == ["wrong", "right"]
    assert pair.kinds_text() == ", ".join(f"{k.role}:{k.kind}" for k in pair.probe_kinds())


@pytest.mark.parametrize("version, check, problem", [
    (2, "compile", r"results\.list\[ClaimResult\]\.0\.check: Input should be a valid list"),
    (1, [{"role": "check", "kind": "compile"}], "schema_version 1 claims records hold ClaimResultV1 results"),
    (2, [{"role": "check", "kind": "compiles"}],
     r"results\.list\[ClaimResult\]\.0\.check\.0\.kind: Input should be 'compile'"),
    (3, [{"role": "check", "kind": "compile"}], "this tileproof reads 1 or 2"),
], ids=["v2-text", "v1-list", "v2-unknown-kind", "v3"])
def test_claims_record_version_and_check_shape_must_agree(tmp_path, version, check, problem):
    root = _repo(tmp_path)
    claims_cmd.run(_args(root))
    path = next((root / "runs").glob("*-claims-*.json"))
    raw = json.loads(path.read_text())
    raw["schema_version"] = version
    raw["results"][0]["check"] = check
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    with pytest.raises(RecordError, match=problem):
        load_record(bad)


def test_check_kinds_are_one_list():
    """The record's CheckKind and the claims file's check models name the same kinds."""
    models = {typing.get_args(m.model_fields["kind"].annotation)[0]
              for m in typing.get_args(typing.get_args(spec.Check)[0])}
    assert models == set(typing.get_args(CheckKind))


def test_claims_modules_import_no_cycle():
    """spec <- outcomes <- checks, quotes <- spec, core <- spec: no module of claims/ imports in a circle."""
    folder = REPO / "tileproof" / "claims"
    graph = {}
    for path in folder.glob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
        graph[path.stem] = {n.rsplit(".", 1)[1] for n in names if n.startswith("tileproof.claims.")}
    assert graph["spec"] == set()
    assert graph["outcomes"] == {"spec"}
    assert "core" not in graph["checks"]
    done: set[str] = set()

    def visit(name: str, stack: tuple[str, ...]) -> None:
        assert name not in stack, f"import cycle: {' -> '.join(stack + (name,))}"
        if name not in done:
            for dep in graph.get(name, ()):
                visit(dep, stack + (name,))
            done.add(name)

    for name in graph:
        visit(name, ())


def test_list_ends_with_a_summary_line(tmp_path, capsys):
    root = _repo(tmp_path)
    assert claims_cmd.run(_args(root, "--list")) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "claims: 1 files, 2 claims, 0 quote warnings; nothing run"


def test_run_ends_with_a_summary_line(tmp_path, capsys):
    root = _repo(tmp_path)
    assert claims_cmd.run(_args(root)) == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("claims: 1 unverifiable-here, 1 error; record runs/")
    assert last.endswith("exit 1)")
