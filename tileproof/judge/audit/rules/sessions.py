"""Run sessions: every session's program records are closed by one session record that lists them."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from tileproof.judge.audit.audit_rules import rule
from tileproof.judge.audit.result import Issue
from tileproof.records import store
from tileproof.records.findings import Finding
from tileproof.records.models import RunRecord, SessionRecord, share

INCOMPLETE = rule("session-incomplete",
                  "a run session's program records exist but its closing session record does not")
RUNS = rule("session-runs", "a session record's run list or verdict counts disagree with the run records")


class SessionRun(NamedTuple):
    """What these rules read of one run record."""

    name: str
    """Its file name under runs/."""
    run_id: str
    session_id: str
    verdict: str


def session_run(name: str, rec: RunRecord) -> SessionRun:
    return SessionRun(name, rec.run_id, share(rec.environment.session_id), share(rec.verdict))


def session_issues(session: SessionRecord, runs: list[SessionRun]) -> list[Issue]:
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


def session_findings(runs: Iterable[SessionRun], closing: Iterable[tuple[str, SessionRecord]]) -> list[Finding]:
    """Over every run record and every (file name, session record), each oldest first: sessions closed twice, left
    open, or disagreeing with their runs."""
    out: list[Finding] = []
    by_session: dict[str, list[SessionRun]] = defaultdict(list)
    sessions: dict[str, tuple[str, SessionRecord]] = {}
    for run in runs:
        by_session[run.session_id].append(run)
    for name, rec in closing:
        if rec.session_id in sessions:
            out.append(Finding(f"{store.RUNS}/{name}", RUNS, f"session {rec.session_id} is closed twice "
                                                             f"(also by {sessions[rec.session_id][1].run_id})"))
        sessions[rec.session_id] = (name, rec)
    for sid, runs_of in by_session.items():
        if sid not in sessions:
            out.append(Finding(f"{store.RUNS}/{runs_of[0].name}", INCOMPLETE,
                               f"session {sid} has {len(runs_of)} program record(s) but no closing "
                               f"session record (interrupted run?)"))
    for sid, (name, session) in sessions.items():
        out += [Finding(f"{store.RUNS}/{name}", rule_id, reason)
                for rule_id, reason in session_issues(session, by_session.get(sid, []))]
    return out
