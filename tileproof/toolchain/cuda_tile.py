"""Which tileiras a cuda-tile release declares, read from its own metadata, and whether the one in use fits.

Each cuda-tile release names the compiler of its ``tileiras`` extra with a version range
(``Requires-Dist: ...; extra == "tileiras"``): 1.2 and 1.3 ``nvidia-cuda-tileiras>=13.2,<13.3``,
1.4 and 1.5 ``cuda-toolkit[nvcc,nvvm,tileiras]>=13.2,<13.4``, 1.6 and 1.7 ``...<13.5``. That range is
read from the installed distribution (``importlib.metadata``, the one first on ``sys.path``: with
``PYTHONPATH`` naming a ``pip install --target`` folder, that folder's), never from a table here, and
``release`` says whether the tileiras that runs fits it. ``run`` and ``compile`` refuse a tileiras
outside the range unless ``--tileiras-outside-range`` asks for it, and then record that they did
(``CudaTileRelease.outside_range_allowed``).

No process is started here: the tileiras version comes in from the caller (``runtime_tools``).
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
from collections.abc import Iterable
from pathlib import Path

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from tileproof.records.errors import ToolchainError
from tileproof.records.models import CudaTileRelease, ReleaseFolder
from tileproof.records.release import major_minor

CUDA_TILE = "cuda-tile"
EXTRA = "tileiras"
"""cuda-tile's extra that brings the compiler."""
TILEIRAS_DIST = "nvidia-cuda-tileiras"
TOOLKIT_DIST = "cuda-toolkit"
"""The meta-package 1.4 and later require, with ``tileiras`` among its extras; its version is the CUDA
release (13.3.1: CUDA 13.3 Update 1), not a tileiras build number."""
OUTSIDE_FLAG = "--tileiras-outside-range"


def tileiras_requirement(requires: Iterable[str]) -> Requirement | None:
    """The requirement, among a distribution's ``Requires-Dist`` lines, that brings tileiras with the
    ``tileiras`` extra: on ``nvidia-cuda-tileiras`` itself, or on ``cuda-toolkit`` with its ``tileiras``
    extra; None when none does (a line that does not parse is not one)."""
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        try:
            with_extra = req.marker is None or req.marker.evaluate({"extra": EXTRA})
        except UndefinedEnvironmentName:
            continue
        name = canonicalize_name(req.name)
        if with_extra and (name == TILEIRAS_DIST or (name == TOOLKIT_DIST and EXTRA in req.extras)):
            return req
    return None


def in_range(req: Requirement, tileiras: str) -> bool | None:
    """Whether tileiras ``tileiras`` (``13.4.92``) satisfies ``req``: its own version against a requirement on
    ``nvidia-cuda-tileiras``; its release (``13.4``) against one on ``cuda-toolkit``, whose versions number
    CUDA releases. None when the version does not read."""
    version = tileiras if canonicalize_name(req.name) == TILEIRAS_DIST else major_minor(tileiras)
    if version is None:
        return None
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return None


def describe(req: Requirement) -> str:
    """The requirement as the metadata writes it, without its marker."""
    return str(Requirement(str(req).split(";", 1)[0]))


def installed() -> tuple[str, list[str]] | None:
    """(version, Requires-Dist lines) of the cuda-tile distribution Python would import; None when absent."""
    try:
        return md.version(CUDA_TILE), list(md.requires(CUDA_TILE) or [])
    except md.PackageNotFoundError:
        return None


def unpacked_folder() -> ReleaseFolder | None:
    """The folder the cuda-tile distribution Python would import lives in (``importlib.metadata``: where its
    ``.dist-info`` is), when the folder's name is a sha256: a release wheel unpacked into a folder named by its
    digest (docs/install.md, the release axis without network). None otherwise, or with no cuda-tile."""
    try:
        where = Path(str(md.distribution(CUDA_TILE).locate_file(""))).absolute()
    except md.PackageNotFoundError:
        return None
    if not re.fullmatch(r"[0-9a-f]{64}", where.name):
        return None
    return ReleaseFolder(path=os.path.normpath(where), sha256=where.name)


def release(tileiras: str | None, allow_outside: bool,
            found: tuple[str, list[str]] | None = None) -> CudaTileRelease | None:
    """The installed cuda-tile release (``found``: ``installed()``'s answer, read here when not given) with
    the tileiras in use; None when no cuda-tile is installed. Raises ``OutsideRange`` when the tileiras is not
    known to fit and ``allow_outside`` is False."""
    found = installed() if found is None else found
    if found is None:
        return None
    version, requires = found
    req = tileiras_requirement(requires)
    fits = in_range(req, tileiras) if req is not None and tileiras else None
    out = CudaTileRelease.model_construct(version=version, requires=describe(req) if req is not None else None,
                                          tileiras=tileiras, in_range=fits, outside_range_allowed=allow_outside)
    if fits is not True and not allow_outside:
        raise OutsideRange(out)
    return CudaTileRelease.model_validate(out.model_dump())


class OutsideRange(ToolchainError):
    """The tileiras in use is not one the installed cuda-tile release declares (one line, exit 2)."""

    def __init__(self, found: CudaTileRelease):
        super().__init__(found)
        self.found = found

    def __str__(self) -> str:
        f = self.found
        if f.requires is None:
            why = "its metadata declares no tileiras range"
        elif f.tileiras is None:
            why = f"it declares {f.requires} and no tileiras was found"
        else:
            why = f"it declares {f.requires}; tileiras here is {f.tileiras}"
        return (f"cuda-tile {f.version}: {why} (fix: install a tileiras of its range, e.g. "
                f"pip install 'cuda-tile[tileiras]=={f.version}', or pass {OUTSIDE_FLAG} to run it anyway, "
                f"recorded as outside its range)")
