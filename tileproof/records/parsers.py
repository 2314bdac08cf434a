"""Parsers for the transcripts tileproof keeps verbatim (pip freeze, nvidia-smi).

They turn a transcript into fields; the gate and the audit use them to re-read a
record's own transcripts, and capture uses them when a record is written.
"""

from __future__ import annotations

import csv
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
    writes them); editable and other direct references, and wheel names with
    no version in them, give no version (the audit then finds the package's
    recorded version unbacked). Total: any text gives a dict.
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
            parts = url.split("#", 1)[0].rsplit("/", 1)[-1].split("-")
            if len(parts) < 2:  # "x @ file:///a.whl": a wheel name without a version says none
                continue
            version = parts[1]
        else:
            continue
        out[name.strip().lower().replace("_", "-")] = version.strip()
    return out


def _int(value: str) -> int | None:
    """``"81559 MiB"`` → 81559; None for anything else ("[N/A]", "inf", "nan", "")."""
    value = value.strip().split(" ")[0]
    try:
        return int(float(value))
    except (ValueError, OverflowError):
        return None


def _csv_rows(text: str) -> list[list[str]]:
    """Non-blank CSV rows, one per line; a line csv cannot read (a NUL byte, a
    stray quote or carriage return, a 128 KiB field) gives no row, so it names no GPU."""
    rows = []
    for line in text.splitlines():
        try:
            row = next(csv.reader([line]), [])
        except csv.Error:
            continue
        if any(c.strip() for c in row):
            rows.append(row)
    return rows


def parse_gpu_query(text: str) -> list[dict]:
    """Rows of ``nvidia-smi --query-gpu=... --format=csv`` (header kept).

    Returns one dict per GPU with keys index, name, uuid, compute_capability,
    driver_version, memory_total_mib, clocks_sm_mhz, clocks_mem_mhz. Total:
    any text gives a list (a field that is not a finite number is None).
    """
    rows = _csv_rows(text)
    if not rows:
        return []
    header = [h.strip().split(" ")[0] for h in rows[0]]
    out = []
    for row in rows[1:]:
        cells = dict(zip(header, (c.strip() for c in row)))
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
