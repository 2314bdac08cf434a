"""tileproof's sessions. Each is a few lines; the logic lives in the tileproof package.

GPU sessions default to on only where nvidia-smi exists; run on a machine without
a GPU they say so in one line and fail (a skipped session would count as success).
"""

import shutil
import sys

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["compile", "tests"]

HAS_GPU = shutil.which("nvidia-smi") is not None
TOOLCHAIN = ".[toolchain]"
RUFF_PATHS = ["tileproof", "tests", "noxfile.py", "kernels"]
"""What ruff checks (kernels/ is checked, never fixed: see pyproject.toml [tool.ruff])."""


def install(session, *reqs):
    """Install into the session's venv; with --no-venv use the interpreter as it is.

    ``-- --wheelhouse DIR`` installs from a local wheel folder with --no-index
    (a GPU node without network).
    """
    if isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv):
        return
    args = list(session.posargs)
    if "--wheelhouse" in args:
        wheels = args[args.index("--wheelhouse") + 1]
        session.install("--no-index", "--find-links", wheels, *reqs)
    else:
        session.install(*reqs)


def tileproof(session, *args):
    """``python -m tileproof ...`` with the session's interpreter (``--wheelhouse DIR`` is nox's, not passed on)."""
    python = sys.executable if isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv) else "python"
    posargs = list(session.posargs)
    if "--wheelhouse" in posargs:
        i = posargs.index("--wheelhouse")
        del posargs[i:i + 2]
    session.run(python, "-m", "tileproof", *args, *posargs)


@nox.session
def compile(session):
    """Build every program for every target (no GPU needed) and write a compile record."""
    install(session, "-e", TOOLCHAIN)
    tileproof(session, "compile")


@nox.session(name="run-gpu", default=HAS_GPU)
def run_gpu(session):
    """Run every lesson program on this machine's GPU and write run records."""
    install(session, "-e", TOOLCHAIN, *(["cupy-cuda13x"] if HAS_GPU else []))
    tileproof(session, "run")


@nox.session(default=HAS_GPU)
def bench(session):
    """Time the course kernels against cuBLAS/cupy in the same run and write a bench record."""
    install(session, "-e", TOOLCHAIN, *(["cupy-cuda13x"] if HAS_GPU else []))
    tileproof(session, "bench")


@nox.session
def claims(session):
    """Check each document's claims that this machine can check (GPU-level ones where a GPU exists)."""
    install(session, "-e", TOOLCHAIN, *(["cupy-cuda13x"] if HAS_GPU else []))
    tileproof(session, "claims")


CLAIMS_RELEASES = ["13.3", "13.4", "13.5"]
"""Toolchain releases each claim is checked against (``nox -s "claims-matrix(release='13.3')"``).
13.2 and older do not work for the claims: their nvcc has no -enable-tile and no
crt/cuda_tile.h, and tileiras 13.2 refuses cuda-tile 1.7's sm_90 target."""


def release_requirements(release):
    """The ``toolchain`` extra of pyproject.toml with its ``==`` pins moved to ``release``.

    The pinned packages (nvcc, crt, cuobjdump, tileiras, nvvm, runtime) come from the extra,
    so the package list has one source; extras of the others (cuda-tile's ``tileiras``,
    which pins a CUDA range of its own) are dropped.
    """
    import tomllib
    from packaging.requirements import Requirement

    with open("pyproject.toml", "rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"]["toolchain"]
    reqs = [Requirement(r) for r in extra]
    pinned = [f"{r.name}=={release}.*" for r in reqs if any(s.operator == "==" for s in r.specifier)]
    return pinned + [f"{r.name}{r.specifier}" for r in reqs if not any(s.operator == "==" for s in r.specifier)]


@nox.session(name="claims-matrix")
@nox.parametrize("release", CLAIMS_RELEASES)
def claims_matrix(session, release):
    """Check every claim against one toolchain release in its own venv: one claims record per release."""
    install(session, "-e", ".", *release_requirements(release), *(["cupy-cuda13x"] if HAS_GPU else []))
    tileproof(session, "claims")


@nox.session
def publish(session):
    """Flip a lesson to published when its evidence allows (nox -s publish -- LESSON)."""
    install(session, "-e", ".")
    tileproof(session, "publish")


@nox.session
def status(session):
    """Show lesson x program x newest evidence."""
    install(session, "-e", ".")
    tileproof(session, "status")


@nox.session
def audit(session):
    """Check every record, transcript and published lesson.

    Reports are written only when asked: ``-- --report-dir DIR`` or ``--update-committed-report``.
    """
    install(session, "-e", ".")
    tileproof(session, "audit")


@nox.session
def schema(session):
    """Regenerate schema/ and cpp/tolerances.h from their single sources."""
    install(session, "-e", ".")
    tileproof(session, "schema")


@nox.session
def keygen(session):
    """Make this runner's signing key outside the repository (nox -s keygen -- [--key PATH] [--owner NAME])."""
    install(session, "-e", ".")
    tileproof(session, "keygen")


@nox.session(name="lint-kernels")
def lint_kernels(session):
    """Static checks over kernels/ for known cuTile mistakes."""
    install(session, "-e", ".")
    tileproof(session, "lint-kernels")


@nox.session
def tests(session):
    """Run the test suite (CPU only; GPU tests skip with a reason), mypy and ruff.

    The import contract (pyproject.toml [tool.importlinter]) runs inside the suite,
    in tests/test_architecture.py. mypy and ruff read their settings from pyproject.toml.
    """
    install(session, "-e", ".[toolchain,test]")
    session.run("python", "-m", "mypy")
    session.run("python", "-m", "ruff", "check", *RUFF_PATHS)
    session.run("python", "-m", "tileproof", "lint-kernels")
    session.run("python", "-m", "pytest", *session.posargs)
