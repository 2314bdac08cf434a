"""Recorded package versions against the run's pip freeze transcript.

tileproof run from a checkout (the offline GPU-node path, ``nox --no-venv -s run-gpu``; environment
version 2 says so in ``tileproof``) is no installed distribution: it is recorded by its commit and the
digest of its sources, never among ``packages``, and a ``tileproof`` that pip freeze lists there (an
install the checkout shadowed) is not what ran, so the name is left out of the comparison."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from tileproof.judge.audit.audit_rules import Context, check, rule
from tileproof.judge.audit.result import Issue
from tileproof.records.models import Environment, RunRecord

FREEZE = rule("packages-freeze", "recorded package versions differ from the run's pip freeze transcript")
CHECKOUT_NAME = "tileproof"
"""The distribution a checkout-run tileproof would be listed under (``runner.capture.PACKAGE``)."""


def freeze_names(text: str) -> set[str]:
    """Names pip freeze lists without ``==`` (editable or direct-URL installs)."""
    out = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "==" in line:
            continue
        if "#egg=" in line:
            out.add(line.rsplit("#egg=", 1)[1].split("&")[0])
        elif " @ " in line:
            out.add(line.split(" @ ", 1)[0])
    return {n.strip().lower().replace("_", "-") for n in out}


def packages_issues(env: Environment, freeze: dict[str, str] | None,
                    unpinned: AbstractSet[str] = frozenset()) -> list[Issue]:
    """Recorded versions (packages, toolchain.packages, versions) vs pip freeze."""
    if freeze is None:
        return []
    if env.tileproof is not None and env.tileproof.kind == "checkout":
        freeze = {name: v for name, v in freeze.items() if name != CHECKOUT_NAME}
    diffs = []
    for source, table in (("packages", env.packages), ("toolchain.packages", env.toolchain.packages)):
        for name, version in table.items():
            got = freeze.get(name)
            if got is None:
                if name not in unpinned and source == "packages":
                    diffs.append(f"{name} {version} recorded, absent from pip freeze")
            elif got != version:
                diffs.append(f"{source}: {name} {version} recorded, pip freeze {got}")
    for name, pinned in env.versions.items():
        got = freeze.get(name)
        if got is not None and pinned is not None and got != pinned:
            diffs.append(f"versions: {name} {pinned} recorded, pip freeze {got}")
    missing = sorted(set(freeze) - set(env.packages))
    diffs += [f"{name} {freeze[name]} in pip freeze, not recorded" for name in missing]
    if not diffs:
        return []
    more = f" (+{len(diffs) - 3} more)" if len(diffs) > 3 else ""
    return [(FREEZE, "; ".join(diffs[:3]) + more)]


@check(RunRecord)
def _packages(rec: RunRecord, ctx: Context) -> list[Issue]:
    env = rec.environment
    parsed = ctx.freeze(env.pip_freeze)
    if parsed is None:
        return []
    # A session's records share one environment: compare dicts (C speed), judge once.
    seen = ctx.memo.setdefault(("packages", env.pip_freeze.path), [])
    hit = next((i for p, t, v, i in seen if p == env.packages and t == env.toolchain.packages
                and v == env.versions), None)
    if hit is None:
        hit = packages_issues(env, parsed[0], parsed[1])
        seen.append((env.packages, env.toolchain.packages, env.versions, hit))
    return hit
