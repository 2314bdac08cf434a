"""tileproof's nox sessions, for any course: a course's ``noxfile.py`` imports this module and calls
:func:`register` (``tileproof init`` writes that noxfile), so what every course runs is this one file.

Environments: uv builds them where it is installed (``pip install 'nox[uv]'``), else venv; they are kept between
runs (``nox -R`` also skips the install step). Every install uses the course's lock, ``constraints.txt``
(``nox -s lock`` rewrites it), and installs the same tileproof nox imported this module from
(:func:`tileproof_spec`: an editable checkout, a wheel file, or the version from the index). The light sessions
(status, publish, audit, schema, check, lint-kernels, keygen, sign-registry, verify, new-lesson) share ONE small
environment, built by the ``light`` session they require; compile and tests share the ``toolchain`` one; the GPU
sessions, claims and fleet each keep their own, hard-linked from uv's cache.

GPU sessions default to on only where nvidia-smi exists; on a machine without a GPU they say so in one line and
fail within seconds, before installing anything (a skipped session would count as success); ``-- --record-no-gpu``
installs and records each program's gate instead.

The course's settings (``pyproject.toml`` ``[tool.tileproof]``, ``records.course``) give the release axis and the
toolchain releases the parametrized sessions run over.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata as md
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import unquote, urlparse

import nox
from packaging.requirements import Requirement

from tileproof.records import course
from tileproof.runner.query import QueryError, ask

NEEDS_NOX = ">=2024.10.9"
HAS_GPU = shutil.which("nvidia-smi") is not None
LOCK = "constraints.txt"
"""The course's lock: every session installs under it."""
LIGHT_PYTHON = "light-python.txt"
"""In nox's shared cache folder: the interpreter the ``light`` session prepared."""
TOOLCHAIN_PYTHON = "toolchain-python.txt"
"""In nox's shared cache folder: the interpreter the ``toolchain`` session prepared."""
COURSE_TEST_REQUIREMENTS = ["pytest"]
"""What the course's ``toolchain`` environment adds for the course's own tests (``tests/``)."""
DIST = "tileproof"


# --- how a session installs -----------------------------------------------------------------


def passthrough(session) -> bool:
    """``--no-venv``: use the interpreter as it is, install nothing."""
    return isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv)


def wheelhouse(session) -> list[str]:
    """``-- --wheelhouse DIR`` (a GPU node without network) → pip's offline options."""
    args = list(session.posargs)
    if "--wheelhouse" in args:
        return ["--no-index", "--find-links", args[args.index("--wheelhouse") + 1]]
    return []


def tileproof_spec(extras: str = "") -> list[str]:
    """How a session installs the tileproof this module was imported from, with ``extras``: ``-e DIR[extras]``
    for an editable install or a checkout (``.`` when it is the course itself), ``tileproof[extras] @ URL`` for
    a wheel installed from a file, else ``tileproof[extras]==VERSION`` from the index."""
    bracket = f"[{extras}]" if extras else ""
    here = Path(__file__).resolve().parent.parent
    try:
        dist: md.Distribution | None = md.distribution(DIST)
    except md.PackageNotFoundError:
        dist = None
    url = json.loads((dist.read_text("direct_url.json") if dist else None) or "{}")
    if dist is None or url.get("dir_info", {}).get("editable"):  # a checkout on sys.path, or an editable install
        src = Path(unquote(urlparse(url["url"]).path)) if url.get("url") else here
        return ["-e", f"{'.' if src.resolve() == Path.cwd().resolve() else src}{bracket}"]
    if str(url.get("url", "")).startswith("file:"):
        return [f"{DIST}{bracket} @ {url['url']}"]
    return [f"{DIST}{bracket}=={dist.version}"]


def install(session, *reqs, locked=True, lock=LOCK) -> bool:
    """Install ``reqs`` (under ``lock``, constraints.txt by default, unless ``locked`` is False) into the
    session's venv; False when nothing was installed: with --no-venv, or with ``-R`` (``--no-install``) in a
    reused environment, as nox skips it.

    Under a lock, uv first installs from its cache alone (``from_uv_cache``)."""
    if passthrough(session) or install_skipped(session):
        return False
    if locked and session.venv_backend not in ("uv", "none"):
        lock = pip_lock(session, lock)
    args = [*wheelhouse(session), *(["-c", lock] if locked else []), *reqs]
    if not (locked and from_uv_cache(session, args)):
        session.install(*args)
    return True


