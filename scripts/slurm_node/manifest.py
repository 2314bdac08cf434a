"""What ``gather`` writes beside the packages it carries (``manifest.json``), and how the node reads it
back (every package by name, version and sha256)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from tileproof.records.models import Model

from .common import NodeError

GLIBC = "libc6"
MANIFEST = "manifest.json"
DEBS = "debs"


class Carried(Model):
    """One package ``gather`` kept."""

    name: str
    version: str
    file: str
    """The .deb's name under ``debs/``."""
    sha256: str
    why: str
    """``asked for``, or which kept package depends on it."""


class Left(Model):
    """One dependency ``gather`` did not carry, and why."""

    name: str
    why: str


class Manifest(Model):
    """``DIR/manifest.json``, written by ``gather``, read by ``up``."""

    manifest_version: Literal[1]
    gathered_on: str
    """The distribution the packages are from (``/etc/os-release`` PRETTY_NAME)."""
    architecture: str
    """``dpkg --print-architecture`` of the packages, e.g. ``amd64``."""
    packages: list[Carried]
    left_out: list[Left]
    glibc_at_least: str
    """The highest ``libc6 (>= X)`` any carried package asks: the node's glibc must be at least this."""
    glibc_libraries: list[str]
    """The shared objects libc6 ships (``libc.so.6``, ``libm.so.6``...): the node's glibc provides them."""


def read_manifest(folder: Path) -> Manifest:
    path = folder / MANIFEST
    try:
        return Manifest.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise NodeError(f"{path}: missing (fix: gather the packages first: python scripts/slurm_node gather "
                        f"--out {folder})") from None
    except ValueError as e:
        raise NodeError(f"{path}: not a manifest this script reads ({str(e).splitlines()[0]}) "
                        "(fix: gather again with this script)") from None
