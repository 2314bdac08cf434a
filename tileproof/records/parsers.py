"""Parsers for the transcripts tileproof keeps verbatim (pip freeze, nvidia-smi).

They turn a transcript into fields; the gate and the audit use them to re-read a
record's own transcripts, and capture uses them when a record is written.
"""

from __future__ import annotations

import csv
import io
import re

GPU_QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "compute_cap",
    "driver_version",
    "memory.total",
    "clocks.sm",
    "clocks.mem",
)
"""Fields asked of ``nvidia-smi --query-gpu``; the transcript keeps its header."""

_EDITABLE = re.compile(r"^# Editable .*\((\S+)==(\S+)\)$")


def parse_pip_freeze(text: str) -> dict[str, str]:
    """``pip freeze`` → {name: version}.

    Reads ``name==version`` lines and direct references to a wheel
    (``name @ file:///.../name-1.7.0-cp312-....whl``, as an offline install
    writes them); editable and other direct references are skipped.
    """
    out = {}
    for line in text.splitlines():
        line = line.strip()
        editable = _EDITABLE.match(line)
        if editable:  # "# Editable Git install with no remote (name==version)" above its "-e PATH"
            out[editable.group(1).lower().replace("_", "-")] = editable.group(2)
            continue
        if not line or line.startswith(("#", "-e ")):
            continue
        if "==" in line:
            name, _, version = line.partition("==")
        elif " @ " in line and line.split("#", 1)[0].endswith(".whl"):
            name, _, url = line.partition(" @ ")
            version = url.split("#", 1)[0].rsplit("/", 1)[-1].split("-")[1]
        else:
            continue
        out[name.strip().lower().replace("_", "-")] = version.strip()
    return out


def _int(value: str) -> int | None:
    value = value.strip().split(" ")[0]
    try:
        return int(float(value))
    except ValueError:
        return None


def parse_gpu_query(text: str) -> list[dict]:
    """Rows of ``nvidia-smi --query-gpu=... --format=csv`` (header kept).

    Returns one dict per GPU with keys index, name, uuid, compute_capability,
    driver_version, memory_total_mib, clocks_sm_mhz, clocks_mem_mhz.
    """
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    if not rows:
        return []
    header = [h.strip().split(" ")[0] for h in rows[0]]
    out = []
    for row in rows[1:]:
        cells = dict(zip(header, (c.strip() for c in row), strict=False))
        out.append(
            {
                "index": _int(cells.get("index", "")),
                "name": cells.get("name", ""),
                "uuid": cells.get("uuid", ""),
                "compute_capability": cells.get("compute_cap", ""),
                "driver_version": cells.get("driver_version", ""),
                "memory_total_mib": _int(cells.get("memory.total", "")),
                "clocks_sm_mhz": _int(cells.get("clocks.current.sm", cells.get("clocks.sm", ""))),
                "clocks_mem_mhz": _int(cells.get("clocks.current.memory", cells.get("clocks.mem", ""))),
            }
        )
    return out
