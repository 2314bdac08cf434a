"""tileproof's sessions. Each is a few lines; the logic lives in the tileproof package.

Environments: uv builds them where it is installed (``pip install 'nox[uv]'``),
else venv; they are kept between runs (``nox -R`` also skips the install step).
Every install uses ``constraints.txt``, the lock (``nox -s lock`` rewrites it
from pyproject.toml). The light sessions (status, publish, audit, schema, lint-kernels, keygen,
sign-registry, new-lesson, slurm-node) share ONE small environment, built by the ``light`` session they
require; compile and tests share the ``toolchain`` one (the toolchain plus the test,
record and docs extras, so the README's second command installs nothing); docs, claims and the
GPU sessions each keep their own, hard-linked from uv's cache.

GPU sessions default to on only where nvidia-smi exists; on a machine without a
GPU they say so in one line and fail within seconds, before installing
anything (a skipped session would count as success); ``-- --record-no-gpu``
installs and records each program's gate instead.
"""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "uv|venv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["compile", "tests"]

HAS_GPU = shutil.which("nvidia-smi") is not None
LOCK = "constraints.txt"
LIGHT_PYTHON = "light-python.txt"
"""In nox's shared cache folder: the interpreter the ``light`` session prepared."""
TOOLCHAIN_PYTHON = "toolchain-python.txt"
"""In nox's shared cache folder: the interpreter the ``toolchain`` session prepared."""
RUFF_PATHS = ["tileproof", "tests", "noxfile.py", "kernels", "scripts"]
"""What ruff checks (kernels/ is checked, never fixed: see pyproject.toml [tool.ruff])."""
DOCS_BUILD = ["sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html", "docs", "build/docs"]
"""The documentation site (``python -m`` these), warnings as errors; ``-E`` reads every page again, so a
warning an earlier build already showed is never hidden by its saved environment."""
BESIDE_PYTEST = [["mypy"], ["ruff", "check", *RUFF_PATHS], ["tileproof", "lint-kernels"], ["tileproof", "check"],
                 DOCS_BUILD]
"""What ``nox -s tests`` runs beside pytest (``python -m`` each), one after another."""


def passthrough(session) -> bool:
    """``--no-venv``: use the interpreter as it is, install nothing."""
    return isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv)


def wheelhouse(session) -> list[str]:
    """``-- --wheelhouse DIR`` (a GPU node without network) → pip's offline options."""
    args = list(session.posargs)
    if "--wheelhouse" in args:
        return ["--no-index", "--find-links", args[args.index("--wheelhouse") + 1]]
    return []


def install(session, *reqs, locked=True, lock=LOCK) -> bool:
    """Install ``reqs`` (under ``lock``, constraints.txt by default, unless ``locked`` is False) into the
    session's venv; False when nothing was installed: with --no-venv, or with ``-R`` (``--no-install``) in a
    reused environment, as nox skips it.

    Under a lock, uv first installs from its cache alone (``from_uv_cache``)."""
    if passthrough(session) or install_skipped(session):
        return False
    args = [*wheelhouse(session), *(["-c", lock] if locked else []), *reqs]
    if not (locked and from_uv_cache(session, args)):
        session.install(*args)
    return True


def install_skipped(session) -> bool:
    """nox's ``--no-install`` in an environment it reused: what makes ``session.install`` return at once (nox
    keeps both facts on objects of its own: read the same way nox reads them, False where they are absent)."""
    config = getattr(getattr(session, "_runner", None), "global_config", None)
    return bool(getattr(config, "no_install", False) and getattr(session.virtualenv, "_reused", False))


UV_AIMING = ("UV_PYTHON", "UV_SYSTEM_PYTHON")
"""uv settings that would aim an install at another interpreter (nox drops them for its own uv calls)."""


def from_uv_cache(session, args: list[str]) -> bool:
    """``uv pip install --offline`` into the session's interpreter: True when uv's cache held everything.

    The lock pins every package installed, so the cache can only give the lock's versions (tileproof itself is
    built with the setuptools uv has cached). Online, uv asks the index again about every page it has cached
    (5.3 s of the toolchain's 6.4 s install on a warm cache here; offline 0.8 s). False when something is not
    cached (nothing is installed then) or uv is not the backend: the normal install fetches it.
    """
    if session.venv_backend != "uv":
        return False
    python = str(Path(session.bin) / "python")
    argv = [nox.virtualenv.UV, "pip", "install", "--offline", "-q", "--python", python, *args]
    env = {k: v for k, v in os.environ.items() if k not in UV_AIMING} | {"VIRTUAL_ENV": session.virtualenv.location}
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode == 0:
        session.log("installed from uv's cache (uv pip install --offline: the lock's versions, no index request)")
        return True
    session.log("not all in uv's cache: installing from the index")
    return False


