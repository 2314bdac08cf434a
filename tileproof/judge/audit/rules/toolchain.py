"""A toolchain of one CUDA release: the pieces ``records.release`` lists share one major.minor."""

from __future__ import annotations

from tileproof.judge.audit.audit_rules import Context, check, rule
from tileproof.judge.audit.result import Issue
from tileproof.records import release
from tileproof.records.models import CompileRecord, RunRecord, Toolchain

MIXED = rule("toolchain-mixed", "tileiras/nvcc/nvvm/ptxas (tools or packages) of more than one major.minor")


def toolchain_issues(tc: Toolchain) -> list[Issue]:
    """Every tool and package of ``records.release`` must share one major.minor."""
    groups = release.by_release(release.pieces({t.name: t.version for t in tc.tools}, tc.packages))
    if len(groups) > 1:
        return [(MIXED, f"mixed releases ({release.describe_mixed(groups)})")]
    if groups and tc.major_minor is not None and tc.major_minor != next(iter(groups)):
        return [(MIXED, f"major_minor {tc.major_minor} recorded but every piece is {next(iter(groups))}")]
    return []


def _cached(tc: Toolchain, ctx: Context) -> list[Issue]:
    """Records share a handful of toolchains: judge each distinct one once."""
    key = ("toolchain", tc.major_minor, tuple((t.name, t.version) for t in tc.tools),
           tuple(sorted(tc.packages.items())))
    return ctx.once(key, lambda: toolchain_issues(tc))


@check(RunRecord)


def _run(rec: RunRecord, ctx: Context) -> list[Issue]:
    return _cached(rec.environment.toolchain, ctx)


@check(CompileRecord)


def _compile(rec: CompileRecord, ctx: Context) -> list[Issue]:
    return _cached(rec.toolchain, ctx)
