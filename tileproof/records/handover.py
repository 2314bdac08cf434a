"""What a program hands over beside its check report: each check's output and inputs, as ``.npy`` files.

The harnesses (``kernels/harness.py``, ``cpp/harness.h``) write, into the folder of the check report
(``--report``), one ``.npy`` file per array a check used and the manifest ``handover.json``
(:class:`Handover`) that names them. tileproof reads them back as hostile input
(``runner.outside_worker``) and recomputes each check's reference itself, without the program.

An array of at most ``CAP_BYTES`` is written whole. A larger one is a documented sample, with the sha256 of the
whole array's C-order bytes:

* rows (``RowSample``, version 2; ``Sample.rows``, version 3): the output of a check and every input whose first axis
  has the output's length, the same rows of each (the reference of a row-wise check needs only those rows);
* rows and columns (``Sample``, version 3: a block of a matrix output): when an input that every output row needs
  (matmul's ``b``) is above the cap, but each output column needs only its own column of it (a *column input*,
  ``kernels/harness.py`` ``columns=``), the output's block ``C[rows][:, cols]``, the rows ``rows`` of the row inputs
  and the columns ``cols`` of the column inputs: the reference of ``A[rows] @ B[:, cols]`` is that block. The block
  is at most ``BLOCK_MAX`` rows by ``BLOCK_MAX`` columns (the cost of the check).

Each axis of a sample is a stride (``0, s, 2s, ...``) or an explicit list of indices (in range, strictly
increasing, at most ``MAX_INDICES``); every sampled input of a check keeps exactly the output's rows (its first
axis) or the output's columns (its last axis). Any other input is written whole or, above the cap, not at all (the
check is then ``unverified``).

Checks of one shape may share their inputs (kernels/harness.py ``InputSet``: a bench checks every configuration
it times on the same inputs): the files are written once and every such check names them.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Annotated, Literal

from pydantic import Discriminator, Field, StringConstraints, Tag, model_validator

from tileproof.records.base import Model
from tileproof.records.schemas import schema

HANDOVER_VERSION = 3
"""``Handover.handover_version`` kernels/harness.py writes: 3 samples as ``Sample`` (rows and columns, each a stride
or a list of indices); 2 gives every check its ``index`` in the check report (a bench checks one computation once
per configuration, under one name) and lets checks share input files (an input set: one shape's inputs, handed over
once), sampling rows as ``RowSample``; 1 (cpp/harness.h): one check per name, no index, nothing sampled."""

MANIFEST = "handover.json"
"""The manifest's file name, in the folder of the check report."""

REFERENCES_FILE = "kernels/references.py"
"""The lesson's reference table, relative to the repository root: ``REFERENCES``, check name -> the function
tileproof recomputes the check's float64 reference with (docs/authoring.md, "The reference module")."""

CAP_BYTES = 64 << 20
"""Largest array a harness writes whole; above it, a sample (``Sample``). Keep in step with
``HANDOVER_CAP_BYTES`` in kernels/harness.py and ``kHandoverCapBytes`` in cpp/harness.h."""

MANIFEST_CAP_BYTES = 1 << 20
"""Largest manifest tileproof reads."""

BLOCK_MAX = 1024
"""Most rows, and most columns, of a block sample (``Sample`` with both axes) the Python harness keeps: the check
recomputes ``BLOCK_MAX`` x k x ``BLOCK_MAX`` multiply-adds (about 1 CPU s at 8192^3; tests/benchmarks/
bench_check_cost.txt). Keep in step with ``HANDOVER_BLOCK_MAX`` in kernels/harness.py."""

MAX_INDICES = 1 << 16
"""Most indices an explicit list of one axis may hold."""

MAX_CHECKS = 1024
"""Most checks a manifest may name (a bench program checks every configuration it times)."""

Dtype = Literal["<f2", "<f4", "<f8", "<i4", "<i8", "|u1", "|b1"]
"""The ``.npy`` element types a handover may hold (numpy's ``dtype.str``): plain numbers only."""

FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,120}\.npy$")
"""A handed-over file's name: plain, in the manifest's own folder."""

