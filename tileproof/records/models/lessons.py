"""A lesson's YAML front matter (``lessons/<id>.md``): its programs, results table, claims and notes."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints, model_validator

from tileproof.records.base import Model
from tileproof.records.models.common import ADDED_FIELD, _none
from tileproof.records.models.compile import ArtifactKind
from tileproof.records.schemas import schema

LESSON_VERSION: Final = 1
"""The lesson front-matter version."""


EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Z_][A-Z0-9_]*$")]
"""An environment variable name (upper case, digits, underscores)."""


class LessonProgram(Model):
    """A program of the lesson."""

    path: str
    """``kernels/*.py``, ``kernels/*.jl`` (cuTile.jl) or ``cpp/*.cu``."""
    checks: list[str]
    """Check names (tolerance-table keys) the program must pass."""


class ResultRow(Model):
    """One row of the lesson's results table."""

    program: str
    """A path listed in ``programs``."""
    check: str
    """A check name, or ``gate`` for the capability-gate row."""
    bound: str
    """As shown to readers, e.g. ``float64, rtol 1e-4, atol 1e-3``."""
    optional: bool = False
    """Needs hardware this project lacks; shows ``?`` and never blocks publishing."""
    hardware: str | None = None
    """For optional rows: the hardware they need (e.g. ``cc < 8.0``)."""
    result: str = "?"
    """``?`` in a draft; publish writes what the deciding record showed."""
    run_id: str | None = None
    """The record behind ``result``, written by publish."""


class Hardware(Model):
    """Where the published evidence ran: written by publish, never by hand."""

    gpu: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    cuda: str | None = None
    tileiras: str | None = None
    cuda_tile: str | None = None
    run_id: str | None = None


PerfMetric = Literal["pct_of_reference", "pct_of_ceiling", "tflops", "gbps", "times_floor", "pct_of_power_limit",
                     "pct_below_max_clock", "pct_of_peak_at_clock"]
"""A ``BenchCase`` field or derived metric a performance claim is about: its rate as % of the library
reference or of the run's ceiling, the rate itself, how many times its roofline floor it took
(``times_floor``), and from bench_version 3 what the GPU did while it ran: its power draw as % of the power
limit, how far below its maximum the SM clock ran, and its rate as % of the dense peak at that clock
(``BenchCase``'s properties say how each is read)."""


class PerfReference(Model):
    """A claim's bound taken from its own history on the GPU class, as an alternative to a fixed ``at_least``:
    the ``percentile`` of the claim's value over the ``last`` counted bench records of the newest record's GPU
    class (its name and the claim's compute capability) before the newest; the newest below it beyond its noise
    has drifted (``judge.perf_claims``)."""

    percentile: float = Field(gt=0, lt=100, allow_inf_nan=False)
    """E.g. 10: the value nine earlier records in ten reached."""
    last: int = Field(ge=3, le=1000)
    """How many earlier counted records the bound is taken over (at least 3 must exist)."""


class PerfClaim(Model):
    """A performance claim the lesson makes; publish needs a bench record that supports it
    (``tileproof.perf_claims``)."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    statement: str = Field(min_length=1)
    """The claim as the lesson words it, e.g. ``tile matmul reaches >= 80% of cuBLAS at 4096³ on sm_90``."""
    case: str = Field(pattern=r"^[^*/\s]+(/[^*/\s]+){2}(/([^*/\s]+|\*))?$")
    """A bench case key, ``name/variant/shape[/tiles+hints]``, or ``name/variant/shape/*``: the best
    over every tile configuration of that shape."""
    metric: PerfMetric
    at_least: float | None = Field(default=None, allow_inf_nan=False, exclude_if=_none)
    """The claimed lower bound, in the metric's units (percent for the ``pct_`` metrics); or ``reference``."""
    compute_capability: str = Field(pattern=r"^[0-9]+\.[0-9]+$")
    """``major.minor``: only bench records from a GPU of exactly this compute capability count."""
    program: str = Field(min_length=1)
    """The bench program whose records can support the claim (``kernels/bench/<name>_bench.py``)."""
    reference: PerfReference | None = ADDED_FIELD
    """Instead of ``at_least``: the bound from the claim's recorded distribution on its GPU class."""

    @model_validator(mode="after")
    def _one_bound(self) -> PerfClaim:
        if (self.at_least is None) == (self.reference is None):
            raise ValueError("a performance claim states exactly one of at_least (a fixed bound) and reference (a "
                             "bound from its recorded history)")
        return self