def own_args(session, *drop: str) -> list[str]:
    """posargs for tileproof: nox's ``--wheelhouse DIR`` (and ``drop``) left out."""
    posargs = list(session.posargs)
    if "--wheelhouse" in posargs:
        i = posargs.index("--wheelhouse")
        del posargs[i:i + 2]
    return [a for a in posargs if a not in drop]


def tileproof(session, *args, drop=()):
    """``python -m tileproof ...`` with the session's interpreter."""
    python = sys.executable if passthrough(session) else "python"
    session.run(python, "-m", "tileproof", *args, *own_args(session, *drop))


def require_gpu(session):
    """Fail in seconds, before any install, where ``nvidia-smi -L`` lists no GPU."""
    if "--record-no-gpu" in session.posargs:
        return
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
        found = listed.returncode == 0 and "GPU " in listed.stdout
    except (OSError, subprocess.TimeoutExpired):
        found = False
    if not found:
        session.error("no GPU: nvidia-smi -L lists none; nothing installed or recorded "
                      "(-- --record-no-gpu records each program's gate instead)")


def shared_env(session, extras: str, python_file: str):
    """Install ``-e .[extras]`` into this session's environment only when pyproject or the lock changed
    since the last install (a stamp in the environment says), and tell the sessions that require this one
    its interpreter (``python_file`` in nox's shared cache folder)."""
    if not passthrough(session):
        stamp = session.env_dir / "tileproof-lock.sha256"
        inputs = extras.encode() + Path("pyproject.toml").read_bytes() + Path(LOCK).read_bytes()
        want = hashlib.sha256(inputs).hexdigest()
        if (not stamp.is_file() or stamp.read_text() != want) and install(session, "-e", f".[{extras}]" if extras
                                                                              else "."):
            stamp.write_text(want)  # not under -R: what was skipped is installed on the next run
    python = sys.executable if passthrough(session) else str(Path(session.bin) / "python")
    (session.cache_dir / python_file).write_text(python)


def shared_python(session, python_file: str) -> str:
    """The interpreter a required ``light`` or ``toolchain`` session prepared."""
    return (session.cache_dir / python_file).read_text()


@nox.session(default=False)
def light(session):
    """The one small environment the light sessions share (required by them; not run alone)."""
    shared_env(session, "", LIGHT_PYTHON)


def light_tileproof(session, *args):
    """``python -m tileproof ...`` in the environment the ``light`` session prepared."""
    session.run(shared_python(session, LIGHT_PYTHON), "-m", "tileproof", *args, *own_args(session), external=True)


@nox.session(default=False)
def toolchain(session):
    """The one environment ``compile`` and ``tests`` share: the tile toolchain (~650 MB, hard-linked from
    uv's cache) plus the test, record and docs extras (required by them; not run alone)."""
    shared_env(session, "toolchain,test,record,docs", TOOLCHAIN_PYTHON)


@nox.session(python=False, requires=["toolchain"])
def compile(session):
    """Build every program for every target (no GPU needed) and write a compile record."""
    session.run(shared_python(session, TOOLCHAIN_PYTHON), "-m", "tileproof", "compile", *own_args(session),
                external=True)


@nox.session(name="run-gpu", default=HAS_GPU)
def run_gpu(session):
    """Run every lesson program on this machine's GPU and write run records."""
    require_gpu(session)
    install(session, "-e", ".[toolchain,record,gpu]" if HAS_GPU else ".[toolchain,record]")
    tileproof(session, "run")


@nox.session(default=HAS_GPU)
def bench(session):
    """Time the course kernels against cuBLAS/cupy in the same run and write a bench record."""
    require_gpu(session)
    install(session, "-e", ".[toolchain,record,gpu]" if HAS_GPU else ".[toolchain,record]")
    tileproof(session, "bench", drop=("--record-no-gpu",))  # bench records the gates itself


@nox.session
def claims(session):
    """Check each document's claims that this machine can check (GPU-level ones where a GPU exists)."""
    install(session, "-e", ".[toolchain,gpu]" if HAS_GPU else ".[toolchain]")
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
    install(session, "-e", ".", *release_requirements(release), *(["cupy-cuda13x"] if HAS_GPU else []),
            locked=False)  # another release than the lock's
    tileproof(session, "claims")


