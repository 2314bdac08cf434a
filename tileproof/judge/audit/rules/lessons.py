"""Lessons: readable front matter, and a published lesson whose cited records still hold.

What is found against a lesson is its verdict's (``judge.verdict.LessonVerdict.findings``: this rule,
or ``lesson-rederive``); ``publish`` and ``status`` print from the same verdict.
"""

from __future__ import annotations

from tileproof.judge import verdict
from tileproof.judge.audit.audit_rules import rule

FRONT = rule("lesson-front", "a lesson's front matter cannot be read")
UNSUPPORTED = rule(verdict.WITHOUT_EVIDENCE,
                   "a published lesson's cited records no longer hold today (gone, not counted, stale, not "
                   "passed), or a newer counted run of the same row and hardware class failed")
