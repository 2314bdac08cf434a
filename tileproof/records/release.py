"""The one-CUDA-release rule: which pieces of a toolchain must share one major.minor.

Every reader of this rule (``toolchain.find.coherence`` when a toolchain is found,
``judge.gate`` when a run record is judged, the audit's ``toolchain-mixed`` rule)
takes its list of pieces from here, so the three can no longer disagree.

``nvidia-nvjitlink`` is deliberately left out of ``PACKAGES``: it is the JIT
linker library the CUDA driver API and cupy load at run time, and none of nvcc,
tileiras, ptxas or libnvvm (the tile build and the cuTile JIT) loads it. The
committed compile and claims records (runs/20261129T122301Z-compile-917a22af,
runs/20261129T122814Z-claims-af4906ae) show nvjitlink 13.5.37 beside a 13.4
toolchain whose builds and runs all passed. Adding it would flag those records
without a failure to point at; should a tile step ever load it, add it here and
the three readers follow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PACKAGES: tuple[str, ...] = (
    "nvidia-cuda-nvcc",
    "nvidia-cuda-tileiras",
    "nvidia-nvvm",
    "nvidia-cuda-crt",
    "nvidia-cuda-runtime",
    "nvidia-cuda-cuobjdump",
)
"""The pip distributions that make one tile toolchain (same major.minor)."""

TOOLS: tuple[str, ...] = ("nvcc", "tileiras", "ptxas", "nvvm")
"""Tools whose own version must share that release (cuobjdump's banner is not read: its package is)."""

TILEIRAS = ("tileiras", "nvidia-cuda-tileiras")
"""The tool or package that names the tileiras version (a toolchain without it cannot build tile code)."""

_MAJOR_MINOR = re.compile(r"(\d+)\.(\d+)")


def major_minor(version: str | None) -> str | None:
    """``13.4.92`` → ``13.4``; None when the text does not start with ``major.minor``."""
    if not version:
        return None
    m = _MAJOR_MINOR.match(version)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def pieces(tools: Mapping[str, str | None], packages: Mapping[str, str]) -> dict[str, str | None]:
    """name → version of every piece the rule covers (tools named as they are, packages by distribution);
    a tool whose version is unknown is kept, with None."""
    out: dict[str, str | None] = {name: tools[name] for name in TOOLS if name in tools}
    out.update({name: packages[name] for name in PACKAGES if name in packages})
    return out


def by_release(found: Mapping[str, str | None]) -> dict[str, list[str]]:
    """major.minor → the pieces of that release (pieces without a readable version left out), sorted."""
    out: dict[str, list[str]] = {}
    for name, version in found.items():
        mm = major_minor(version)
        if mm is not None:
            out.setdefault(mm, []).append(name)
    return {mm: sorted(names) for mm, names in sorted(out.items())}


def names_tileiras(found: Mapping[str, str | None]) -> bool:
    """Whether a tileiras version is among the pieces."""
    return any(found.get(name) for name in TILEIRAS)


def describe_mixed(groups: Mapping[str, list[str]]) -> str:
    """``13.3: tileiras; 13.4: nvcc, nvvm`` (the one wording of a mixed toolchain)."""
    return "; ".join(f"{mm}: {', '.join(names)}" for mm, names in groups.items())