class ResUsageKernel(Model):
    """One row of a compile-derived REG/SHARED table: a kernel and how the lesson describes it."""

    name: str = Field(min_length=1)
    """The kernel's source name (matched to ``cuobjdump -res-usage``'s mangled functions)."""
    reduction: str
    mechanism: str


class ResUsageTable(Model):
    """A REG/SHARED table in the body (``<!-- res-usage:begin -->``) that publish fills from the
    compile records' ``cuobjdump -res-usage`` of one build: one REG/SHARED pair per CUDA release."""

    program: str
    """The C++ program (under ``cpp/``) the kernels are in; it must be one of the lesson's programs."""
    target: str = Field(pattern=r"^sm_[0-9]+[a-z]?$")
    """The build's target, e.g. ``sm_89``."""
    artifact: ArtifactKind = "tilefatbin"
    """Which build of the program: tile code shows in res-usage only in a ``--tilefatbin`` build."""
    kernels: list[ResUsageKernel] = Field(min_length=1)


class VerifiedRelease(Model):
    """A cuda-tile release every Python program of the lesson passed with (written by publish, from the run
    records that decide it: ``judge.release_matrix``)."""

    cuda_tile: str
    """The cuda-tile version."""
    tileiras: list[str]
    """The tileiras versions those runs used."""
    tileiras_in_range: bool
    """Whether that tileiras is one the release declares; false: it was run outside its range, on purpose
    (``--tileiras-outside-range``), and a plain ``pip install cuda-tile[tileiras]==VERSION`` gets another."""
    run_ids: list[str]
    """The run records behind it, one per Python program."""


PlausibilitySignal = Literal["shim-path", "smi-clock", "launch-too-fast", "host-facts", "gpu-two-hosts"]
"""What a plausibility signal on a record is about (``judge.plausibility``; none is proof): ``shim-path``, a
PATH or PYTHONPATH entry where a fake nvidia-smi or cupy is cheapest to put; ``smi-clock``, an nvidia-smi
transcript dated far from the record; ``launch-too-fast``, a GPU run shorter than its launch could be;
``host-facts``, host facts unlike the runner key's first record; ``gpu-two-hosts``, a GPU uuid under two
runner keys."""


class PlausibilityNote(Model):
    """A plausibility signal on the lesson's evidence, explained for reviewers: with it the signal no
    longer keeps the lesson from publishing nor is an audit finding; the note stays here for every
    reviewer to read and weigh."""

    signal: PlausibilitySignal
    """The kind of signal, as the audit names it (``plausibility-<signal>``)."""
    subject: str = Field(min_length=1)
    """What the signal is about, exactly as the audit prints it: ``PYTHONPATH=/tmp/site``, an nvidia-smi
    transcript's path, a run id, ``cpu_count=2``, a GPU uuid."""
    explanation: str = Field(min_length=20)
    """Why the signal is harmless here, in words a reviewer can check (who set what up, where, when)."""


@schema("lesson", LESSON_VERSION)
class LessonFront(Model):
    """A lesson's YAML front matter (``lessons/<id>.md``), read by ``records.lessons``."""

    lesson_version: Literal[1]
    """The front-matter version; ``1``."""
    id: str
    """The lesson id; equals the file name without ``.md``."""
    title: str
    """The lesson's title as readers see it."""
    status: Literal["draft", "published"]
    """``draft`` until ``nox -s publish -- ID`` finds passing records for every required row; only publish
    writes ``published``."""
    programs: list[LessonProgram]
    """The programs the lesson teaches with, each with the checks it must pass."""
    hardware: Hardware
    """Written by publish from the newest record behind a passed row; every field null in a draft."""
    results: list[ResultRow]
    """One row per program and check (plus an optional ``gate`` row); cells written by publish."""
    performance: list[PerfClaim] = []
    """Performance claims; each needs a supporting bench record before publish (none: no claim)."""
    env: list[EnvName] = []
    """Extra environment variable names this lesson's programs receive (beyond the runner's allowlist)."""
    res_usage: ResUsageTable | None = None
    """A compile-derived REG/SHARED table the body holds (None: none); publish fills it from the
    compile records that attest today's sources."""
    cuda_tile_verified: list[VerifiedRelease] = []
    """The cuda-tile releases the lesson's Python programs were verified on, oldest first: written by publish
    from run records (one release per entry, including the lock's); empty in a draft and in a lesson without
    Python programs (then the key is left out)."""
    plausibility: list[PlausibilityNote] = []
    """Plausibility signals on the lesson's evidence, each explained (none: the evidence has none, or a
    record from a second runner key agrees); written by the author, reviewed like the prose."""
