"""Published lessons re-derived: the hardware block, results, verified cuda-tile releases and compile-derived
tables (res-usage) a published lesson shows are recomputed from the records it cites, and every difference is a
finding.

The re-derivation is the lesson's verdict's (``judge.verdict``: what ``publish`` would write from those
records), so ``publish`` and ``status`` say the same. A published lesson whose cited records no longer
hold has nothing to re-derive; the ``lesson-published-without-evidence`` rule names it instead.
"""

from __future__ import annotations

from tileproof.judge import verdict
from tileproof.judge.audit.audit_rules import rule

REDERIVE = rule(verdict.REDERIVE, "a published lesson's hardware block, results (front matter or body table), "
                                  "verified cuda-tile releases or compile-derived tables differ from what the "
                                  "publish decision derives from the records it cites")
