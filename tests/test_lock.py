"""constraints.txt (the lock every nox session installs with) agrees with pyproject.toml.

When this fails after a dependency was added or changed in pyproject.toml: run
``nox -s lock`` and commit constraints.txt.
"""

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tileproof.toolchain.find import PACKAGES

try:
    import tomllib
except ImportError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "constraints.txt"
FIX = "run nox -s lock and commit constraints.txt"


def declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        reqs += extra
    return [Requirement(r) for r in reqs]


def pins() -> dict[str, list[Requirement]]:
    out: dict[str, list[Requirement]] = {}
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            req = Requirement(line)
            out.setdefault(canonicalize_name(req.name), []).append(req)
    return out


def pinned_version(req: Requirement) -> Version:
    (spec,) = req.specifier
    assert spec.operator == "==", f"constraints.txt: {req}: expected an exact pin ({FIX})"
    return Version(spec.version)


def test_lock_says_how_to_refresh_it():
    assert "nox -s lock" in LOCK.read_text().splitlines()[1]


def test_every_declared_dependency_is_pinned_within_its_range():
    locked = pins()
    for req in declared():
        name = canonicalize_name(req.name)
        assert name in locked, f"constraints.txt: {name} (from pyproject.toml) is not pinned ({FIX})"
        for pin in locked[name]:
            assert req.specifier.contains(pinned_version(pin), prereleases=True), \
                f"constraints.txt: {pin} is outside pyproject.toml's {req} ({FIX})"


def test_every_pin_is_exact_and_tileproof_itself_is_not_pinned():
    locked = pins()
    assert "tileproof" not in locked
    for reqs in locked.values():
        for pin in reqs:
            pinned_version(pin)


@pytest.mark.parametrize("name", [*PACKAGES, "nvidia-nvjitlink"])
def test_the_toolchain_is_one_release(name):
    """nvcc, tileiras, nvvm, crt, runtime, cuobjdump and nvjitlink: one major.minor in the lock."""
    locked = pins()
    release = {pinned_version(p).release[:2] for p in locked["nvidia-cuda-nvcc"]}
    assert len(release) == 1
    got = {pinned_version(p).release[:2] for p in locked[name]}
    assert got == release, f"constraints.txt: {name} is {got}, nvcc is {release} (pin {name} in pyproject.toml; {FIX})"
