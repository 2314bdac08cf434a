"""A course's own settings: ``[tool.tileproof]`` in the ``pyproject.toml`` at its root.

tileproof knows no course: the targets a course builds for, the cuda-tile releases of its release axis and the
toolchain releases its claims are checked against are the course's to say, here. Read through one typed model
(:class:`CourseSettings`); a bad value is one line naming the file, the key, what was expected and the fix. A
course without the file or the table gets the defaults (no targets: ``compile`` then needs ``--arch``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

from pydantic import ConfigDict, Field, ValidationError

from tileproof.records.base import Model
from tileproof.records.errors import RecordError
from tileproof.records.safe_read import read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package (a dependency there)
    import tomli as tomllib

PYPROJECT = "pyproject.toml"
TABLE = "[tool.tileproof]"

Target = Annotated[str, Field(pattern=r"^sm_[0-9]+[a-z]?$")]
Release = Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+){1,2}$")]
CudaRelease = Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+$")]


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class CourseSettings(Model):
    """``[tool.tileproof]``: what this course builds for and checks against (keys in kebab-case)."""

    model_config = ConfigDict(alias_generator=_kebab, populate_by_name=True)

    targets: list[Target] = Field(default=[])
    """What ``compile`` builds every program for without ``--arch`` (``["sm_80", "sm_90"]``)."""
    cuda_tile_axis: list[Release] = Field(default=[])
    """The release axis: the cuda-tile releases the Python programs are also exported and run with, besides the one
    the lock pins; each has its pinned set ``locks/cuda-tile-<release>.txt`` (``nox -s lock`` writes them)."""
    toolchain_releases: list[CudaRelease] = Field(default=[])
    """CUDA toolchain releases (``major.minor``) every claim is checked and every program built against, one
    environment each (``nox -s claims-matrix``, ``nox -s compile-matrix``)."""


EXAMPLES = {"targets": 'targets = ["sm_80", "sm_90"]', "cuda_tile_axis": 'cuda-tile-axis = ["1.5.0", "1.6.0"]',
            "toolchain_releases": 'toolchain-releases = ["13.3", "13.4"]'}
"""Each key written as it should be: the fix a bad value gets."""


def _key(loc: tuple) -> str:
    """A pydantic error location as ``cuda-tile-axis[0]``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load(root: Path | str) -> CourseSettings:
    """The course's settings; the defaults where ``pyproject.toml`` or its ``[tool.tileproof]`` table is absent."""
    root = Path(root)
    if not (root / PYPROJECT).is_file():
        return CourseSettings()
    text = read_text(root, PYPROJECT, "settings")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise RecordError(PYPROJECT, "", f"not valid TOML ({e})", "fix the TOML syntax") from None
    table = data.get("tool", {}).get("tileproof", {}) if isinstance(data.get("tool"), dict) else {}
    if not isinstance(table, dict):
        raise RecordError(PYPROJECT, TABLE, "expected a table", "write it as [tool.tileproof] with key = value lines")
    try:
        return CourseSettings.model_validate(table)
    except ValidationError as e:
        err = e.errors()[0]
        known = ", ".join(_kebab(n) for n in CourseSettings.model_fields)
        field = next((n for n in CourseSettings.model_fields if _kebab(n) == err["loc"][0] or n == err["loc"][0]), "")
        fix = f"write it as {EXAMPLES[field]}" if field in EXAMPLES else f"the keys are {known}"
        raise RecordError(PYPROJECT, f"{TABLE} {_key(tuple(err['loc']))}", err["msg"], fix) from None