def pip_lock(session, lock: str) -> str:
    """The lock as pip can take it beside an editable install: a copy without its ``--hash`` options, in the
    session's temporary folder. A hash anywhere puts pip in hash-checking mode, which refuses an editable install
    ("no single file to hash") and takes no hash from a constraints file; so with pip the lock pins versions only,
    and uv (the default backend) is what checks every file against the lock's hashes."""
    kept = [line.rstrip().removesuffix("\\").rstrip() for line in Path(lock).read_text().splitlines()
            if not line.strip().startswith("--hash=")]
    out = Path(session.create_tmp()) / f"pip-{Path(lock).name}"
    out.write_text("\n".join(kept) + "\n")
    session.log(f"pip: {lock} without its hashes (pip checks none beside an editable install; uv checks them)")
    return str(out)


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
    try:
        done = ask(argv, env=env, timeout=3600)
    except QueryError as e:
        session.log(f"uv's cache: {e}")
        return False
    if done.exit_code == 0:
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
        listed = ask(["nvidia-smi", "-L"], timeout=60)
        found = listed.exit_code == 0 and "GPU " in listed.text()
    except QueryError:
        found = False
    if not found:
        session.error("no GPU: nvidia-smi -L lists none; nothing installed or recorded "
                      "(-- --record-no-gpu records each program's gate instead)")


def shared_env(session, reqs: list[str], python_file: str):
    """Install ``reqs`` into this session's environment only when they, pyproject or the lock changed since the
    last install (a stamp in the environment says), and tell the sessions that require this one its interpreter
    (``python_file`` in nox's shared cache folder)."""
    if not passthrough(session):
        stamp = session.env_dir / "tileproof-lock.sha256"
        project = Path("pyproject.toml")
        inputs = "\n".join(reqs).encode() + (project.read_bytes() if project.is_file() else b"") + \
            Path(LOCK).read_bytes()
        want = hashlib.sha256(inputs).hexdigest()
        if (not stamp.is_file() or stamp.read_text() != want) and install(session, *reqs):
            stamp.write_text(want)  # not under -R: what was skipped is installed on the next run
    python = sys.executable if passthrough(session) else str(Path(session.bin) / "python")
    (session.cache_dir / python_file).write_text(python)


def shared_python(session, python_file: str) -> str:
    """The interpreter a required ``light`` or ``toolchain`` session prepared."""
    return (session.cache_dir / python_file).read_text()


def light_tileproof(session, *args):
    """``python -m tileproof ...`` in the environment the ``light`` session prepared."""
    session.run(shared_python(session, LIGHT_PYTHON), "-m", "tileproof", *args, *own_args(session), external=True)


def toolchain_extra() -> list[Requirement]:
    """The ``toolchain`` extra of the installed tileproof (its metadata): the tile toolchain's packages."""
    try:
        declared = md.requires(DIST) or []
    except md.PackageNotFoundError:
        raise nox.command.CommandFailed("tileproof is not installed where nox runs (fix: pip install -e . "
                                        "or pip install tileproof beside nox)") from None
    out = []
    for text in declared:
        req = Requirement(text)
        if req.marker is not None and req.marker.evaluate({"extra": "toolchain"}) and \
                not req.marker.evaluate({"extra": ""}):
            req.marker = None
            out.append(req)
    return out


def release_requirements(release: str) -> list[str]:
    """The ``toolchain`` extra with its ``==`` pins moved to the CUDA release ``release``.

    The pinned packages (nvcc, crt, cuobjdump, tileiras, nvvm, runtime) come from the extra, so the package list
    has one source; extras of the others (cuda-tile's ``tileiras``, which pins a CUDA range of its own) are
    dropped."""
    reqs = toolchain_extra()
    pinned = [f"{r.name}=={release}.*" for r in reqs if any(s.operator == "==" for s in r.specifier)]
    return pinned + [f"{r.name}{r.specifier}" for r in reqs if not any(s.operator == "==" for s in r.specifier)]


def axis_set(release: str) -> str:
    """The pinned set of one cuda-tile release of the release axis."""
    return f"locks/cuda-tile-{release}.txt"


def axis_requirements() -> list[str]:
    """What a release's environment installs beside tileproof: the ``toolchain`` extra's packages by name
    (cuda-tile among them; its set pins each one, to the CUDA release inside that cuda-tile's range)."""
    return [r.name for r in toolchain_extra()]


# --- the sessions ---------------------------------------------------------------------------


def light(session):
    """The one small environment the light sessions share (required by them; not run alone)."""
    shared_env(session, tileproof_spec(), LIGHT_PYTHON)


def toolchain(session):
    """The one environment ``compile`` and ``tests`` share: the tile toolchain (~650 MB, hard-linked from uv's
    cache) and pytest (required by them; not run alone)."""
    shared_env(session, [*tileproof_spec("toolchain,record"), *COURSE_TEST_REQUIREMENTS], TOOLCHAIN_PYTHON)


