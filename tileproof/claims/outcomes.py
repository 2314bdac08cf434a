"""From probe outcomes to a claim's verdict and its claims-record entry.

Each probe ends in one outcome (``ProbeOutcome``): ``as-stated``, ``contradicts``,
``unverifiable`` (this machine lacks what it needs) or ``error`` (it could not run). A
claim's verdict combines its probes: ``error`` if one could not run (a tool failure, not
a finding), else ``refuted`` if one contradicts the document, else ``unverifiable-here``
if one needs what this machine lacks (a GPU, nvcc, a card below 8.0), else
``confirmed``. Pure: nothing here runs anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tileproof.claims.spec import Claim, Loaded
from tileproof.records.models import (
    CheckKind,
    ClaimResult,
    ClaimVerdictName,
    ProbeRole,
    Step,
)

ProbeOutcome = Literal["as-stated", "contradicts", "unverifiable", "error"]


@dataclass(frozen=True)
class ProbeResult:
    """What one probe showed: its outcome, one line of why, its steps and the toolchain it ran on."""

    role: ProbeRole
    kind: CheckKind
    outcome: ProbeOutcome
    why: str
    steps: tuple[Step, ...] = ()
    toolchain: str | None = None


def combine(probes: list[ProbeResult]) -> tuple[ClaimVerdictName, str]:
    """One claim's verdict from its probes' outcomes (see the module docstring)."""
    def parts(group: list[ProbeResult]) -> str:
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


def toolchains(probes: list[ProbeResult]) -> str | None:
    """The toolchains the probes ran on, each once, the fullest description of each kept."""
    chains = list(dict.fromkeys(p.toolchain for p in probes if p.toolchain))
    chains = [c for c in chains if not any(o != c and o.startswith(c) for o in chains)]
    return "; ".join(chains) or None


def first_evidence(probes: list[ProbeResult]):
    """The transcript to open first: of the probes that gave the verdict (the same groups, in the same
    order, as ``combine``), the first step's stderr when it exited non-zero with output, else its stdout."""
    for outcome in ("error", "contradicts", "unverifiable", "as-stated"):
        steps = [s for p in probes if p.outcome == outcome for s in p.steps]
        if steps:
            step = steps[0]
            return step.stderr if step.exit_code and step.stderr.bytes else step.stdout
    return None


def claim_result(loaded: Loaded, claim: Claim, probes: list[ProbeResult]) -> ClaimResult:
    """The claims-record entry of one claim from its probes' results."""
    verdict, why = combine(probes)
    return ClaimResult(
        id=claim.id, document=loaded.spec.document, statement=claim.statement, source=loaded.source_text(claim),
        asserted=claim.asserted, check=claim.probe_kinds(), verdict=verdict, why=why, toolchain=toolchains(probes),
        steps=[s for p in probes for s in p.steps], evidence=first_evidence(probes),
    )
