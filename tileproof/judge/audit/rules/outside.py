"""What the program's word is held against: tileproof's own check of its handed-over outputs (run records, and
bench records from bench_version 5), and the wall clock around its timed regions (bench records)."""

from __future__ import annotations

from tileproof.judge.audit.audit_rules import Context, check, rule
from tileproof.judge.audit.result import Issue
from tileproof.records.models import WALL_BENCH_VERSION, BenchCase, BenchRecord, RunRecord

OUTSIDE = rule("outside-verdict", "a run or bench record's verdict says passed although tileproof's own check of "
                                  "the outputs it handed over did not pass every check (or is missing)")
WALL = rule("bench-wall-clock", "a bench case's rate is one the wall clock cannot support: its timed regions lie "
                                "outside the step tileproof bracketed, took less wall time than its counted work "
                                "needs at the ceiling, or less than its own CUDA events claim; or its rate is above "
                                "the GPU's dense tensor peak")

WALL_SLACK = 0.05
"""Relative room for clock reads and rounding before a wall-clock comparison is a finding."""
EVENTS_SLACK_MS = 1.0
"""Absolute room (ms) between the events' sum and the wall time of the regions that hold them."""


def outside_issues(rec: RunRecord | BenchRecord) -> list[Issue]:
    """From run_version 5 (bench_version 5) a ``passed`` verdict needs tileproof's own check, passed on every check
    of the report (paired by index: a bench checks one name once per configuration)."""
    if rec.verdict_by == "program" or rec.verdict != "passed":
        return []
    if rec.outside is None:
        return [(OUTSIDE, "verdict passed without tileproof's own check of the handed-over outputs")]
    pairs = rec.outside.pairs(rec.report) if rec.report else []
    bad = [(said.name, mine) for said, mine in pairs if mine is None or mine.status != "passed"]
    paired = {id(mine) for _, mine in pairs}
    bad += [(c.name, c) for c in rec.outside.checks if c.status == "failed" and id(c) not in paired]
    if bad:
        name, found = bad[0]
        return [(OUTSIDE, f"verdict passed but tileproof's own check of {name} is "
                          f"{found.status if found else 'missing'}{f': {found.why}' if found else ''}")]
    return []


def case_issues(case: BenchCase, peak_tflops: float | None) -> list[Issue]:
    """One case's rate against the wall clock around it and the dense tensor peak."""
    out: list[Issue] = []
    if peak_tflops and case.tflops is not None and case.tflops > peak_tflops * (1 + WALL_SLACK):
        out.append((WALL, f"{case.key}: {case.tflops:.1f} TFLOP/s by its CUDA events, above the dense tensor peak "
                          f"{peak_tflops:.1f} TFLOP/s"))
    if case.wall_s is None:
        return out
    if case.wall_in_step is False:
        out.append((WALL, f"{case.key}: the timed regions the program reported lie outside the step as tileproof "
                          "bracketed it"))
    if case.roofline is not None:
        need_s = case.repeats * case.roofline.floor_ms / 1e3
        if case.wall_s * (1 + WALL_SLACK) < need_s:
            out.append((WALL, f"{case.key}: {case.repeats} launches in {case.wall_s * 1e3:.3g} ms of wall clock, but "
                              f"their counted work needs {need_s * 1e3:.3g} ms at the {case.roofline.ceiling}"))
    if case.events_ms is not None and case.events_ms > case.wall_s * 1e3 * (1 + WALL_SLACK) + EVENTS_SLACK_MS:
        out.append((WALL, f"{case.key}: its CUDA events add up to {case.events_ms:.3g} ms inside "
                          f"{case.wall_s * 1e3:.3g} ms of wall clock"))
    return out


@check(RunRecord)
def _outside(rec: RunRecord, _ctx: Context) -> list[Issue]:
    return outside_issues(rec)


@check(BenchRecord)
def _wall(rec: BenchRecord, _ctx: Context) -> list[Issue]:
    if rec.bench_version < WALL_BENCH_VERSION:
        return []
    found = outside_issues(rec)
    peak = rec.ceilings.get("peak_tflops")
    return found + [issue for case in rec.cases for issue in case_issues(case, peak)]