def compile(session):
    """Build every program for every target (no GPU needed) and write a compile record."""
    session.run(shared_python(session, TOOLCHAIN_PYTHON), "-m", "tileproof", "compile", *own_args(session),
                external=True)


def tests(session):
    """The course's checks: ``tileproof check`` and ``lint-kernels``, then pytest over ``tests/`` where the course
    has one (arguments after ``--`` go to pytest)."""
    python = shared_python(session, TOOLCHAIN_PYTHON)
    session.run(python, "-m", "tileproof", "check", external=True)
    session.run(python, "-m", "tileproof", "lint-kernels", external=True)
    if Path("tests").is_dir():
        session.run(python, "-m", "pytest", "tests", *session.posargs, external=True)
    else:
        session.log("no tests/ folder: pytest not run")


def run_gpu(session):
    """Run every lesson program on this machine's GPU and write run records."""
    require_gpu(session)
    install(session, *tileproof_spec("toolchain,record,gpu" if HAS_GPU else "toolchain,record"))
    tileproof(session, "run")


def bench(session):
    """Time the course's bench programs against cuBLAS/cupy in the same run and write a bench record."""
    require_gpu(session)
    install(session, *tileproof_spec("toolchain,record,gpu" if HAS_GPU else "toolchain,record"))
    tileproof(session, "bench", drop=("--record-no-gpu",))  # bench records the gates itself


def claims(session):
    """Check each document's claims that this machine can check (GPU-level ones where a GPU exists)."""
    install(session, *tileproof_spec("toolchain,gpu" if HAS_GPU else "toolchain"))
    tileproof(session, "claims")


def claims_matrix(session, release):
    """Check every claim against one toolchain release in its own venv: one claims record per release."""
    install(session, *tileproof_spec(), *release_requirements(release), *(["cupy-cuda13x"] if HAS_GPU else []),
            locked=False)  # another release than the lock's
    tileproof(session, "claims")


def compile_matrix(session, release):
    """Build every program with one toolchain release in its own venv: one compile record per release, so a
    lesson's REG/SHARED table (``res_usage``) gets one column per release (``-- --arch sm_89``)."""
    install(session, *tileproof_spec(), *release_requirements(release), locked=False)
    tileproof(session, "compile")


def run_gpu_release(session, cuda_tile):
    """Run the Python programs with one cuda-tile release of the axis, in its own environment from its set."""
    require_gpu(session)
    install(session, *tileproof_spec("record,gpu" if HAS_GPU else "record"), *axis_requirements(),
            lock=axis_set(cuda_tile))
    tileproof(session, "run", "--python-only")


def compile_release(session, cuda_tile):
    """Export the Python kernels with one cuda-tile release of the axis (no GPU): a compile record per release."""
    install(session, *tileproof_spec(), *axis_requirements(), lock=axis_set(cuda_tile))
    tileproof(session, "compile", "--python-only")


def _light(command: str, doc: str) -> Callable:
    def session_fn(session):
        light_tileproof(session, command)

    session_fn.__doc__ = doc
    session_fn.__name__ = command.replace("-", "_")
    return session_fn


def fleet(session):
    """Lessons x GPU kinds through Slurm or CI runners, merged (nox -s fleet -- submit --cluster FILE --wait)."""
    install(session, *tileproof_spec())
    tileproof(session, "fleet")


UV_COMPILE = ["pip", "compile", "-q", "--universal", "--generate-hashes", "--python-version", "3.10",
              "--custom-compile-command", "nox -s lock"]
"""``uv pip compile`` as the lock session runs it: every pin with the sha256 of each of its files on the index."""


def lock(session):
    """Rewrite constraints.txt: everything the sessions install (tileproof's toolchain, record and gpu extras and
    pytest) pinned; and one pinned set per cuda-tile release of the axis (locks/cuda-tile-<release>.txt, its
    toolchain at the newest CUDA release inside that release's tileiras range) (-- --upgrade for new releases)."""
    if not nox.virtualenv.HAS_UV:
        session.error("nox -s lock needs uv: pip install 'nox[uv]' (or pipx install uv)")
    uv = nox.virtualenv.UV
    tmp = Path(session.create_tmp())
    (tmp / "course.in").write_text("\n".join([*tileproof_spec("toolchain,record,gpu"),
                                              *COURSE_TEST_REQUIREMENTS]) + "\n")
    session.run(uv, *UV_COMPILE, str(tmp / "course.in"), "--no-emit-package", DIST, "-o", LOCK, *session.posargs,
                external=True)
    for release in course.load(Path.cwd()).cuda_tile_axis:
        (tmp / "tileiras.in").write_text(f"cuda-tile[tileiras]=={release}\n")
        resolved = session.run(uv, *UV_COMPILE, str(tmp / "tileiras.in"), "--no-header", "--no-annotate",
                               silent=True, external=True)
        cuda = next(line.split("==")[1].rsplit(".", 1)[0] for line in str(resolved).splitlines()
                    if line.startswith("nvidia-cuda-tileiras=="))
        pins = [r for r in release_requirements(cuda) if Requirement(r).name != "cuda-tile"]
        (tmp / "set.in").write_text("\n".join([f"cuda-tile=={release}", *tileproof_spec("record,gpu"), *pins]) + "\n")
        Path("locks").mkdir(exist_ok=True)
        session.run(uv, *UV_COMPILE, str(tmp / "set.in"), "--no-emit-package", DIST, "-o", axis_set(release),
                    *session.posargs, external=True)


