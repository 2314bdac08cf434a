"""Run sessions: every session's program records are closed by one session record that lists them."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from tileproof.judge.audit.audit_rules import rule
from tileproof.judge.audit.result import Issue
from tileproof.records import store
from tileproof.records.findings import Finding
from tileproof.records.models import RunRecord, SessionRecord

INCOMPLETE = rule("session-incomplete",
                  "a run session's program records exist but its closing session record does not")
RUNS = rule("session-runs", "a session record's run list or verdict counts disagree with the run records")


def session_issues(session: SessionRecord, runs: list[RunRecord]) -> list[Issue]:
    """A closing session record vs the run records that name its session id."""
    out: list[Issue] = []
    have = {r.run_id for r in runs}
    listed = set(session.runs)
    if missing := [r for r in session.runs if r not in have]:
        out.append((RUNS, f"lists {len(missing)} run(s) not in runs/ with this session: {', '.join(missing[:3])}"))
    if extra := sorted(have - listed):
        out.append((RUNS, f"{len(extra)} run record(s) of this session are not listed: {', '.join(extra[:3])}"))
    counts = dict(Counter(r.verdict for r in runs))
    recorded = {k: v for k, v in session.verdict_counts.items() if v}
    if counts != recorded:
        out.append((RUNS, f"verdict_counts {recorded} but the run records say {counts}"))
    return out


def session_findings(records: list[tuple[str, Any]]) -> list[Finding]:
    """Over every (file name, record): sessions closed twice, left open, or disagreeing with their runs."""
    out: list[Finding] = []
    by_session: dict[str, list[RunRecord]] = defaultdict(list)
    sessions: dict[str, tuple[str, SessionRecord]] = {}
    names = {}
    for name, rec in records:
        names[rec.run_id] = name
        if isinstance(rec, RunRecord):
            by_session[rec.environment.session_id].append(rec)
        elif isinstance(rec, SessionRecord):
            if rec.session_id in sessions:
                out.append(Finding(f"{store.RUNS}/{name}", RUNS, f"session {rec.session_id} is closed twice "
                                                                 f"(also by {sessions[rec.session_id][1].run_id})"))
            sessions[rec.session_id] = (name, rec)
    for sid, runs in by_session.items():
        if sid not in sessions:
            out.append(Finding(f"{store.RUNS}/{names[runs[0].run_id]}", INCOMPLETE,
                               f"session {sid} has {len(runs)} program record(s) but no closing "
                               f"session record (interrupted run?)"))
    for sid, (name, session) in sessions.items():
        out += [Finding(f"{store.RUNS}/{name}", rule_id, reason)
                for rule_id, reason in session_issues(session, by_session.get(sid, []))]
    return out