@nox.session(name="compile-matrix")
@nox.parametrize("release", CLAIMS_RELEASES)
def compile_matrix(session, release):
    """Build every program with one toolchain release in its own venv: one compile record per release,
    so a lesson's REG/SHARED table (``res_usage``) gets one column per release (``-- --arch sm_89``)."""
    install(session, "-e", ".", *release_requirements(release), locked=False)  # another release than the lock's
    tileproof(session, "compile")


def cuda_tile_axis() -> list[str]:
    """The cuda-tile releases of the release axis besides the lock's own (pyproject.toml
    ``[tool.tileproof] cuda-tile-axis``); each has its pinned set ``locks/cuda-tile-<release>.txt``."""
    import tomllib

    with open(Path(__file__).with_name("pyproject.toml"), "rb") as f:
        return list(tomllib.load(f)["tool"]["tileproof"]["cuda-tile-axis"])


CUDA_TILE_AXIS = cuda_tile_axis()


def axis_set(release: str) -> str:
    """The pinned set of one release of the axis (docs/install.md, "cuda-tile releases (the release axis)")."""
    return f"locks/cuda-tile-{release}.txt"


def axis_requirements() -> list[str]:
    """What a release's environment installs beside tileproof: the ``toolchain`` extra's packages by name
    (cuda-tile among them; its set pins each one, to the CUDA release inside that cuda-tile's range)."""
    import tomllib
    from packaging.requirements import Requirement

    with open("pyproject.toml", "rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"]["toolchain"]
    return [Requirement(r).name for r in extra]


@nox.session(name="run-gpu-release", default=False)
@nox.parametrize("cuda_tile", CUDA_TILE_AXIS)
def run_gpu_release(session, cuda_tile):
    """Run the Python programs with one cuda-tile release of the axis, in its own environment from its set."""
    require_gpu(session)
    install(session, "-e", ".[record,gpu]" if HAS_GPU else ".[record]", *axis_requirements(),
            lock=axis_set(cuda_tile))
    tileproof(session, "run", "--python-only")


@nox.session(name="compile-release", default=False)
@nox.parametrize("cuda_tile", CUDA_TILE_AXIS)
def compile_release(session, cuda_tile):
    """Export the Python kernels with one cuda-tile release of the axis (no GPU): a compile record per release."""
    install(session, "-e", ".", *axis_requirements(), lock=axis_set(cuda_tile))
    tileproof(session, "compile", "--python-only")


@nox.session(python=False, requires=["light"])
def publish(session):
    """Flip a lesson to published when its evidence allows (nox -s publish -- LESSON)."""
    light_tileproof(session, "publish")


@nox.session(python=False, requires=["light"])
def status(session):
    """Show lesson x program x newest evidence."""
    light_tileproof(session, "status")


@nox.session(python=False, requires=["light"])
def audit(session):
    """Check every record, transcript and published lesson.

    Reports are written only when asked: ``-- --report-dir DIR`` or ``--update-committed-report``.
    """
    light_tileproof(session, "audit")


@nox.session(python=False, requires=["light"])
def schema(session):
    """Regenerate schema/, cpp/tolerances.h and AUTHORING.md's front-matter reference from their sources."""
    light_tileproof(session, "schema")


@nox.session(python=False, requires=["light"])
def keygen(session):
    """Make this runner's signing key outside the repository (nox -s keygen -- [--key PATH] [--owner NAME])."""
    light_tileproof(session, "keygen")


@nox.session(name="sign-registry", default=False, python=False, requires=["light"])
def sign_registry(session):
    """Endorse a change of lessons/runners.yaml with a key the committed registry trusts (docs/keys.md)."""
    light_tileproof(session, "sign-registry")


@nox.session(name="lint-kernels", python=False, requires=["light"])
def lint_kernels(session):
    """Static checks over kernels/ for known cuTile mistakes."""
    light_tileproof(session, "lint-kernels")


@nox.session(name="new-lesson", default=False, python=False, requires=["light"])
def new_lesson(session):
    """Scaffold a draft lesson: ``nox -s new-lesson -- ID [--python NAME] [--cpp NAME]`` (docs/authoring.md)."""
    light_tileproof(session, "new-lesson")


@nox.session
def fleet(session):
    """Lessons x GPU kinds through Slurm or CI runners, merged (nox -s fleet -- submit --cluster FILE --wait)."""
    install(session, "-e", ".")
    tileproof(session, "fleet")


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


UV_COMPILE = ["pip", "compile", "-q", "--universal", "--python-version", "3.10", "--custom-compile-command",
              "nox -s lock"]


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
