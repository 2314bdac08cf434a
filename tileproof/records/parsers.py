"""Parsers for the transcripts tileproof keeps verbatim (pip freeze, nvidia-smi).

They turn a transcript into fields; the gate and the audit use them to re-read a
record's own transcripts, and capture uses them when a record is written.
"""

from __future__ import annotations

import csv
import functools
import re
from datetime import datetime
from urllib.parse import unquote, urlsplit

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

GPU_QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "compute_cap",
    "driver_version",
    "memory.total",
    "clocks.sm",
    "clocks.mem",
    "pci.bus_id",
)
"""Fields asked of ``nvidia-smi --query-gpu``; the transcript keeps its header."""

_EDITABLE = re.compile(r"^# Editable .*\((\S+)==(\S+)\)$")


def parse_pip_freeze(text: str) -> dict[str, str]:
    """``pip freeze`` → {canonical name: version}.

    Reads ``name==version`` lines and direct references to a wheel
    (``name @ file:///.../name-1.7.0-cp312-....whl``, as an offline install
    writes them: the URL is decoded and the wheel's file name parsed, so
    ``torch-2.13.0%2Bcpu-...whl`` reads ``2.13.0+cpu``); editable installs are
    read from pip's ``# Editable ... (name==version)`` comment. Names are
    canonical (PEP 503), as ``installed_packages`` gives them; versions are
    pip's, as ``importlib.metadata`` reads them; other
    direct references and lines that are not requirements are skipped (the
    audit then finds a recorded version unbacked). Total: any text gives a dict.
    """
    out = {}
    for line in text.splitlines():
        line = line.strip()
        editable = _EDITABLE.match(line)
        if editable:  # "# Editable Git install with no remote (name==version)" above its "-e PATH"
            pinned = _pinned(f"{editable.group(1)}=={editable.group(2)}")
        elif not line or line.startswith(("#", "-e ")):
            continue
        else:
            pinned = _pinned(line)
        if pinned is not None:
            out[pinned[0]] = pinned[1]
    return out


@functools.lru_cache(maxsize=1 << 16)
def _pinned(line: str) -> tuple[str, str] | None:
    """(canonical name, version) of one ``name==version`` or ``name @ ...whl`` line.

    Cached: the sessions of a tree share most lines, and the audit reads every freeze.
    """
    try:
        req = Requirement(line)
    except ValueError:  # InvalidRequirement, or a URL packaging cannot read (a redacted host)
        return None
    name = canonicalize_name(req.name)
    if req.url:
        try:
            wheel = unquote(urlsplit(req.url).path).rsplit("/", 1)[-1]
            return name, str(parse_wheel_filename(wheel)[1])
        except ValueError:  # InvalidWheelFilename (not a wheel), or a URL urllib cannot split
            return None
    pins = [s for s in req.specifier if s.operator in ("==", "===")]
    if len(pins) != 1:
        return None
    return name, pins[0].version


def _int(value: str) -> int | None:
    """``"81559 MiB"`` → 81559; None for anything else ("[N/A]", "inf", "nan", "")."""
    value = value.strip().split(" ")[0]
    try:
        return int(float(value))
    except (ValueError, OverflowError):
        return None


def _text(value: str) -> str | None:
    """A text field of nvidia-smi's CSV, or None for an empty or bracketed one (``[N/A]``, ``[Unknown Error]``)."""
    value = value.strip()
    return None if not value or value.startswith("[") else value


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
    driver_version, memory_total_mib, clocks_sm_mhz, clocks_mem_mhz, pci_bus_id
    (None where the transcript has no such column: queries before it was asked,
    or a value like ``[N/A]``). Total: any text gives a list (a field that is
    not a finite number is None).
    """
    rows = _csv_rows(text)
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
                "pci_bus_id": _text(cells.get("pci.bus_id", "")),
            }
        )
    return out


_SMI_CLOCK = re.compile(r"\A\s*(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +"
                        r"(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})\b")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def smi_clock(text: str) -> datetime | None:
    """The wall-clock time ``nvidia-smi`` prints on its first line (``Tue Dec  1 14:22:12 2026``): the
    host's local time, with no zone (naive); None when the transcript does not start with one."""
    m = _SMI_CLOCK.match(text)
    if m is None:
        return None
    month, day, hour, minute, second, year = m.groups()
    try:
        return datetime(int(year), _MONTHS.index(month) + 1, int(day), int(hour), int(minute), int(second))
    except ValueError:  # 31 Feb, hour 25
        return None
