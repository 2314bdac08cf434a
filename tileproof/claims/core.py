"""``tileproof claims``: turn what documents say about the toolchain into evidence.

A document's claims live in ``lessons/claims/<document id>.claims.yaml``; the
snippets they compile or run live in ``lessons/claims/snippets/``. Each claim
names where the document makes it and how to check it: one ``check`` with its
``expected`` outcome, and/or a ``wrong`` and a ``right`` probe for a pitfall
("X is wrong, Y is right" holds when X behaves as stated and Y works). The
check kinds and how each is run are in ``claim_checks``.

A claim's verdict combines its probes: ``error`` if one could not run (exit 1:
a tool failure, not a finding), else ``refuted`` if one contradicts the
document, else ``unverifiable-here`` if one needs what this machine lacks
(a GPU, nvcc, a card below 8.0), else ``confirmed``. Each run writes one
claims record with the transcripts as evidence and, per claim, the toolchain
the verdict holds for. Refuted claims are findings about documents; they do
not fail the run. ``refuted_claims`` is what publish asks before it flips a
lesson.
"""

from __future__ import annotations

import argparse
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tileproof.records.errors import RecordError, TileproofError
from tileproof.records.models import ClaimResult, ClaimsRecord, ClaimVerdictName
from tileproof.records.safe_read import parse_yaml, read_file_text
from tileproof.records.store import (
    RUNS,
    digest,
    header,
    load_record,
    new_run_id,
    rel,
    seal_of,
    sha256_file,
    write_record,
)

CLAIMS_DIR = Path("lessons") / "claims"
SUFFIX = ".claims.yaml"
DECISIVE = ("confirmed", "refuted")


class Spec(BaseModel):
    """Base of the claims-file models: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# --- the claims file -----------------------------------------------------------------


class Source(Spec):
    section: str
    """Where in the document: a heading, a table, a numbered lesson."""
    quote: str | None = None
    """The document's own words; checked to still occur in it (``--list`` warns when not)."""


class FlagChange(Spec):
    """One deliberate change to THE nvcc command (``build.nvcc_argv``), for a wrong-flag claim."""

    drop: list[str] = []
    replace: dict[str, str] = {}
    add: list[str] = []


class CompileCheck(Spec):
    """Compile a snippet: C++ (``.cu``) with the nvcc command, Python (``.py``) by AOT export."""

    kind: Literal["compile"]
    snippet: str
    """Relative to the claims file's folder."""
    kernel: str | None = None
    """Python: the kernel to export (a key of the snippet's AOT_SIGNATURES)."""
    target: str = "sm_90"
    flags: FlagChange | None = None
    """C++ only: the one change to the nvcc command this claim is about."""
    tilefatbin: bool = False


class HeaderCheck(Spec):
    """Look a name up in the tile header (``crt/cuda_tile.h`` of the toolchain)."""

    kind: Literal["header"]
    symbols: list[str] = Field(min_length=1)
    match: Literal["declaration", "identifier"] = "declaration"
    """``declaration``: a ``__tile_builtin__`` function of that name; ``identifier``: the word anywhere."""


class ApiCheck(Spec):
    """Look a name (and optionally a parameter and its default) up in the Python API."""

    kind: Literal["api"]
    symbol: str
    """Dotted, e.g. ``cuda.tile.sum``."""
    parameter: str | None = None
    default: str | None = None
    """The parameter's default as the API shows it (``False``, ``PaddingMode.UNDETERMINED``)."""


class Bounds(Spec):
    registers: tuple[int, int] | None = None
    shared_bytes: tuple[int, int] | None = None


class ResUsageCheck(Spec):
    """Build a C++ snippet and read one kernel's line of ``cuobjdump -res-usage``."""

    kind: Literal["res-usage"]
    snippet: str
    kernel: str
    """The function name as written in the source (matched against mangled names)."""
    target: str = "sm_90"
    tilefatbin: bool = True
    flags: FlagChange | None = None
    bounds: Bounds = Bounds()


