"""The audit as a machine-readable summary (``audit --json PATH``), built from the audit's result.

``summary(result)`` builds a ``records.audit_summary.AuditSummary`` from the same view models the
reports render (``lesson_view``, ``claims_view``, ``bench_view``), so the JSON says what the page says.
"""

from __future__ import annotations

from tileproof.judge.audit.result import AuditResult
from tileproof.records.audit_summary import (
    SUMMARY_VERSION,
    AuditSummary,
    BenchOut,
    BlockerOut,
    ClaimOut,
    FindingOut,
    HistoryOut,
    LessonOut,
    PairOut,
    RowOut,
)
from tileproof.records.models import BenchRecord
from tileproof.report.bench_view import history
from tileproof.report.claims_render import view_of
from tileproof.report.lesson_view import lesson_rows, verdict_text


def _bench(rec: BenchRecord, counted: bool) -> BenchOut:
    gpu = rec.environment.gpu
    return BenchOut(run_id=rec.run_id, program=rec.program, gpu=gpu.name if gpu else None,
                    compute_capability=gpu.compute_capability if gpu else None, verdict=rec.verdict,
                    counted=counted, ceilings=dict(rec.ceilings),
                    head_to_head=[PairOut(case=k, reference=p.reference, pct_of_reference=p.pct_of_reference,
                                          q1=p.q1, q3=p.q3, cycles=p.cycles, control=p.control)
                                  for k, p in rec.head_to_head.items()])


def summary(result: AuditResult) -> AuditSummary:
    lessons = [LessonOut(id=lesson.id, file=lesson.file, title=lesson.title, status=lesson.status,
                         publishable=lesson.publishable, decision=verdict_text(lesson),
                         rows=[RowOut(program=r.program, check=r.check, state=r.outcome, run_id=r.run_id, why=r.why,
                                      fix=r.command, blocks=not r.counted) for r in lesson_rows(lesson)],
                         blockers=[BlockerOut(kind=b.kind, subject=b.subject, outcome=b.outcome, reason=b.reason,
                                              fix=b.command) for b in lesson.decision.blockers])
               for lesson in result.lessons]
    claims = [ClaimOut(document=r.document, claim=r.claim_id, asserted=r.asserted, deciding=r.deciding,
                       refuted_and_asserted=r.stands_out,
                       verdicts={c.release: c.verdict for c in r.cells if c is not None},
                       evidence={c.release: c.evidence for c in r.cells if c is not None and c.evidence},
                       holds=r.holds) for r in view_of(result).rows]
    bench = [_bench(r, r.run_id not in result.bad_records) for r in result.records if isinstance(r, BenchRecord)]
    hist = [HistoryOut(program=s.program, case=s.key, metric=s.metric, run_ids=[p.run_id for p in s.points],
                       values=[p.value for p in s.points], regressed=s.regressed)
            for s in history(result.records, result.bad_records)]
    return AuditSummary(summary_version=SUMMARY_VERSION, passed=result.ok, history_checked=result.history_checked,
                        history_line=result.history_line(), records=result.validated,
                        evidence_files=result.evidence_files,
                        findings=[FindingOut(file=f.file, rule=f.rule, reason=f.reason) for f in result.findings],
                        lessons=lessons, claims=claims, bench=bench, history=hist)


def summary_json(result: AuditResult) -> str:
    return summary(result).model_dump_json(indent=2) + "\n"
