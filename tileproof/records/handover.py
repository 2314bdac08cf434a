"""What a program hands over beside its check report: each check's output and inputs, as ``.npy`` files.

The harnesses (``kernels/harness.py``, ``cpp/harness.h``) write, into the folder of the check report
(``--report``), one ``.npy`` file per array a check used and the manifest ``handover.json``
(:class:`Handover`) that names them. tileproof reads them back as hostile input
(``runner.outside_worker``) and recomputes each check's reference itself, without the program.

An array of at most ``CAP_BYTES`` is written whole. A larger one is a documented sample: rows
``0, stride, 2*stride, ...`` of its first axis (``RowSample``), with the sha256 of the whole array's
C-order bytes. The output of a check and every input whose first axis has the output's length are
sampled with the same stride (the reference of a row-wise check needs only those rows); any other
input is written whole or, above the cap, not at all (the check is then ``unverified``).

Checks of one shape may share their inputs (kernels/harness.py ``InputSet``: a bench checks every configuration
it times on the same inputs): the files are written once and every such check names them.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from tileproof.records.base import Model
from tileproof.records.schemas import schema

HANDOVER_VERSION = 2
"""``Handover.handover_version`` kernels/harness.py writes: 2 gives every check its ``index`` in the check report
(a bench checks one computation once per configuration, under one name) and lets checks share input files (an
input set: one shape's inputs, handed over once); 1 (cpp/harness.h): one check per name, no index."""

MANIFEST = "handover.json"
"""The manifest's file name, in the folder of the check report."""

REFERENCES_FILE = "kernels/references.py"
"""The lesson's reference table, relative to the repository root: ``REFERENCES``, check name -> the function
tileproof recomputes the check's float64 reference with (docs/authoring.md, "The reference module")."""

CAP_BYTES = 64 << 20
"""Largest array a harness writes whole; above it, strided rows (``RowSample``). Keep in step with
``HANDOVER_CAP_BYTES`` in kernels/harness.py and ``kHandoverCapBytes`` in cpp/harness.h."""

MANIFEST_CAP_BYTES = 1 << 20
"""Largest manifest tileproof reads."""

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


class HandedArray(Model):
    """One array as handed over."""

    file: FileName
    """The ``.npy`` file, in the manifest's folder."""
    dtype: Dtype
    """numpy's ``dtype.str`` of the array."""
    shape: list[Annotated[int, Field(ge=0)]] = Field(max_length=8)
    """The shape of the whole array (a sampled file holds fewer rows)."""
    sample: RowSample | None = None
    """None: the file holds the whole array; else the rows it holds."""


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


@schema("handover", HANDOVER_VERSION)
class Handover(Model):
    """``handover.json``: the arrays a program's checks hand over to tileproof's own check."""

    handover_version: Literal[1, 2]
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
        return self