FileName = Annotated[str, StringConstraints(pattern=FILE_NAME.pattern)]
CheckName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class RowSample(Model):
    """Rows ``0, stride, 2*stride, ...`` of the first axis: what was written of an array above the cap."""

    stride: int = Field(ge=2)
    """Every ``stride``-th row was kept (2 or more: a stride of 1 is the whole array)."""
    whole_sha256: Sha256
    """sha256 of the whole array's C-order bytes, before sampling."""


class Axis(Model):
    """The indices one axis of a sample keeps: every ``stride``-th (``0, stride, 2*stride, ...``) or ``indices``."""

    stride: int | None = Field(default=None, ge=1)
    indices: list[Annotated[int, Field(ge=0)]] | None = Field(default=None, min_length=1, max_length=MAX_INDICES)
    """Strictly increasing, each below the axis's length (``HandedArray`` checks that)."""

    @model_validator(mode="after")
    def _one(self) -> Axis:
        if (self.stride is None) == (self.indices is None):
            raise ValueError("an axis sample is a stride or a list of indices, exactly one of them")
        if self.indices is not None and any(b <= a for a, b in pairwise(self.indices)):
            raise ValueError("sample indices must be strictly increasing (sorted, each once)")
        return self

    def kept(self, length: int) -> int:
        """How many of an axis of ``length`` the sample keeps."""
        return -(-length // self.stride) if self.stride is not None else len(self.indices or ())

    def whole(self, length: int) -> bool:
        """Whether it keeps every index of an axis of ``length``."""
        return self.stride == 1 or (self.indices is not None and len(self.indices) == length)


class Sample(Model):
    """What was written of an array above the cap (handover_version 3): some rows (first axis), some columns (last
    axis), or a block of both."""

    rows: Axis | None = None
    """The first axis's indices kept; None: every row."""
    columns: Axis | None = None
    """The last axis's indices kept (a matrix or more); None: every column."""
    whole_sha256: Sha256
    """sha256 of the whole array's C-order bytes, before sampling."""


def _sample_kind(value: object) -> str:
    """Which sample a manifest's ``sample`` is: ``RowSample`` (version 2) holds a ``stride``, ``Sample`` axes."""
    held = value if isinstance(value, dict) else getattr(value, "__dict__", {})
    return "stride" if "stride" in held else "axes"


class HandedArray(Model):
    """One array as handed over."""

    file: FileName
    """The ``.npy`` file, in the manifest's folder."""
    dtype: Dtype
    """numpy's ``dtype.str`` of the array."""
    shape: list[Annotated[int, Field(ge=0)]] = Field(max_length=8)
    """The shape of the whole array (a sampled file holds fewer rows)."""
    sample: Annotated[Annotated[RowSample, Tag("stride")] | Annotated[Sample, Tag("axes")],
                      Discriminator(_sample_kind)] | None = None
    """None: the file holds the whole array; else the rows (``RowSample``, version 2) or the rows and columns
    (``Sample``, version 3) it holds."""

    @model_validator(mode="after")
    def _in_range(self) -> HandedArray:
        """A sample keeps something less than the whole, of axes the array has, within their lengths."""
        sample = self.sample
        if sample is None:
            return self
        if not self.shape:
            raise ValueError("a sampled array needs a first axis")
        if isinstance(sample, RowSample):
            return self
        axes = [(0, "rows", sample.rows), (len(self.shape) - 1, "columns", sample.columns)]
        if sample.columns is not None and len(self.shape) < 2:
            raise ValueError("a column sample needs an array of two axes or more")
        for i, what, axis in axes:
            if axis is not None and axis.indices and axis.indices[-1] >= self.shape[i]:
                raise ValueError(f"{what} index {axis.indices[-1]} is out of range: the array has {self.shape[i]} "
                                 f"{what}")
        if all(a is None or a.whole(self.shape[i]) for i, _, a in axes):
            raise ValueError("a sample keeps fewer rows or columns than the whole array (else hand it over whole)")
        return self

    def file_shape(self) -> list[int]:
        """The shape of the file: the whole shape, less what the sample left out."""
        shape = list(self.shape)
        if isinstance(self.sample, RowSample):
            shape[0] = -(-shape[0] // self.sample.stride)
        elif self.sample is not None:
            if self.sample.rows is not None:
                shape[0] = self.sample.rows.kept(shape[0])
            if self.sample.columns is not None:
                shape[-1] = self.sample.columns.kept(shape[-1])
        return shape

    def axis(self, which: Literal["rows", "columns"]) -> Axis | None:
        """The sample of the first (``rows``) or last (``columns``) axis; None when the file holds all of it."""
        if isinstance(self.sample, RowSample):
            return Axis(stride=self.sample.stride) if which == "rows" else None
        return None if self.sample is None else getattr(self.sample, which)


class HandedCheck(Model):
    """One check's arrays: the output it compared, and the inputs its reference is computed from."""

    name: CheckName
    """The check's name: its key in kernels/tolerances.py and kernels/references.py."""
    index: int | None = Field(default=None, ge=0)
    """From handover_version 2: the check's position in the program's check report (several checks may share a
    name); None (version 1): the name alone identifies it."""
    output: HandedArray
    inputs: dict[CheckName, HandedArray] = {}
    """Keyword argument name of the reference function → the array passed as it."""
    withheld: list[CheckName] = []
    """Inputs the harness did not write (above the cap, not row-aligned with the output): the check cannot be
    recomputed and is ``unverified``."""

    @model_validator(mode="after")
    def _aligned(self) -> HandedCheck:
        """A sampled input keeps the output's rows (its first axis) or the output's columns (its last axis), exactly:
        the reference of those pieces is the sampled output. Only a sampled output has sampled inputs."""
        rows, columns = self.output.axis("rows"), self.output.axis("columns")
        for key, given in self.inputs.items():
            if given.sample is None:
                continue
            mine_rows, mine_columns = given.axis("rows"), given.axis("columns")
            if mine_rows is not None and mine_columns is not None:
                raise ValueError(f"input {key}: an input keeps the output's rows or its columns, not both")
            if mine_rows is not None and mine_rows != rows:
                raise ValueError(f"input {key}: its rows sample is not the output's ({_said(mine_rows)} against "
                                 f"{_said(rows)})")
            if mine_columns is not None and mine_columns != columns:
                raise ValueError(f"input {key}: its columns sample is not the output's ({_said(mine_columns)} against "
                                 f"{_said(columns)})")
        return self


@schema("handover", HANDOVER_VERSION)
class Handover(Model):
    """``handover.json``: the arrays a program's checks hand over to tileproof's own check."""

    handover_version: Literal[1, 2, 3]
    program: str
    """The program's repository-relative path, as its check report names it."""
    checks: list[HandedCheck] = Field(max_length=MAX_CHECKS)

    @model_validator(mode="after")
    def _identified(self) -> Handover:
        """Version 2 indexes every check, each index once; version 1 names each check once."""
        keys = [c.index if self.handover_version >= 2 else c.name for c in self.checks]
        if None in keys:
            raise ValueError("handover_version 2 gives every check its index in the check report")
        if len(set(keys)) != len(keys):
            raise ValueError("two checks with the same " + ("index" if self.handover_version >= 2 else "name"))
        arrays = [a for c in self.checks for a in (c.output, *c.inputs.values())]
        kind = Sample if self.handover_version >= 3 else RowSample
        wrong = next((a for a in arrays if a.sample is not None and not isinstance(a.sample, kind)), None)
        if wrong is not None:
            raise ValueError(f"{wrong.file}: handover_version {self.handover_version} samples as {kind.__name__} "
                             f"({'rows, columns' if kind is Sample else 'stride'} and whole_sha256)")
        return self


def _said(axis: Axis | None) -> str:
    """An axis sample in a message."""
    if axis is None:
        return "all of them"
    if axis.stride is not None:
        return f"stride {axis.stride}"
    shown = ", ".join(str(i) for i in (axis.indices or [])[:4])
    return f"indices {shown}{', ...' if len(axis.indices or []) > 4 else ''}"