LIGHT = [
    ("publish", "Flip a lesson to published when its evidence allows (nox -s publish -- LESSON)."),
    ("status", "Show lesson x program x newest evidence."),
    ("audit", "Check every record, transcript and published lesson (reports only when asked: -- --report-dir DIR)."),
    ("schema", "Regenerate schema/, cpp/tolerances.h and the guide's front-matter reference from their sources."),
    ("check", "Every lesson canonical, programs present, checks in the tolerance table, generated files current."),
    ("verify", "Every record's signature against lessons/runners.yaml, and git history."),
    ("keygen", "Make this runner's signing key outside the repository (nox -s keygen -- [--key PATH] [--owner NAME])."),
    ("sign-registry", "Endorse a change of lessons/runners.yaml with a key the committed registry trusts."),
    ("lint-kernels", "Static checks over kernels/ for known cuTile mistakes."),
    ("new-lesson", "Scaffold a draft lesson: nox -s new-lesson -- ID [--python NAME] [--cpp NAME]."),
]
"""The light sessions: ``python -m tileproof COMMAND`` in the shared small environment."""
NOT_DEFAULT = {"sign-registry", "new-lesson", "verify", "check"}
"""Light sessions a bare ``nox`` never runs (they need arguments, or another session runs them)."""


def every_session(root: Path) -> list[tuple[str, Callable, dict, tuple[str, list[str]] | None]]:
    """(name, function, ``nox.session`` options, parametrization) of every session, in the order nox lists them."""
    settings = course.load(root)
    light_one = {"python": False, "requires": ["light"]}
    out: list[tuple[str, Callable, dict, tuple[str, list[str]] | None]] = [
        ("light", light, {"default": False}, None),
        ("toolchain", toolchain, {"default": False}, None),
        ("compile", compile, {"python": False, "requires": ["toolchain"]}, None),
        ("tests", tests, {"python": False, "requires": ["toolchain"]}, None),
        ("run-gpu", run_gpu, {"default": HAS_GPU}, None),
        ("bench", bench, {"default": HAS_GPU}, None),
        ("claims", claims, {}, None),
        ("claims-matrix", claims_matrix, {"default": False}, ("release", settings.toolchain_releases)),
        ("compile-matrix", compile_matrix, {"default": False}, ("release", settings.toolchain_releases)),
        ("run-gpu-release", run_gpu_release, {"default": False}, ("cuda_tile", settings.cuda_tile_axis)),
        ("compile-release", compile_release, {"default": False}, ("cuda_tile", settings.cuda_tile_axis)),
        ("fleet", fleet, {}, None),
        ("lock", lock, {"python": False, "default": False}, None),
    ]
    for command, doc in LIGHT:
        out.append((command, _light(command, doc), {**light_one, "default": command not in NOT_DEFAULT}, None))
    return out


def _fresh(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def session_fn(*args, **kwargs):
        return fn(*args, **kwargs)

    return session_fn


def register(leave_out: Iterable[str] = (), root: Path | None = None) -> list[str]:
    """Register every tileproof session with nox, but those named in ``leave_out`` (a course that defines its own
    session of that name); set nox's options (uv where installed, environments kept, ``compile`` and ``tests`` by
    default). The names registered."""
    nox.needs_version = NEEDS_NOX
    nox.options.default_venv_backend = "uv|venv"
    nox.options.reuse_venv = "yes"
    nox.options.sessions = ["compile", "tests"]
    skip = set(leave_out)
    names = []
    for name, fn, options, params in every_session(Path(root) if root else Path.cwd()):
        if name in skip:
            continue
        fn = _fresh(fn)  # nox marks the function it is given: a new one each time
        if params is not None:
            fn = nox.parametrize(params[0], params[1])(fn)
        nox.session(name=name, **options)(fn)
        names.append(name)
    return names
