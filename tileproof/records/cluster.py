"""The committed description of a cluster: which GPU kinds it has, and how to ask Slurm for each.

A kind is a name the course uses (``sm_90``, ``t4``, ``cpu``) mapped to the
``--constraint`` (node features) and/or ``--gres`` that land a task on such a
node, and the compute capability its records must show (``None`` for a kind with
no GPU, whose records honestly say ``no-gpu``). The file is YAML validated by
:class:`Cluster`; ``schema/cluster.v1.schema.json`` is generated from it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError

from tileproof.records.errors import RecordError
from tileproof.records.models import Model
from tileproof.records.schemas import schema

CLUSTER_VERSION = 1

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
"""A kind's name: it becomes part of folder and job names."""


class GpuKind(Model):
    """How to ask Slurm for one kind of GPU node."""

    constraint: str | None = None
    """``--constraint``: a node feature expression, e.g. ``sm_90`` or ``h100|h200``."""
    gres: str | None = None
    """``--gres``, e.g. ``gpu:1`` or ``gpu:h100:1``."""
    compute_capability: str | None = Field(default=None, pattern=r"^[0-9]+\.[0-9]+$")
    """``major.minor`` every record of this kind must show; None for a kind without a GPU."""
    partition: str | None = None
    """``--partition`` for this kind, when it differs from the cluster's."""


@schema("cluster", CLUSTER_VERSION)
class Cluster(Model):
    """A cluster file (e.g. ``.ci/slurm-cluster.yaml``)."""

    cluster_version: Literal[1]
    name: str
    partition: str | None = None
    """Default ``--partition``; None: the cluster's default partition."""
    time_limit: str = Field(default="01:00:00", pattern=r"^([0-9]+-)?[0-9]+(:[0-9]{2}){0,2}$")
    """``--time`` of every task (Slurm's ``[days-]hours:minutes:seconds``)."""
    cpus_per_task: int = Field(default=1, ge=1)
    mem: str | None = Field(default=None, pattern=r"^[0-9]+[KMGT]?$")
    """``--mem`` per task, e.g. ``8G``; None: the partition's default."""
    python: str | None = None
    """The interpreter tasks start (must exist on the nodes); None: the submitter's own."""
    kinds: dict[str, GpuKind] = Field(min_length=1)
    """Kind name → how to ask for it. Names: letters, digits, ``_.-``."""

    def time_limit_s(self) -> float | None:
        """``time_limit`` in seconds, read as Slurm reads ``--time`` (``M``, ``M:S``, ``H:M:S``, ``D-H``,
        ``D-H:M``, ``D-H:M:S``); None for ``0``, which Slurm reads as no limit."""
        days, _, rest = self.time_limit.rpartition("-")
        parts = [int(p) for p in rest.split(":")]
        if days:  # D-H, D-H:M, D-H:M:S
            hours, minutes, seconds = (parts + [0, 0])[:3]
        elif len(parts) == 3:  # H:M:S
            hours, minutes, seconds = parts
        else:  # M, M:S
            hours, minutes, seconds = 0, parts[0], (parts[1:] or [0])[0]
        total = ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds
        return float(total) or None


def load_cluster(path: Path) -> Cluster:
    """Read and validate a cluster file; bad input is one line naming the file and field."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise RecordError(path, "", "no such cluster file",
                          "pass --cluster PATH (see .ci/slurm-cluster.yaml)") from None
    except yaml.YAMLError as e:
        raise RecordError(path, "", f"not valid YAML ({e})", "fix the YAML syntax") from None
    if not isinstance(raw, dict):
        raise RecordError(path, "", "expected a mapping", "start from .ci/slurm-cluster.yaml")
    if raw.get("cluster_version") != CLUSTER_VERSION:
        raise RecordError(path, "cluster_version", f"is {raw.get('cluster_version')!r}; this tileproof reads "
                          f"{CLUSTER_VERSION}", f"set cluster_version: {CLUSTER_VERSION}")
    try:
        cluster = Cluster.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise RecordError(path, field, err["msg"], "see schema/cluster.v1.schema.json") from None
    bad = [k for k in cluster.kinds if not _NAME.match(k)]
    if bad:
        raise RecordError(path, f"kinds.{bad[0]}", "a kind name may hold only letters, digits and _.-",
                          "rename the kind")
    return cluster

