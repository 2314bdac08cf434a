"""A compile record's build verdicts against their steps and artifacts, and its references."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from tileproof.judge.audit.audit_rules import Context, check, rule
from tileproof.judge.audit.result import Issue
from tileproof.records.models import CompileRecord

VERDICT = rule("build-verdict", "a compile record's build verdicts disagree with their exit codes or artifacts")
REFERENCE = rule("record-reference", "a record names another record (reused_from) that is not in runs/")


def build_issues(rec: CompileRecord, known: AbstractSet[str]) -> list[Issue]:
    out: list[Issue] = []
    for b in rec.builds:
        label = f"{b.program} {b.target}"
        if b.verdict == "built":
            if b.step is not None and (b.step.timed_out or b.step.exit_code != 0):
                out.append((VERDICT, f"{label}: built but its step exited {b.step.exit_code}"
                                             f"{' (timed out)' if b.step.timed_out else ''}"))
            if b.artifact is None:
                out.append((VERDICT, f"{label}: built without an artifact"))
            if b.step is None and b.reused_from is None:
                out.append((VERDICT, f"{label}: built with neither a step nor reused_from"))
        if b.reused_from is not None and b.reused_from not in known:
            out.append((REFERENCE, f"{label}: reused_from {b.reused_from} is not in runs/"))
    all_built = bool(rec.builds) and all(b.verdict == "built" for b in rec.builds)
    if rec.passed != all_built:
        out.append((VERDICT, f"passed is {rec.passed} but {sum(b.verdict == 'built' for b in rec.builds)} "
                                     f"of {len(rec.builds)} builds are built"))
    return out



@check(CompileRecord)


def _builds(rec: CompileRecord, ctx: Context) -> list[Issue]:
    return build_issues(rec, ctx.known)
