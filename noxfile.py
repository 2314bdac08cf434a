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
    """Check every record, transcript and published lesson; write evidence/AUDIT.md and audit.html."""
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
def fleet(session):
    """Lessons x GPU kinds through Slurm or CI runners, merged (nox -s fleet -- submit --cluster FILE --wait)."""
    install(session, "-e", ".")
    tileproof(session, "fleet")


@nox.session
def tests(session):
    """Run the test suite (CPU only; GPU tests skip with a reason)."""
    install(session, "-e", ".[toolchain,test]")
    session.run("python", "-m", "tileproof", "lint-kernels")
    session.run("python", "-m", "pytest", *session.posargs)
