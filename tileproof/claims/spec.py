"""The claims-file format (``lessons/claims/<document id>.claims.yaml``) and its loading.

A document's claims live in one claims file; the snippets they compile or run live in
``lessons/claims/snippets/``. Each claim names where the document makes it and how to
check it: one ``check`` with its ``expected`` outcome, and/or a ``wrong`` and a ``right``
probe for a pitfall ("X is wrong, Y is right" holds when X behaves as stated and Y works).
How each check kind is run is ``claims.checks``; how probe outcomes make a verdict is
``claims.outcomes``.

Any problem with a claims file is one ``RecordError`` line naming the file and the field.
Reads files only (pydantic + PyYAML): nothing here runs a tool.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

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
from tileproof.records.models import ProbeKind, ProbeRole
from tileproof.records.safe_read import parse_yaml, read_file_text
from tileproof.records.store import rel

CLAIMS_DIR = Path("lessons") / "claims"
SUFFIX = ".claims.yaml"

class Spec(BaseModel):
    """Base of the claims-file models: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# --- the claims file -----------------------------------------------------------------


class Source(Spec):
    """Where in the document a claim is made."""

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
    """Inclusive (low, high) bounds on a kernel's resource usage."""

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


Check = Annotated[CompileCheck | HeaderCheck | ApiCheck | ResUsageCheck | GpuCheck | NotCheckable,
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
    """What a check must show: an outcome, and regexes that must (not) occur in its transcript."""

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
    """One check and its expected outcome (a pitfall's wrong or right code)."""

    check: Check
    expected: Expected | None = None

    @model_validator(mode="after")
    def _fits(self) -> Probe:
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
    """One thing a document says, where it says it, and how to check it."""

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
    def _has_probe(self) -> Claim:
        if self.check is None and self.expected is not None:
            raise ValueError("expected given without a check")
        if self.check is not None:
            _check_fit(self.check, self.expected)
        if self.check is None and self.wrong is None and self.right is None:
            raise ValueError("a claim needs a check, or a wrong and/or right probe")
        return self

    def probes(self) -> list[tuple[ProbeRole, Probe]]:
        """The claim's probes in order, each with its role."""
        out: list[tuple[ProbeRole, Probe]] = []
        if self.check is not None:
            out.append(("check", Probe(check=self.check, expected=self.expected)))
        pair: tuple[tuple[ProbeRole, Probe | None], ...] = (("wrong", self.wrong), ("right", self.right))
        out += [(role, p) for role, p in pair if p is not None]
        return out

    def probe_kinds(self) -> list[ProbeKind]:
        """What the claims record stores of the probes: each one's role and check kind."""
        return [ProbeKind(role=role, kind=p.check.kind) for role, p in self.probes()]

    def kinds_text(self) -> str:
        """The probes for a person: ``compile``, or ``wrong:compile, right:gpu``."""
        kinds = self.probe_kinds()
        if len(kinds) == 1 and kinds[0].role == "check":
            return kinds[0].kind
        return ", ".join(f"{k.role}:{k.kind}" for k in kinds)


def check_file(check: Check) -> tuple[str, str] | None:
    """The snippet or program a check names, as (field, relative path); None for none."""
    if isinstance(check, (CompileCheck, ResUsageCheck)):
        return "snippet", check.snippet
    if isinstance(check, GpuCheck):
        return "program", check.program
    return None


class ClaimsFile(Spec):
    """A claims file: the document it is about and its claims."""

    claims_version: Literal[1]
    document: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    """The document's id: a lesson id for ``lessons/<id>.md``."""
    path: str
    """The document, relative to the repository root."""
    claims: list[Claim] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> ClaimsFile:
        seen = set()
        for c in self.claims:
            if c.id in seen:
                raise ValueError(f"claim id {c.id!r} appears twice")
            seen.add(c.id)
        return self


@dataclass(frozen=True)
class Loaded:
    """One claims file as loaded: where it is and what it says."""

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
                named = check_file(probe.check)
                if named:
                    out.append(self.folder / named[1])
        return out

    def source_text(self, claim: Claim) -> str:
        """Where the document makes the claim: path, section and its words."""
        quote = f": {claim.source.quote!r}" if claim.source.quote else ""
        return f"{self.spec.path}, {claim.source.section}{quote}"


# --- loading -------------------------------------------------------------------------


def _where(loc: tuple, spec: dict | None) -> str:
    """A pydantic error location as ``claims[3] (id p05-astype).wrong.check.kernel``."""
    parts: list[str] = []
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
                          "write the file as a mapping with those keys")
    try:
        spec = ClaimsFile.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        raise RecordError(shown, _where(tuple(err["loc"]), raw), msg,
                          "see the models in tileproof/claims/spec.py") from None
    loaded = Loaded(path=path, spec=spec)
    expected_name = f"{spec.document}{SUFFIX}"
    if path.name != expected_name:
        raise RecordError(shown, "document", f"is {spec.document!r} but the file is named {path.name}",
                          f"rename the file to {expected_name}")
    for claim in spec.claims:
        for role, probe in claim.probes():
            named = check_file(probe.check)
            if named and not (loaded.folder / named[1]).is_file():
                field = f"claims (id {claim.id}).{role}.check.{named[0]}"
                raise RecordError(shown, field, f"{named[1]}: no such file under {loaded.folder.as_posix()}",
                                  "add the snippet or fix the path (relative to the claims file)")
    return loaded


def claims_files(root: Path) -> list[Path]:
    """Every claims file of the repository, sorted."""
    folder = root / CLAIMS_DIR
    return sorted(folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []


def load_all(root: Path, documents: list[str] | None = None) -> list[Loaded]:
    """Every claims file (or only those of ``documents``), loaded; an unknown document is one error."""
    paths = claims_files(root)
    known = [p.name.removesuffix(SUFFIX) for p in paths]
    if documents:
        unknown = [d for d in documents if d not in known]
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=1)
            hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(known) or 'none'}"
            raise TileproofError(f"--document {unknown[0]}: no {CLAIMS_DIR.as_posix()}/{unknown[0]}{SUFFIX} ({hint})")
        paths = [p for p in paths if p.name.removesuffix(SUFFIX) in documents]
    return [load_file(p, rel(root, p)) for p in paths]


def selected(files: list[Loaded], gpu_only: bool) -> list[tuple[Loaded, Claim]]:
    """Every claim of the files, or with ``gpu_only`` only those with a GPU probe."""
    chosen = [(f, c) for f in files for c in f.spec.claims]
    if gpu_only:
        chosen = [(f, c) for f, c in chosen if any(p.check.kind == "gpu" for _r, p in c.probes())]
    return chosen
