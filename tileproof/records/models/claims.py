"""Claims records: every claim's verdict from one ``tileproof claims`` run, and the probes it ran."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tileproof.records.base import Model
from tileproof.records.models.facts import RecordBase, Toolchain
from tileproof.records.models.run import GpuFacts
from tileproof.records.models.steps import FileDigest, Step, Transcript
from tileproof.records.schemas import schema

CLAIMS_SCHEMA_VERSION = 2
"""Claims records: 2 stores each claim's probes typed (``ProbeKind``); 1 (still read) as text."""


ClaimVerdictName = Literal["confirmed", "refuted", "unverifiable-here", "error"]
"""``confirmed``/``refuted``: the evidence agrees with / contradicts the document;
``unverifiable-here``: needs what this machine lacks (a GPU, nvcc, a card below 8.0);
``error``: the check itself could not run (a tool failure, not a finding)."""


CheckKind = Literal["compile", "header", "api", "res-usage", "gpu", "not-checkable"]
"""How a claim probe is checked (the ``kind`` of a check in a claims file)."""


ProbeRole = Literal["check", "wrong", "right"]
"""A probe's part in its claim: the claim's own ``check``, or a pitfall's ``wrong``/``right`` code."""


class ProbeKind(Model):
    """One probe a claim ran: its role and the kind of its check."""

    role: ProbeRole
    kind: CheckKind


class _ClaimResultFields(Model):
    """What every version of a claim result holds."""

    id: str
    document: str
    """The document's id (its claims file is ``lessons/claims/<document>.claims.yaml``)."""
    statement: str
    source: str = ""
    """Where the document makes the claim: path, section and its words."""
    asserted: bool = True
    """False when the document no longer asserts it (or only reports it as someone's claim)."""
    verdict: ClaimVerdictName
    why: str
    """One line: what the evidence showed, or why it cannot be checked here."""
    evidence: Transcript | None = None
    """The transcript a reader should open first: the deciding probe's stderr when its step failed,
    else its stdout (``claims.outcomes.first_evidence``); None in records written before it existed."""
    toolchain: str | None
    """The toolchain release the verdict holds for (a claim can be true for 13.3 and false for 13.5)."""
    steps: list[Step]


class ClaimResult(_ClaimResultFields):
    """One claim's check, run here, and what it showed (claims records of version 2)."""

    check: list[ProbeKind] = Field(min_length=1)
    """The probes run, in order: one ``check``, or a pitfall's ``wrong`` and/or ``right``."""


class ClaimResultV1(_ClaimResultFields):
    """A claim result as version-1 claims records hold it: read, never written, never parsed."""

    check: str
    """The check kinds as text (``compile``, or ``wrong:compile, right:gpu``); kept as written so the
    record's seal still holds. No code reads it back."""


@schema("claims-record", CLAIMS_SCHEMA_VERSION)  # reads v1 too
class ClaimsRecord(RecordBase):
    """One ``tileproof claims`` run: every claim's verdict, and what it was checked with."""

    schema_version: Literal[1, 2]  # type: ignore[assignment]
    """2 (``CLAIMS_SCHEMA_VERSION``) for records written now; 1 for older ones (results as text)."""
    kind: Literal["claims"]
    toolchain: Toolchain
    gpu: GpuFacts | None
    claims_files: list[FileDigest]
    """The claims files, their snippets and the documents (inside the repository) as checked."""
    nvidia_smi: Transcript | None = None
    nvidia_smi_query: Transcript | None = None
    """The GPU transcripts that ``gpu`` was read from, when a GPU was probed."""
    results: list[ClaimResult] | list[ClaimResultV1]

    @model_validator(mode="after")
    def _results_fit_version(self) -> ClaimsRecord:
        want = ClaimResult if self.schema_version == CLAIMS_SCHEMA_VERSION else ClaimResultV1
        if not all(type(r) is want for r in self.results):
            check_as = "a list of probes" if want is ClaimResult else "text"
            raise ValueError(f"schema_version {self.schema_version} claims records hold "
                             f"{want.__name__} results (check as {check_as})")
        return self
