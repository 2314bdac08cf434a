"""A record run again here, against the record it reproduces: the same program's checks or bench cases, compared by
``diff``'s rules. Pure: ``compare(cited, fresh)`` reads the two records only.

- a run record: each check of the cited record, passed or not there and here, with its largest absolute error
  judged by ``judge.history``'s error band (``ERROR_NOISE``) and the noise rule; it **reproduces** when every check
  that passed there passes here, and the run here passed;
- a bench record: each case both hold and each ``name/variant/shape/*`` slot (``diff.compare_bench``: the median
  time by the noise rule across runs); it **reproduces** when the bench passed here, every case of the cited
  record was timed here, and, on the same GPU class, none is slower beyond noise (on another class the times are
  shown, not judged: another card is not a reproduction of its numbers);
- both: the two environments side by side (``diff.environment``).
"""

from __future__ import annotations

import math

from tileproof.judge import diff, noise
from tileproof.judge.diff import CaseChange, EnvField, Out
from tileproof.judge.history import ERROR_NOISE
from tileproof.records.models import BenchRecord, Check, RunRecord


class CheckChange(Out):
    check: str
    cited: bool
    """Passed in the cited record."""
    here: bool | None
    """Passed here; None when the run here has no such check."""
    cited_err: float | None
    here_err: float | None
    judged: noise.Change | None
    """The error here against there, lower being better (``ERROR_NOISE``); None without both."""


class Reproduction(Out):
    cited: str
    here: str
    program: str
    cited_class: str
    here_class: str
    here_verdict: str
    checks: list[CheckChange]
    cases: list[CaseChange]
    missing: list[str]
    """Checks or bench cases of the cited record that the run here does not have."""
    environment: list[EnvField]

    @property
    def same_class(self) -> bool:
        return self.cited_class == self.here_class

    @property
    def why_not(self) -> list[str]:
        """What keeps it from reproducing, one line each; empty when it reproduces."""
        out = [] if self.here_verdict == "passed" else [f"the run here is {self.here_verdict}"]
        out += [f"{c.check}: passed in {self.cited}, {'absent' if c.here is None else 'failed'} here"
                for c in self.checks if c.cited and not c.here]
        out += [f"{m}: not measured here" for m in self.missing]
        if self.same_class:
            out += [f"{c.key}: slower beyond noise ({c.change:+.1%})" for c in self.cases if c.judged == "regression"]
        return out

    @property
    def reproduced(self) -> bool:
        return not self.why_not


def _class(rec: RunRecord | BenchRecord) -> str:
    gpu = rec.environment.gpu
    return f"{gpu.name}, cc {gpu.compute_capability}" if gpu else "no GPU"


def _err(c: Check | None) -> float | None:
    v = c.max_abs_err if c is not None else None
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def _checks(cited: RunRecord, fresh: RunRecord) -> tuple[list[CheckChange], list[str]]:
    here = {c.name: c for c in (fresh.report.checks if fresh.report else [])}
    out, missing = [], []
    for c in cited.report.checks if cited.report else []:
        mine = here.get(c.name)
        a, b = _err(c), _err(mine)
        judged = (noise.judge(noise.Measured.relative(a, ERROR_NOISE), noise.Measured.relative(b, ERROR_NOISE), False)
                  if a is not None and b is not None else None)
        out.append(CheckChange(check=c.name, cited=c.passed, here=mine.passed if mine else None, cited_err=a,
                               here_err=b, judged=judged))
        if mine is None:
            missing.append(c.name)
    return out, missing


def compare(cited: RunRecord | BenchRecord, fresh: RunRecord | BenchRecord) -> Reproduction:
    """The fresh record (run here) against the cited one; both of one kind and one program."""
    if type(cited) is not type(fresh) or cited.program != fresh.program:
        raise ValueError(f"{fresh.run_id} is not a run of {cited.program} of the kind of {cited.run_id}")
    checks: list[CheckChange] = []
    cases: list[CaseChange] = []
    missing: list[str] = []
    if isinstance(cited, RunRecord) and isinstance(fresh, RunRecord):
        checks, missing = _checks(cited, fresh)
    elif isinstance(cited, BenchRecord) and isinstance(fresh, BenchRecord):
        cases = diff.compare_bench(cited, fresh)
        timed = {c.key for c in fresh.cases}
        missing = [c.key for c in cited.cases if c.key and c.key not in timed]
    return Reproduction(cited=cited.run_id, here=fresh.run_id, program=cited.program, cited_class=_class(cited),
                        here_class=_class(fresh), here_verdict=fresh.verdict, checks=checks, cases=cases,
                        missing=missing, environment=diff.environment(cited, fresh))


def lines(r: Reproduction) -> list[str]:
    """The comparison in words: a verdict line, then the checks or cases, then the environment."""
    head = (f"reproduce {r.cited} ({r.program}, {r.cited_class}) here as {r.here} ({r.here_class}): "
            + ("reproduced" if r.reproduced else "NOT REPRODUCED: " + "; ".join(r.why_not)))
    out = [head]
    if not r.same_class:
        out.append(f"  another GPU class: the times are shown, not judged ({r.cited_class} there, {r.here_class} "
                   "here)")
    for c in r.checks:
        errs = (f", max abs err {c.cited_err:.2g} -> {c.here_err:.2g} ({(c.judged or '-').replace('-', ' ')})"
                if c.cited_err is not None and c.here_err is not None else "")
        here = "absent" if c.here is None else ("passed" if c.here else "failed")
        out.append(f"  check {c.check}: {'passed' if c.cited else 'failed'} -> {here}{errs}")
    for case in r.cases:
        word = case.judged.replace("-", " ") if r.same_class else "not judged"
        out.append(f"  {case.key}: {case.before.median_ms:.4f} ± {case.before.band_ms:.4f} ms -> "
                   f"{case.after.median_ms:.4f} ± {case.after.band_ms:.4f} ms ({case.change:+.1%}, {word})")
    out.append("  environment: " + "; ".join(f"{f.name} {f.before}" + (f" -> {f.after}" if f.differs else "")
                                             for f in r.environment))
    return out
