"""Compute capability <-> ``sm_XX``: the one conversion.

A compute capability is ``major.minor`` text as nvidia-smi prints it (``9.0``);
a target is ``sm_<major><minor>`` (``sm_90``). Comparing capabilities as text is
wrong (``"10.0" < "9.0"``), so everything compares the tuples from here.
"""

from __future__ import annotations

import re

MIN_CC = (8, 0)
"""The smallest compute capability with tile support."""

_SM = re.compile(r"sm_(\d+)(\d)")


def cc_tuple(value: str | None) -> tuple[int, int] | None:
    """``"9.0"`` → (9, 0); None when it is not ``major.minor``."""
    try:
        major, minor = (value or "").strip().split(".")
        return int(major), int(minor)
    except ValueError:
        return None


def sm_of(cc: str) -> str:
    """``"9.0"`` → ``sm_90``; ``"12.1"`` → ``sm_121``. Raises ValueError for anything but ``major.minor``."""
    parsed = cc_tuple(cc)
    if parsed is None:
        raise ValueError(f"compute capability {cc!r} is not major.minor")
    return f"sm_{parsed[0]}{parsed[1]}"


def cc_of(target: str) -> str:
    """``sm_90`` → ``"9.0"``; ``sm_121`` → ``"12.1"`` (the last digit is the minor)."""
    m = _SM.fullmatch(target)
    if m is None:
        raise ValueError(f"target {target!r} is not sm_XX")
    return f"{int(m.group(1))}.{m.group(2)}"


def below_tile(cc: str | None) -> bool:
    """Whether a stated compute capability is readable and below 8.0."""
    parsed = cc_tuple(cc)
    return parsed is not None and parsed < MIN_CC