class GpuCheck(Spec):
    """Run a self-checking program on the GPU: exit 0 = the stated result was observed, 1 = not."""

    kind: Literal["gpu"]
    program: str
    """``.py`` (cupy + cuda.tile) or ``.cu`` (built with the nvcc command for the GPU's target)."""
    args: list[str] = []
    needs: Literal["cc>=8.0", "cc<8.0"] = "cc>=8.0"
    timeout_s: float = 180.0


class NotCheckable(Spec):
    """A claim no program here can settle; recorded as unverifiable-here with the reason."""

    kind: Literal["not-checkable"]
    reason: str


Check = Annotated[Union[CompileCheck, HeaderCheck, ApiCheck, ResUsageCheck, GpuCheck, NotCheckable],
                  Field(discriminator="kind")]

Outcome = Literal["compiles", "fails", "declares", "lacks", "within", "absent", "observed"]
OUTCOMES_BY_KIND = {
    "compile": {"compiles", "fails"},
    "header": {"declares", "lacks"},
    "api": {"declares", "lacks"},
    "res-usage": {"within", "absent"},
    "gpu": {"observed"},
}


class Expected(Spec):
    outcome: Outcome
    pattern: list[str] = []
    """Regexes that must all occur in the transcript (e.g. the error text the document quotes)."""
    absent: list[str] = []
    """Regexes that must not occur in it."""

    @field_validator("pattern", "absent", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("pattern", "absent")
    @classmethod
    def _compiles(cls, v: list[str]) -> list[str]:
        for p in v:
            try:
                re.compile(p)
            except re.error as e:
                raise ValueError(f"not a valid regex {p!r}: {e}") from None
        return v


class Probe(Spec):
    check: Check
    expected: Expected | None = None

    @model_validator(mode="after")
    def _fits(self) -> "Probe":
        _check_fit(self.check, self.expected)
        return self


def _check_fit(check, expected: Expected | None) -> None:
    if check.kind == "not-checkable":
        if expected is not None:
            raise ValueError("a not-checkable check takes no expected")
        return
    if expected is None:
        raise ValueError(f"a {check.kind} check needs expected (one of {sorted(OUTCOMES_BY_KIND[check.kind])})")
    if expected.outcome not in OUTCOMES_BY_KIND[check.kind]:
        raise ValueError(f"expected.outcome {expected.outcome!r} does not fit a {check.kind} check "
                         f"(use one of {sorted(OUTCOMES_BY_KIND[check.kind])})")


class Claim(Spec):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    statement: str
    """The claim in this project's words."""
    source: Source
    asserted: bool = True
    """False once the document no longer asserts it (or only reports it as someone's claim):
    a refuted claim then no longer blocks publishing."""
    check: Check | None = None
    expected: Expected | None = None
    wrong: Probe | None = None
    """A pitfall's wrong code: confirmed when it behaves as the document says (fails, or runs wrong)."""
    right: Probe | None = None
    """A pitfall's right code: confirmed when it works."""

    @model_validator(mode="after")
    def _has_probe(self) -> "Claim":
        if self.check is None and self.expected is not None:
            raise ValueError("expected given without a check")
        if self.check is not None:
            _check_fit(self.check, self.expected)
        if self.check is None and self.wrong is None and self.right is None:
            raise ValueError("a claim needs a check, or a wrong and/or right probe")
        return self

    def probes(self) -> list[tuple[str, Probe]]:
        out = []
        if self.check is not None:
            out.append(("check", Probe(check=self.check, expected=self.expected)))
        out += [(role, p) for role, p in (("wrong", self.wrong), ("right", self.right)) if p is not None]
        return out


class ClaimsFile(Spec):
    claims_version: Literal[1]
    document: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    """The document's id: a lesson id for ``lessons/<id>.md``."""
    path: str
    """The document, relative to the repository root."""
    claims: list[Claim] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> "ClaimsFile":
        seen = set()
        for c in self.claims:
            if c.id in seen:
                raise ValueError(f"claim id {c.id!r} appears twice")
            seen.add(c.id)
        return self


@dataclass(frozen=True)
class Loaded:
    path: Path
    spec: ClaimsFile

    @property
    def folder(self) -> Path:
        return self.path.parent

    def files(self) -> list[Path]:
        """Every snippet or program this file's checks name."""
        out = []
        for claim in self.spec.claims:
            for _role, probe in claim.probes():
                name = getattr(probe.check, "snippet", None) or getattr(probe.check, "program", None)
                if name:
                    out.append(self.folder / name)
        return out


# --- loading -------------------------------------------------------------------------


def _where(loc: tuple, spec: dict | None) -> str:
    """A pydantic error location as ``claims[3] (id p05-astype).wrong.check.kernel``."""
    parts = []
    for i, p in enumerate(loc):
        if isinstance(p, int):
            parts[-1] += f"[{p}]"
            if i == 1 and loc[0] == "claims" and spec and isinstance(spec.get("claims"), list):
                item = spec["claims"][p] if p < len(spec["claims"]) else None
                if isinstance(item, dict) and "id" in item:
                    parts[-1] += f" (id {item['id']})"
        elif p in ("compile", "header", "api", "res-usage", "gpu", "not-checkable", "function-after[_fits(), Probe]"):
            continue  # discriminator branch names: noise for an author
        else:
            parts.append(str(p))
    return ".".join(parts)


def load_file(path: Path, shown: str | None = None) -> Loaded:
    """Parse and validate one claims file; any problem is one line naming file and field."""
    shown = shown or path.as_posix()
    try:
        raw = parse_yaml(read_file_text(path, "claims", shown), shown)
    except FileNotFoundError:
        raise RecordError(shown, "", "file is missing", f"create it, or drop the document from {CLAIMS_DIR}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        raise RecordError(shown, where, f"not valid YAML ({getattr(e, 'problem', None) or e})",
                          "fix the YAML syntax") from None
    if not isinstance(raw, dict):
        raise RecordError(shown, "", "expected a YAML mapping with claims_version, document, path, claims",
                          "see lessons/claims/day79-cutile.claims.yaml")
    try:
        spec = ClaimsFile.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        raise RecordError(shown, _where(tuple(err["loc"]), raw), msg,
                          "see the models at the top of tileproof/claims.py") from None
    loaded = Loaded(path=path, spec=spec)
    expected_name = f"{spec.document}{SUFFIX}"
    if path.name != expected_name:
        raise RecordError(shown, "document", f"is {spec.document!r} but the file is named {path.name}",
                          f"rename the file to {expected_name}")
    for claim in spec.claims:
        for role, probe in claim.probes():
            name = getattr(probe.check, "snippet", None) or getattr(probe.check, "program", None)
            if name and not (loaded.folder / name).is_file():
                field = f"claims (id {claim.id}).{role}.check.{'snippet' if hasattr(probe.check, 'snippet') else 'program'}"
                raise RecordError(shown, field, f"{name}: no such file under {loaded.folder.as_posix()}",
                                  "add the snippet or fix the path (relative to the claims file)")
    return loaded


def claims_files(root: Path) -> list[Path]:
    folder = root / CLAIMS_DIR
    return sorted(folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []


def load_all(root: Path, documents: list[str] | None = None) -> list[Loaded]:
    paths = claims_files(root)
    known = [p.name.removesuffix(SUFFIX) for p in paths]
    if documents:
        unknown = [d for d in documents if d not in known]
        if unknown:
            import difflib

            close = difflib.get_close_matches(unknown[0], known, n=1)
            hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(known) or 'none'}"
            raise TileproofError(f"--document {unknown[0]}: no {CLAIMS_DIR.as_posix()}/{unknown[0]}{SUFFIX} ({hint})")
        paths = [p for p in paths if p.name.removesuffix(SUFFIX) in documents]
    return [load_file(p, rel(root, p)) for p in paths]


def _normal(text: str) -> str:
    text = re.sub(r"(?m)^\s*>\s?", "", text)  # Markdown block quotes
    text = re.sub(r"[`*_|]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def quote_found(document_text: str, quote: str) -> bool:
    """Whether the document still says this (Markdown marks and line breaks ignored)."""
    return _normal(quote) in _normal(document_text)


def quote_problems(root: Path, loaded: Loaded) -> list[str]:
    """One line per asserted claim whose quote is not in today's document."""
    doc = (root / loaded.spec.path)
    if not doc.is_file():
        return [f"{loaded.spec.document}: document {loaded.spec.path} not found here; quotes not checked"]
    text = doc.read_text(errors="replace")
    return [f"{loaded.spec.document}/{c.id}: quote not found in {loaded.spec.path}: {c.source.quote!r}"
            for c in loaded.spec.claims if c.asserted and c.source.quote and not quote_found(text, c.source.quote)]


# --- verdicts --------------------------------------------------------------------------


def combine(probes: list) -> tuple[ClaimVerdictName, str]:
    """One claim's verdict from its probes' outcomes (see the module docstring)."""
    def parts(group: list) -> str:
        if len(probes) == 1:
            return group[0].why if group else ""
        if len(group) > 1 and len({p.why for p in group}) == 1:  # the same reason for every probe: say it once
            return f"{'+'.join(p.role for p in group)}: {group[0].why}"
        return "; ".join(f"{p.role}: {p.why}" for p in group)

    by = {o: [p for p in probes if p.outcome == o] for o in ("error", "contradicts", "unverifiable", "as-stated")}
    if by["error"]:
        return "error", parts(by["error"])
    if by["contradicts"]:
        rest = parts(by["as-stated"])
        return "refuted", parts(by["contradicts"]) + (f"; {rest}" if rest else "")
    if by["unverifiable"]:
        rest = parts(by["as-stated"])
        return "unverifiable-here", parts(by["unverifiable"]) + (f" (checked here: {rest})" if rest else "")
    return "confirmed", parts(by["as-stated"])


def _kinds(claim: Claim) -> str:
    probes = claim.probes()
    if len(probes) == 1 and probes[0][0] == "check":
        return probes[0][1].check.kind
    return ", ".join(f"{role}:{p.check.kind}" for role, p in probes)


def _source(loaded: Loaded, claim: Claim) -> str:
    quote = f": {claim.source.quote!r}" if claim.source.quote else ""
    return f"{loaded.spec.path}, {claim.source.section}{quote}"


# --- the command -----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--document", action="append", default=[], metavar="ID",
                        help="check only this document's claims (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the claims and their checks; run nothing")
    parser.add_argument("--gpu-only", action="store_true",
                        help="only claims with a GPU probe (for a GPU node without nvcc)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compile checks")
    parser.add_argument("--device", type=int, default=0, metavar="N", help="GPU index (default 0)")
    parser.add_argument("--gpu-arch", default="sm_90", metavar="sm_XX",
                        help="where there is nvcc but no GPU, prebuild C++ GPU programs for this target "
                             "into build/claims/ (carry it to a GPU node without nvcc); default sm_90")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S", help="per-step timeout")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: cwd)")


