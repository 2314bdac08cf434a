"""Input files refused before parsing, and entries of runs/ that cannot be records.

Every file the audit reads (records, transcripts, lessons, claims files) goes
through ``records.safe_read``; each ``InputRefused.kind`` it can raise is one rule
here, ``input-<kind>``, described by ``safe_read.RULES`` (one text per kind, one
source). ``runs-stray-file``: a file or folder in runs/ that is not a record
file (``store.stray_files`` lists them). ``claims-file``: a claims file that
reads but does not parse or validate; ``lesson-undecided``: a lesson whose
publish decision cannot be made because an input it needs is refused or broken.
"""

from __future__ import annotations

from typing import get_args

from tileproof.judge.audit.audit_rules import rule
from tileproof.judge.audit.result import Issue
from tileproof.records import store
from tileproof.records.errors import InputProblem, InputRefused, RecordError
from tileproof.records.safe_read import RULES as REFUSALS

INPUT: dict[InputProblem, str] = {kind: rule(f"input-{kind}", REFUSALS[kind]) for kind in get_args(InputProblem)}
"""``InputRefused.kind`` → its audit rule id."""

STRAY = rule("runs-stray-file", "a file or folder in runs/ that is not a record (records are runs/<run id>.json)")
CLAIMS = rule("claims-file", "a claims file under lessons/claims/ is not valid YAML or does not validate")
UNDECIDED = rule("lesson-undecided", "a lesson's publish decision cannot be made: an input it needs "
                 "(its claims file, a transcript) is refused or broken")


def rule_for(kind: InputProblem) -> str:
    """The audit rule of one refusal kind."""
    return INPUT[kind]


def reason_of(error: RecordError) -> str:
    """The error's own line, less the file it names first (a finding names the file)."""
    return f"{error.field + ': ' if error.field else ''}{error.problem} (fix: {error.fix})"


def refused_issue(error: InputRefused) -> Issue:
    """(rule, reason) for a refused input."""
    return rule_for(error.kind), reason_of(error)


def stray_issue(name: str) -> Issue:
    """(rule, reason) for one stray entry of runs/, in ``store.stray_error``'s words."""
    return STRAY, reason_of(store.stray_error(name))
