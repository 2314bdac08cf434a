"""A run record's cuda-tile release against the rest of the record: the version its environment (and so its
pip freeze, ``packages-freeze``) names, and the tileiras its toolchain ran."""

from __future__ import annotations

from tileproof.judge.audit.audit_rules import Context, check, rule
from tileproof.judge.audit.result import Issue
from tileproof.records.models import RunRecord

RELEASE = rule("run-cuda-tile", "a run record's cuda-tile release names another version than its environment, or "
                                "another tileiras than its toolchain ran")


def release_issues(rec: RunRecord) -> list[Issue]:
    """What the record's ``cuda_tile`` says that the record itself does not (none when it names no release)."""
    named = rec.cuda_tile
    if named is None:
        return []
    out = []
    installed = rec.environment.versions.get("cuda-tile")
    if named.version != installed:
        out.append((RELEASE, f"cuda_tile.version {named.version}, environment cuda-tile {installed}"))
    ran = next((t.version for t in rec.environment.toolchain.tools if t.name == "tileiras"), None)
    if named.tileiras != ran:
        out.append((RELEASE, f"cuda_tile.tileiras {named.tileiras}, toolchain tileiras {ran}"))
    return out


@check(RunRecord)
def _release(rec: RunRecord, ctx: Context) -> list[Issue]:
    return release_issues(rec)
