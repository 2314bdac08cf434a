"""This course's sessions: tileproof's own (``tileproof.sessions``, the noxfile ``tileproof init`` writes for any
course), and this repository's extras: ``toolchain`` and ``tests`` with tileproof's own test suite, mypy, ruff and
the docs build; ``lint``, ``docs``, ``build`` (the wheel), ``lock`` (the lock of tileproof's own extras) and
``slurm-node``.

nox runs in an interpreter that has tileproof (the README's Quick start installs this checkout, editable, beside
nox), so the sessions install this checkout too (``-e .``): what runs here is what a new course gets.
"""

import os
import subprocess
import sys
from pathlib import Path

import nox

try:
    from tileproof import sessions
except ImportError as e:  # nox from an environment without tileproof (a .nox-tool made before it had one)
    raise SystemExit(f"noxfile.py: {e}: nox runs where tileproof is not installed "
                     "(fix: .nox-tool/bin/pip install -e . beside nox)") from None

from tileproof.sessions import (  # noqa: E402
    LIGHT_PYTHON,
    LOCK,
    TOOLCHAIN_PYTHON,
    UV_COMPILE,
    axis_set,
    install,
    release_requirements,
    shared_env,
    shared_python,
)

OWN = ("toolchain", "tests", "lock")
"""tileproof's sessions this repository defines itself (below)."""
sessions.register(leave_out=OWN)
CUDA_TILE_AXIS = sessions.course.load(Path(__file__).parent).cuda_tile_axis

RUFF_PATHS = ["tileproof", "tests", "noxfile.py", "kernels", "scripts"]
"""What ruff checks (kernels/ is checked, never fixed: see pyproject.toml [tool.ruff])."""
DOCS_BUILD = ["sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html", "docs", "build/docs"]
"""The documentation site (``python -m`` these), warnings as errors; ``-E`` reads every page again, so a
warning an earlier build already showed is never hidden by its saved environment."""
BESIDE_PYTEST = [["mypy"], ["ruff", "check", *RUFF_PATHS], ["tileproof", "lint-kernels"], ["tileproof", "check"],
                 DOCS_BUILD]
"""What ``nox -s tests`` runs beside pytest (``python -m`` each), one after another."""


@nox.session(default=False)
def toolchain(session):
    """The one environment ``compile`` and ``tests`` share: the tile toolchain (~650 MB, hard-linked from
    uv's cache) plus the test, record and docs extras (required by them; not run alone)."""
    shared_env(session, sessions.tileproof_spec("toolchain,test,record,docs"), TOOLCHAIN_PYTHON)


@nox.session(python=False)
def build(session):
    """Build tileproof's wheel into dist/ (``uv build``; the version is ``tileproof.__version__``): what
    ``pip install`` takes to make any git repository a course (``tileproof init``)."""
    if not nox.virtualenv.HAS_UV:
        session.error("nox -s build needs uv: pip install 'nox[uv]' (or pipx install uv)")
    session.run(nox.virtualenv.UV, "build", "--wheel", "-o", "dist", *session.posargs, external=True)


@nox.session(name="slurm-node", default=False, python=False, requires=["light"])
def slurm_node(session):
    """A single-node Slurm for a GPU host without network (docs/fleet-slurm-gpu.md): ``-- gather --out DIR`` here,
    ``-- up --debs DIR --state DIR`` / ``-- down --state DIR`` on the node (scripts/slurm_node)."""
    session.run(shared_python(session, LIGHT_PYTHON), "scripts/slurm_node", *session.posargs, external=True)


@nox.session(python=False, requires=["toolchain"])
def tests(session):
    """Run the test suite (CPU only; GPU tests skip with a reason) on every core, with mypy, ruff, lint-kernels,
    the lesson check and the docs build beside it; fails when any of them fails. With a selection (``-- FILE``,
    a test id or ``-k``/``-m``: ``selects``) it runs that part of the suite alone, in one process for one file;
    the checks then run in ``nox -s lint`` and ``nox -s docs``.

    The import contract (pyproject.toml [tool.importlinter]) runs inside the suite,
    in tests/test_architecture.py. mypy and ruff read their settings from pyproject.toml.
    """
    python = shared_python(session, TOOLCHAIN_PYTHON)
    env = bytecode_cache(session)
    posargs = list(session.posargs)

    def pytest():
        session.run(python, "-m", "pytest", *pytest_options(posargs), *posargs, external=True, env=env)

    if selects(posargs):
        session.log("a selection: pytest alone (nox -s lint and nox -s docs run the checks beside it)")
        pytest()
        return
    Beside(session, [[python, "-m", *argv] for argv in BESIDE_PYTEST], env).around(pytest)