def _list(root: Path, files: list[Loaded]) -> int:
    for loaded in files:
        print(f"{loaded.spec.document}  ({rel(root, loaded.path)}, {len(loaded.spec.claims)} claims, "
              f"document {loaded.spec.path})")
        for c in loaded.spec.claims:
            flag = "" if c.asserted else "  [not asserted]"
            print(f"  {c.id:34} {_kinds(c):32}{flag}")
            print(f"      {c.statement}")
        for line in quote_problems(root, loaded):
            print(f"  warning: {line}")
    return 0


def selected(files: list[Loaded], gpu_only: bool) -> list[tuple[Loaded, Claim]]:
    chosen = [(f, c) for f in files for c in f.spec.claims]
    if gpu_only:
        chosen = [(f, c) for f, c in chosen if any(p.check.kind == "gpu" for _r, p in c.probes())]
    return chosen


def run(args: argparse.Namespace) -> int:
    from tileproof.claims import checks as claim_checks
    from tileproof.runner.capture import git_state, host_facts

    root = args.root.resolve()
    files = load_all(root, args.document)
    if not files:
        raise TileproofError(f"no claims files under {root / CLAIMS_DIR} (fix: add lessons/claims/<id>{SUFFIX})")
    if args.list:
        return _list(root, files)
    chosen = selected(files, args.gpu_only)
    if not chosen:
        raise TileproofError("no claims selected (--gpu-only keeps only claims with a gpu probe)")
    run_id = new_run_id("claims")
    tasks = [(f, c, role, p) for f, c in chosen for role, p in c.probes()]
    need_gpu = any(p.check.kind == "gpu" for *_x, p in tasks)
    here = claim_checks.survey(root, run_id, device=args.device, need_gpu=need_gpu,
                               gpu_arch=args.gpu_arch, timeout=args.timeout)
    for line in here.notes():
        print(f"claims: {line}")
    print(f"claims: {len(chosen)} claims, {len(tasks)} probes on {max(1, args.jobs)} workers (record {run_id})",
          flush=True)

    def go(task):
        f, c, role, p = task
        return claim_checks.run_probe(here, f"{f.spec.document}.{c.id}.{role}", role, p.check, p.expected, f.folder)

    cpu = [t for t in tasks if t[3].check.kind != "gpu"]
    gpu = [t for t in tasks if t[3].check.kind == "gpu"]
    outcomes: dict[int, Any] = {}
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for t, res in zip(cpu, pool.map(go, cpu)):
            outcomes[id(t)] = res
    with ThreadPoolExecutor(max_workers=min(4, max(1, args.jobs))) as pool:  # one GPU: a few at a time
        for t, res in zip(gpu, pool.map(go, gpu)):
            outcomes[id(t)] = res
    results = []
    for f, c in chosen:
        probes = [outcomes[id(t)] for t in tasks if t[0] is f and t[1] is c]
        verdict, why = combine(probes)
        chains = list(dict.fromkeys(p.toolchain for p in probes if p.toolchain))
        chains = [c for c in chains if not any(o != c and o.startswith(c) for o in chains)]  # keep the fullest
        results.append(ClaimResult(
            id=c.id, document=f.spec.document, statement=c.statement, source=_source(f, c), asserted=c.asserted,
            check=_kinds(c), verdict=verdict, why=why, toolchain="; ".join(chains) or None,
            steps=[s for p in probes for s in p.steps],
        ))
        print(f"{verdict:17}  {f.spec.document}/{c.id}  {why}", flush=True)
    attested = [loaded.path for loaded in files] + sorted({p for loaded in files for p in loaded.files()})
    documents = [root / loaded.spec.path for loaded in files]
    attested += [d for d in documents if d.is_file() and d.resolve().is_relative_to(root)]
    record = ClaimsRecord(
        **header(run_id, git_state(root), host_facts()), kind="claims", toolchain=here.toolchain,
        gpu=here.gpu, nvidia_smi=here.smi, nvidia_smi_query=here.smi_query,
        claims_files=[digest(root, p) for p in dict.fromkeys(attested)], results=results,
    )
    path = write_record(root, record)
    counts = {v: sum(r.verdict == v for r in results) for v in ("confirmed", "refuted", "unverifiable-here", "error")}
    print("claims: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + f"; record {rel(root, path)}")
    blocking = [r for r in results if r.verdict == "refuted" and r.asserted]
    if blocking:
        print("claims: refuted and still asserted by their documents (publish refuses a lesson with one): "
              + ", ".join(f"{r.document}/{r.id}" for r in blocking))
    if counts["error"]:
        print(f"claims: {counts['error']} checks could not run (see their lines above); exit 1")
        return 1
    return 0


# --- reading records: publish and status -------------------------------------------------


def claims_records(root: Path) -> list[ClaimsRecord]:
    """Every claims record under runs/ with an intact seal, oldest first."""
    folder = Path(root) / RUNS
    out = []
    for path in sorted(folder.glob("*-claims-*.json")) if folder.is_dir() else []:
        record = load_record(path)
        if isinstance(record, ClaimsRecord) and record.seal == seal_of(record):
            out.append(record)
    return out


class Decided(NamedTuple):
    result: ClaimResult
    run_id: str
    attested: dict[str, str]
    """The record's claims files, snippets and documents: path → sha256 as checked."""


def latest(root: Path, document: str | None = None) -> dict[tuple[str, str], Decided]:
    """Per (document, claim id): the newest decisive result (confirmed/refuted) and its record;
    a claim never decided anywhere gets its newest result of any verdict.

    A GPU node's run decides GPU claims and a machine with nvcc decides compile claims, so a
    newer unverifiable-here never hides an older decision.
    """
    out: dict[tuple[str, str], Decided] = {}
    for record in claims_records(root):  # oldest first: later ones win
        attested = {d.path: d.sha256 for d in record.claims_files}
        for r in record.results:
            if document is not None and r.document != document:
                continue
            key = (r.document, r.id)
            earlier = out.get(key)
            if earlier is None or r.verdict in DECISIVE or earlier.result.verdict not in DECISIVE:
                out[key] = Decided(r, record.run_id, attested)
    return out


def changed_since(root: Path, loaded: Loaded | None, claim: Claim | None, decided: Decided) -> list[str]:
    """The claim's snippets whose bytes differ today from what its record checked."""
    if loaded is None or claim is None:
        return []
    out = []
    for _role, probe in claim.probes():
        name = getattr(probe.check, "snippet", None) or getattr(probe.check, "program", None)
        if name:
            path = loaded.folder / name
            shown = rel(root, path)
            if decided.attested.get(shown) != (sha256_file(path) if path.is_file() else None):
                out.append(shown)
    return list(dict.fromkeys(out))


def evidence_of(result: ClaimResult) -> str | None:
    """The transcript a reader should open first: the contradicting probe's (its role leads the why)."""
    role = result.why.split(":", 1)[0].split("+")[0] if ":" in result.why else ""
    steps = [s for s in result.steps if f".{role}." in s.name] if role in ("check", "wrong", "right") else []
    step = next(iter(steps or result.steps), None)
    if step is None:
        return None
    return step.stderr.path if step.exit_code and step.stderr.bytes else step.stdout.path


def refuted_claims(root: Path, lesson_id: str) -> list[tuple[str, str, str]]:
    """``(claim id, why with evidence, run id)`` for each claim of this document that the newest
    decisive claims result refutes and that today's claims file does not mark ``asserted: false``.

    Empty when the document has no claims or none is refuted. A refuted claim that was deleted
    from the claims file still blocks: mark it ``asserted: false`` (after fixing the document)
    instead of deleting it. A refutation whose snippet changed since still blocks, and says so
    (rerun ``nox -s claims``). Raises ``RecordError`` (one line) for an unreadable claims file
    or record.
    """
    root = Path(root)
    path = root / CLAIMS_DIR / f"{lesson_id}{SUFFIX}"
    loaded = load_file(path, rel(root, path)) if path.is_file() else None
    today = {c.id: c for c in loaded.spec.claims} if loaded else {}
    out = []
    for (_doc, claim_id), decided in sorted(latest(root, lesson_id).items()):
        result = decided.result
        if result.verdict != "refuted":
            continue
        claim = today.get(claim_id)
        if claim is not None and not claim.asserted:
            continue
        evidence = evidence_of(result)
        why = result.why + (f" [{result.toolchain}]" if result.toolchain else "")
        why += f" (evidence: {evidence})" if evidence else ""
        changed = changed_since(root, loaded, claim, decided)
        if changed:
            why += f" (stale: {', '.join(changed)} changed since; rerun nox -s claims)"
        out.append((claim_id, why, decided.run_id))
    return out


def status_lines(root: Path, documents: list[str] | None = None) -> list[str]:
    """One line per claim with its newest decisive verdict, for ``tileproof status``."""
    root = Path(root)
    files = load_all(root, documents or None)
    decided = latest(root)
    rows = [["DOCUMENT", "CLAIM", "VERDICT", "ASSERTED", "TOOLCHAIN", "RUN"]]
    for loaded in files:
        for c in loaded.spec.claims:
            found = decided.get((loaded.spec.document, c.id))
            verdict = found.result.verdict if found else "unchecked"
            if found and changed_since(root, loaded, c, found):
                verdict += " (stale)"
            rows.append([loaded.spec.document, c.id, verdict, "yes" if c.asserted else "no",
                         (found.result.toolchain or "-") if found else "-", found.run_id if found else "-"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]


__all__ = ["ClaimsFile", "Claim", "load_file", "load_all", "refuted_claims", "status_lines", "latest",
           "combine", "quote_found", "add_arguments", "run"]
