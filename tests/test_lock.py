"""constraints.txt (the lock every nox session installs with) agrees with pyproject.toml, and so does each
cuda-tile release's pinned set of the release axis (``locks/cuda-tile-<release>.txt``).

When this fails after a dependency was added or changed in pyproject.toml: run
``nox -s lock`` and commit constraints.txt and locks/.
"""

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tileproof.records import lock as lock_file
from tileproof.toolchain.find import PACKAGES

try:
    import tomllib
except ImportError:  # Python 3.10: pytest brings tomli
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "constraints.txt"
FIX = "run nox -s lock and commit constraints.txt and locks/"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
AXIS: list[str] = PYPROJECT["tool"]["tileproof"]["cuda-tile-axis"]
SETS = {release: REPO / "locks" / f"cuda-tile-{release}.txt" for release in AXIS}
"""Each release of the axis → its pinned set (noxfile.axis_set)."""


def declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        reqs += extra
    return [Requirement(r) for r in reqs]


def pins(lock: Path = LOCK) -> dict[str, list[Requirement]]:
    return lock_file.pins(lock.read_text(), lock.name)


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
@pytest.mark.parametrize("lock", [LOCK, *SETS.values()], ids=lambda p: p.name)
def test_the_toolchain_is_one_release(name, lock):
    """nvcc, tileiras, nvvm, crt, runtime, cuobjdump and nvjitlink: one major.minor in the lock and in each set."""
    locked = pins(lock)
    release = {pinned_version(p).release[:2] for p in locked["nvidia-cuda-nvcc"]}
    assert len(release) == 1
    got = {pinned_version(p).release[:2] for p in locked[name]}
    assert got == release, f"constraints.txt: {name} is {got}, nvcc is {release} (pin {name} in pyproject.toml; {FIX})"


# --- the release axis: one pinned set per cuda-tile release ---------------------------------------------------


def test_every_release_of_the_axis_has_its_set_and_no_set_is_left_over():
    assert AXIS, "pyproject.toml [tool.tileproof] cuda-tile-axis lists no release"
    assert sorted(p.name for p in (REPO / "locks").glob("*.txt")) == sorted(p.name for p in SETS.values()), FIX
    lock_release = pinned_version(pins()["cuda-tile"][0])
    assert str(lock_release) not in AXIS, "the lock's own release needs no set: constraints.txt is it"


@pytest.mark.parametrize("release", AXIS)
def test_each_set_pins_its_release_exactly_and_says_how_to_refresh_it(release):
    lock = SETS[release]
    assert "nox -s lock" in lock.read_text().splitlines()[1]
    locked = pins(lock)
    assert [str(pinned_version(p)) for p in locked["cuda-tile"]] == [release]
    assert "tileproof" not in locked
    for reqs in locked.values():
        for pin in reqs:
            pinned_version(pin)


@pytest.mark.parametrize("release", AXIS)
def test_each_set_pins_what_its_environment_installs(release):
    """tileproof's own dependencies and the record and gpu extras within their ranges, and every package of the
    toolchain extra (by name: the set moves the toolchain's release to the one its cuda-tile declares)."""
    project = PYPROJECT["project"]
    locked = pins(SETS[release])
    for line in [*project["dependencies"], *project["optional-dependencies"]["record"],
                 *project["optional-dependencies"]["gpu"]]:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name in locked, f"{SETS[release].name}: {name} is not pinned ({FIX})"
        assert all(req.specifier.contains(pinned_version(p), prereleases=True) for p in locked[name])
    for line in project["optional-dependencies"]["toolchain"]:
        assert canonicalize_name(Requirement(line).name) in locked, f"{SETS[release].name}: {line} ({FIX})"


def test_the_release_sessions_install_each_set(monkeypatch):
    """``nox -s "run-gpu-release(cuda_tile='1.5.0')"`` and compile-release: one parametrisation per release of
    the axis, each installing under its own set, the toolchain extra's packages by name."""
    import conftest

    nox_file = conftest.noxfile()
    monkeypatch.chdir(REPO)
    assert nox_file.CUDA_TILE_AXIS == AXIS
    assert [REPO / nox_file.axis_set(r) for r in AXIS] == list(SETS.values())
    names = nox_file.sessions.axis_requirements()
    assert "cuda-tile" in names
    assert "nvidia-cuda-tileiras" in names
    assert not any("=" in n or "[" in n for n in names)


@pytest.mark.parametrize("lock", [LOCK, *SETS.values()], ids=lambda p: p.name)
def test_every_pin_carries_the_hashes_of_its_files(lock):
    """``nox -s lock`` writes hashes (uv checks every file it installs against them), and the cuda-tile wheels'
    are what the release axis's digest-named folders are checked against (``records.lock.wheel_hashes``)."""
    text = lock.read_text()
    entries = list(lock_file._entries(text))
    assert entries
    for n, body, hashes in entries:
        assert hashes and all(len(h) == 64 for h in hashes), f"{lock.name}: line {n}: {body} has no sha256 ({FIX})"
    release = str(pinned_version(pins(lock)["cuda-tile"][0]))
    assert {v for v, _ in lock_file.wheel_hashes(REPO)} >= {release}