@nox.session(python=False, requires=["toolchain"])
def lint(session):
    """What ``nox -s tests`` runs beside the whole suite but the docs build (``nox -s docs``): mypy, ruff,
    lint-kernels and the lesson check, one after another; fails when any of them fails."""
    python = shared_python(session, TOOLCHAIN_PYTHON)
    env = bytecode_cache(session)
    failed = []
    for argv in BESIDE_PYTEST:
        if argv != DOCS_BUILD:
            try:
                session.run(python, "-m", *argv, external=True, env=env)
            except nox.command.CommandFailed:
                failed.append(" ".join(argv))
    if failed:
        session.error(f"failed: {', '.join(failed)}")


SELECTING = ("-k", "-m", "--deselect", "--lf", "--last-failed", "--sw", "--stepwise")
"""pytest options that choose part of the suite."""
TAKES_VALUE = ("-k", "-m", "-n", "-p", "-o", "-c", "-W", "--deselect", "--durations", "--maxfail", "--dist", "--tb",
               "--basetemp", "--rootdir", "--confcutdir", "--ignore", "--ignore-glob")
"""pytest options whose value is the next argument (it is no test path)."""


def test_paths(posargs: list[str]) -> list[str]:
    """The positional arguments of ``nox -s tests -- ARGS``: test files, folders or ids (``tests/test_x.py::t``)."""
    out, value = [], False
    for a in posargs:
        if not value and not a.startswith("-"):
            out.append(a)
        value = a in TAKES_VALUE
    return out


def selects(posargs: list[str]) -> bool:
    """Whether ``nox -s tests -- ARGS`` chooses part of the suite: a test file, folder or id, or an option of
    ``SELECTING`` (``-k EXPR``, also written ``-kEXPR``)."""
    chosen = [a for a in posargs if a in SELECTING or a[:2] in ("-k", "-m") and len(a) > 2]
    return bool(chosen or test_paths(posargs))


def one_file(posargs: list[str]) -> bool:
    """Whether the selection's test paths all lie in one ``.py`` file."""
    files = {a.split("::")[0] for a in test_paths(posargs)}
    return len(files) == 1 and next(iter(files)).endswith(".py")


class Beside:
    """Commands run one after another in a thread while the session runs pytest; ``report`` waits for them,
    prints each one's output under its command line, and fails the session when one failed or could not start.

    They take about 8 s on one core (mypy 2.8 s uncached, the docs build about 4 s) and pytest keeps both cores
    busy for about 40 s, so beside it most of that time overlaps pytest.
    """

    def __init__(self, session, commands: list[list[str]], env: dict[str, str]):
        import threading

        self.session, self.commands, self.done = session, commands, []
        self.env = {**os.environ, **env}
        self.thread = threading.Thread(target=self._run_all)
        self.thread.start()

    def _run_all(self):
        for argv in self.commands:
            try:
                done = subprocess.run(argv, env=self.env, capture_output=True, text=True)
                self.done.append((argv, done.returncode, done.stdout + done.stderr))
            except OSError as e:  # it never started: a failure of its own, never a silent pass
                self.done.append((argv, None, f"{argv[0]}: {e}\n"))

    def around(self, main):
        """Run ``main`` (pytest) while the commands run, then ``report``. When ``main`` fails or is interrupted,
        that is what the session ends with, after the commands' output (a failed command does not replace it)."""
        try:
            main()
        except BaseException:
            self.report(fail=False)
            raise
        self.report()

    def report(self, fail: bool = True):
        """Print every command's outcome; with ``fail``, end the session when one did not exit 0."""
        self.thread.join()
        failed = []
        for argv, code, output in self.done:
            said = "did not start" if code is None else f"exit {code}"
            self.session.log(" ".join(["python", *argv[1:]]) + f"  (beside pytest: {said})")
            sys.stdout.write(output)
            if code != 0:
                failed.append(" ".join(argv[2:]))
        failed += [" ".join(argv[2:]) + " (never ran)" for argv in self.commands[len(self.done):]]
        if failed and fail:
            self.session.error(f"failed beside pytest: {', '.join(failed)}")


def pytest_options(posargs: list[str]) -> list[str]:
    """What ``nox -s tests -- ARGS`` gives pytest before ARGS: for a selection within one file (``one_file``), one
    process, with hypothesis' pytest plugin left out unless the file names hypothesis (the plugin imports all of
    hypothesis as the run ends: a quarter of a small file's 0.7 s of CPU); else ``pytest_parallel``."""
    if one_file(posargs):
        path = Path(test_paths(posargs)[0].split("::")[0])
        uses = not path.is_file() or "hypothesis" in path.read_text(encoding="utf-8", errors="replace")
        return [] if uses else ["-p", "no:hypothesispytest"]
    return pytest_parallel()


def pytest_parallel() -> list[str]:
    """pytest-xdist's options: a worker per core plus one, each test file on one worker (a module's fixtures
    are built once), the files in the order tests/conftest.py gives them (the longest first).

    The extra worker fills the time tests spend waiting (deadlines, a Slurm cluster, a browser): on two
    cores the suite took 40 s with three workers, 45 s with two. Arguments after ``--`` come after these.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return ["-n", str(cores + 1), "--dist", "loadfile", "--no-loadscope-reorder"]


def bytecode_cache(session) -> dict[str, str]:
    """Every Python process of the session keeps its compiled bytecode in ``.nox/.cache/pycache``.

    uv installs no bytecode, and where PYTHONDONTWRITEBYTECODE is set none is ever written:
    each of the suite's few hundred Python processes compiled pydantic, numpy, hypothesis and
    tileproof from source again (the suite took 73 s instead of 55 s on two cores). The
    prefix keeps that cache out of the source tree, which is what that setting asks for.
    """
    return {"PYTHONPYCACHEPREFIX": str((Path(session.cache_dir) / "pycache").resolve()), "PYTHONDONTWRITEBYTECODE": ""}


@nox.session
def docs(session):
    """Build the documentation site (docs/) into build/docs/, warnings as errors."""
    install(session, "-e", ".[docs]")
    session.run("python", "-m", *DOCS_BUILD)


@nox.session(python=False)
def lock(session):
    """Rewrite constraints.txt from pyproject.toml, and one pinned set per cuda-tile release of the axis
    (locks/cuda-tile-<release>.txt, its toolchain at the newest CUDA release inside that release's tileiras
    range, which the index resolves from its metadata) (-- --upgrade to take new releases)."""
    if not nox.virtualenv.HAS_UV:
        session.error("nox -s lock needs uv: pip install 'nox[uv]' (or pipx install uv)")
    from packaging.requirements import Requirement

    uv = nox.virtualenv.UV
    session.run(uv, *UV_COMPILE, "pyproject.toml", "--all-extras", "-o", LOCK, *session.posargs, external=True)
    tmp = Path(session.create_tmp())
    for release in CUDA_TILE_AXIS:
        (tmp / "tileiras.in").write_text(f"cuda-tile[tileiras]=={release}\n")
        resolved = session.run(uv, *UV_COMPILE, str(tmp / "tileiras.in"), "--no-header", "--no-annotate",
                               silent=True, external=True)
        cuda = next(line.split("==")[1].rsplit(".", 1)[0] for line in resolved.splitlines()
                    if line.startswith("nvidia-cuda-tileiras=="))
        pins = [r for r in release_requirements(cuda) if Requirement(r).name != "cuda-tile"]
        (tmp / "set.in").write_text("\n".join([f"cuda-tile=={release}", *pins]) + "\n")
        Path("locks").mkdir(exist_ok=True)
        session.run(uv, *UV_COMPILE, "pyproject.toml", str(tmp / "set.in"), "--extra", "record", "--extra", "gpu",
                    "-o", axis_set(release), *session.posargs, external=True)
