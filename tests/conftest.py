"""Shared test setup: the repository root, the FIXTURE record builders on sys.path,
the temporary folders on a RAM-backed tmpfs where there is one, one OpenBLAS thread,
the GPU markers, ``cli_args`` (a command's arguments as the command line parses them), and
``tree``: the day-79 FIXTURE repository with the real lessons as drafts (a test module that
needs another miniature tree defines its own ``tree``)."""

import argparse
import functools
import gc
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "tests" / "data" / "records"
sys.path.insert(0, str(RECORDS))  # fixture_records: builders for FIXTURE run records
sys.path.insert(0, str(REPO / "tests" / "data" / "audit"))  # audit_tree: the clean audit tree

RAM_TEMP = Path("/dev/shm")
RAM_TEMP_FREE = 2 << 30
"""Free bytes RAM_TEMP needs to take the suite's temporary folders (a run leaves about 40 MB)."""


def ram_temp_root() -> Path | None:
    """RAM_TEMP where it can hold the suite's temporary folders, unless TMPDIR or pytest's
    PYTEST_DEBUG_TEMPROOT already chose a place; else None (the system's default stays).

    The suite creates and deletes tens of thousands of files (tmp_path trees, git worktrees,
    compiler temporaries); on ext4 /tmp, creating a file next to many just-deleted ones costs
    the kernel an inode scan each time (measured here: 40% of the suite's system time)."""
    if os.environ.get("TMPDIR") or os.environ.get("PYTEST_DEBUG_TEMPROOT"):
        return None
    try:
        fs = os.statvfs(RAM_TEMP)
    except OSError:
        return None
    usable = os.access(RAM_TEMP, os.W_OK | os.X_OK) and not fs.f_flag & os.ST_NOEXEC  # tests run programs there
    return RAM_TEMP if usable and fs.f_bavail * fs.f_frsize >= RAM_TEMP_FREE else None


# numpy's OpenBLAS starts a thread per core at import and lets each spin before it sleeps:
# CPU time that every test starting a numpy program paid for nothing (the suite's arrays are small).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# cuTile keeps every cubin it compiled in a disk cache (~/.cache/cutile-python) and hands it back for the
# same compiler and bytecode: a test that exports in its own process (test_lint's compiler oracle,
# test_kernels_import) would be answered from an earlier run. Off, as tileproof's exports have it
# (toolchain.aot): every compile the suite checks is a real tileiras run.
os.environ["CUDA_TILE_CACHE_DIR"] = "off"

_ram = ram_temp_root()
if _ram is not None:  # before any temporary folder exists; xdist's workers and every program a test starts inherit it
    os.environ["TMPDIR"] = str(_ram)
    tempfile.tempdir = str(_ram)


FIRST = ("test_docs_commands.py", "test_fleet_slurm.py", "test_build.py", "test_package.py", "test_file_index.py",
         "test_wall.py", "test_new_lesson.py", "test_tamper.py", "test_fleet_merge.py", "test_containment.py",
         "test_runner.py", "test_release_folder.py", "test_outside_check.py", "test_claims.py", "test_report_page.py",
         "test_growing_course.py", "test_audit_read.py", "test_new_course_tree.py", "test_lint.py",
         "test_bench_outside.py", "test_fuzz_parsers.py", "test_architecture.py", "test_hostile_inputs.py")
"""The test files that take longest (compiles, a Slurm cluster, deadlines, the verified-file index's racy window
waited out), longest first. They run first, the rest in collection order: under pytest-xdist
(``nox -s tests``: ``--dist loadfile --no-loadscope-reorder``) a worker is never left alone with one of them at
the end."""


SLOW_S = 3.0
"""A test whose call takes longer than this (seconds) says why it must: ``@pytest.mark.slow(reason=...)``."""


OWN_COURSE_VARS = ("TILEPROOF_TRUST_ROOT", "TILEPROOF_SIGNING_KEY", "TILEPROOF_INDEX")
"""What a reviewer or an author sets in their shell for their own course (the trust root they pin, the key they sign
with, the index they keep): the suite's trees are not that course, so the session starts without them, and a test
that needs one sets it."""


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``slow`` marker and drop :data:`OWN_COURSE_VARS` from the environment; then, under
    pytest-xdist, with this tree's bytecode not cached yet (a fresh clone), the controller collects the suite once
    in a process of its own before its workers start: every worker imports every test module, and three of them
    compiling the same 850 modules at once took 6 s of a fresh clone's start instead of 2 s."""
    config.addinivalue_line("markers", "slow(reason): a test that takes seconds, and why no faster test proves what "
                                       "it proves (a real compiler, a cluster, a process boundary, a deadline)")
    for name in OWN_COURSE_VARS:
        os.environ.pop(name, None)
    argv = warm_up_argv(config)
    if argv is not None:
        subprocess.run(argv, cwd=REPO, capture_output=True, check=False)


def warm_up_argv(config: pytest.Config) -> list[str] | None:
    """The collection that compiles the suite's bytecode, or None: in a worker, without workers, where bytecode
    is not written, or where it is cached already."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None) or sys.dont_write_bytecode:
        return None
    if Path(importlib.util.cache_from_source(str(REPO / "tileproof" / "records" / "models" / "__init__.py"))).is_file():
        return None
    return [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
            str(REPO / "tests")]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))  # stable: a file's tests keep their order


_UNEXPLAINED: list[tuple[float, str]] = []
CPU_PROPERTY = "cpu_s"
"""``--cpu-per-file``: each phase's CPU seconds (this process and the children it waited for), kept on the test's
report (``user_properties``) so the controller can add them up under xdist too."""
_CPU: dict[str, list[float]] = {}
"""Test file → [CPU seconds, wall seconds, tests]."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-per-file", action="store_true",
                     help="print the CPU time each test file took (its tests' setup, call and teardown, with the "
                          "processes they started), the costliest first")


def _cpu_now() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    """With ``--cpu-per-file``: the CPU time of the phase that just ended, on its report."""
    if item.config.getoption("--cpu-per-file"):
        start = getattr(item, "_cpu_mark", None)
        now = _cpu_now()
        item.user_properties.append((CPU_PROPERTY, now - start if start is not None else 0.0))
        item._cpu_mark = now  # type: ignore[attr-defined]  # the next phase starts here
    yield


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.config.getoption("--cpu-per-file"):
        item._cpu_mark = _cpu_now()  # type: ignore[attr-defined]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Note a test call slower than SLOW_S that carries no ``slow`` marker (in the controller under xdist too), and
    with ``--cpu-per-file`` add the phase's CPU time to its file's."""
    if report.when == "call" and report.duration > SLOW_S and "slow" not in report.keywords:
        _UNEXPLAINED.append((report.duration, report.nodeid))
    cpu = [v for k, v in report.user_properties if k == CPU_PROPERTY]
    if cpu:
        entry = _CPU.setdefault(report.nodeid.split("::")[0], [0.0, 0.0, 0])
        entry[0] += cpu[-1]
        entry[1] += report.duration
        entry[2] += report.when == "call"


def pytest_terminal_summary(terminalreporter) -> None:
    """Name the slow tests that do not say why they are slow (a list, never a failure: times vary by machine); with
    ``--cpu-per-file``, every file's CPU and wall time."""
    if _UNEXPLAINED:
        terminalreporter.section(f"tests slower than {SLOW_S:g} s without a slow(reason=...) marker")
        for seconds, nodeid in sorted(_UNEXPLAINED, reverse=True):
            terminalreporter.write_line(f"{seconds:6.1f}s {nodeid}")
    if _CPU:
        terminalreporter.section("CPU per test file (setup, call, teardown and their processes)")
        total = sum(c for c, _w, _n in _CPU.values())
        for path, (cpu, wall, n) in sorted(_CPU.items(), key=lambda kv: -kv[1][0]):
            terminalreporter.write_line(f"{cpu:7.1f}s CPU {wall:7.1f}s wall {n:4} tests  {path}")
        terminalreporter.write_line(f"{total:7.1f}s CPU in tests, every file together")


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (modules, items, hypothesis' strategies) lives to the end: move it out of
    the garbage collector's sight, which otherwise walks it again and again (about 7% of in-process time)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def open_temp_folders(tmp_path_factory):
    """Every temporary folder pytest makes (``tmp_path``, ``tmp_path_factory.mktemp``) open to others (0755, as a
    checkout is): a program behind the separate-user wall (tileproof as root) runs as another uid and reads its
    checkout and program there."""
    factory = type(tmp_path_factory)
    made_by = factory.mktemp

    def mktemp(self, basename: str, numbered: bool = True) -> Path:
        made = made_by(self, basename, numbered)
        made.chmod(0o755)
        return made

    factory.mktemp = mktemp
    yield
    factory.mktemp = made_by


@pytest.fixture
def own_temp(monkeypatch, tmp_path_factory):
    """A temp folder of the test's own as ``TMPDIR`` (for this process's ``tempfile`` and every process it starts),
    open to others like ``tmp_path``, removed afterwards: tileproof's scratch folders, and the sweep that removes a
    killed tileproof's (``runner.process.scratch_dir``), then see only what this test made, never another test's
    or another suite's on this machine."""
    tmp_path_factory.getbasetemp()  # pytest's own folder chosen first, where the suite's temp folders are
    folder = Path(tempfile.mkdtemp(prefix="tileproof-test-temp-"))
    folder.chmod(0o755)
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


NOXFILE_MODULE = "tileproof_noxfile"


def noxfile():
    """The noxfile as a module, loaded once per process (nox refuses a session registered twice): kept in
    ``sys.modules``, so a second import of this file (as ``tests.conftest``) finds it too."""
    if NOXFILE_MODULE in sys.modules:
        return sys.modules[NOXFILE_MODULE]
    pytest.importorskip("nox", reason="the noxfile needs nox installed")
    pytest.importorskip("packaging", reason="the noxfile's release pins need packaging")
    spec = importlib.util.spec_from_file_location(NOXFILE_MODULE, REPO / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[NOXFILE_MODULE] = module
    return module


def cli_args(*argv: str) -> argparse.Namespace:
    """``tileproof ARGV`` parsed by the real command line (``tileproof.__main__.build_parser``): what the
    command's ``run`` gets from ``main``."""
    from tileproof.__main__ import build_parser

    return build_parser(list(argv)).parse_args(list(argv))


H200_QUERY = REPO / "tests" / "data" / "gpu" / "nvidia-smi-query.csv"
"""The captured ``nvidia-smi --query-gpu`` answer of the H200 the course ran on."""


def fake_nvidia_smi(folder: Path, query: Path = H200_QUERY) -> Path:
    """``folder`` (made if missing) holding an ``nvidia-smi`` that answers ``--query-gpu=...`` with the captured
    transcript ``query`` and anything else with one fixed line: the GPU a runner under test sees (no GPU is used)."""
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\ncase "$1" in --query-gpu=*) cat {query} ;; *) echo "FIXTURE nvidia-smi" ;; esac\n')
    smi.chmod(0o755)
    return folder


def run_cli(*argv: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``tileproof ARGV`` as the command line runs it (``tileproof.__main__.main``), in this process, from ``cwd``
    with ``env`` added to the environment (both restored after): exit status, stdout and stderr. For a test about
    what a command decides and says (a ``python -m tileproof`` process costs half a second of imports); a test
    about the process itself (a hang, a memory cap, a signal, the wall, a concurrent writer) starts one."""
    import contextlib
    import io

    from tileproof.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in env or {}}
    here = Path.cwd()
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        os.chdir(here)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return code, out.getvalue(), err.getvalue()


def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


HAS_GPU = _has_gpu()
gpu = pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU with a driver (nvidia-smi); CI has none")
no_gpu = pytest.mark.skipif(HAS_GPU, reason="tests the no-GPU path; this machine has a GPU")


CONTAINMENTS = ("pid-namespace", "cgroup", "marker")
"""Every containment (``records.models.Containment``), best first."""
SCOPES = CONTAINMENTS[:2]
"""The containments that hold a step whatever its processes do."""


@pytest.fixture
def contained(request, monkeypatch):
    """The containment ``request.param`` (parametrize with ``indirect=True``) for every process the test starts,
    in this process and in the tileproof processes it starts (``TILEPROOF_CONTAINMENT``); skipped, with the
    reason, where it does not hold."""
    from tileproof.records.errors import TileproofError
    from tileproof.runner import process

    monkeypatch.setenv(process.CONTAIN_VAR, request.param)
    process.containment.cache_clear()
    try:
        process.containment()
    except TileproofError as e:
        pytest.skip(str(e))
    yield request.param
    process.containment.cache_clear()  # the next test chooses again, without the variable


def each_containment(*kinds: str):
    """Run a test under each of ``kinds`` (default: every containment) through the ``contained`` fixture."""
    return pytest.mark.parametrize("contained", kinds or CONTAINMENTS, indirect=True)


@pytest.fixture(scope="module")
def audit_template(tmp_path_factory):
    """The clean audit tree (tests/data/audit/audit_tree.py), written once per test module, and what it holds."""
    import audit_tree  # on sys.path above

    root = tmp_path_factory.mktemp("clean")
    return root, audit_tree.clean_tree(root)


@pytest.fixture
def audit_copy(audit_template, tmp_path):
    """A private copy of the clean audit tree for one test to tamper with."""
    root, info = audit_template
    copy = tmp_path / "tree"
    shutil.copytree(root, copy)
    return copy, info


def users_in_module(request: pytest.FixtureRequest, fixture: str) -> int:
    """How many of this run's tests in ``request``'s module use ``fixture`` (each parametrized case counts)."""
    return sum(1 for item in request.session.items
               if getattr(item, "module", None) is request.module and fixture in getattr(item, "fixturenames", ()))


class AgedCopies:
    """Private copies of one tree for each test of a module that asks (``take``), their files aged past the
    verified-file index's racy window (``audit_tree.aged``: a wait of two seconds) all together: the tree is
    built once and the module waits once, not once per test. ``build(root)`` makes the tree; ``files(root)``
    names the files of a copy to age. A copy is the built tree file for file (``shutil.copytree``, links kept,
    .git included) in a folder of its own; a test asking for more copies than its module counted (a rerun) gets
    one made and aged then."""

    def __init__(self, request: pytest.FixtureRequest, fixture: str, name: str, build, files) -> None:
        self.factory = request.getfixturevalue("tmp_path_factory")
        self.template = self.factory.mktemp("template") / name
        build(self.template)
        self.files = files
        self.ready = self._copies(users_in_module(request, fixture))

    def _copies(self, count: int) -> list[Path]:
        import audit_tree  # on sys.path above

        made = []
        for _ in range(count):
            dest = self.factory.mktemp("aged") / self.template.name
            shutil.copytree(self.template, dest, symlinks=True)
            made.append(dest)
        if made:
            audit_tree.aged([path for root in made for path in self.files(root)])
        return made

    def take(self) -> Path:
        if not self.ready:
            self.ready = self._copies(1)
        return self.ready.pop(0)


@pytest.fixture
def repo_root() -> Path:
    return REPO


COMMITTED = "347efc1eff6c3e76bdfc25aad08ce2daca5f57ef"
"""A named commit of this repository whose tree audits clean: its signed H200 and CPU-build records, both
lessons published from them (the H200 session of 2026-12-01T14:22Z republished at 3b89e4c; 347efc1 is the
last commit before a course could grow past its published lessons). Tests about "the committed tree" read
this commit, never the working tree, so a lesson, a program or a tolerance entry an author is adding
(committed or not) changes nothing they see."""


def clone_at(dest: Path, commit: str = COMMITTED, source: Path = REPO) -> Path:
    """A clone of ``source`` (sharing its objects: ``git clone --shared``) checked out at ``commit``, with the
    history that leads to it; skipped with the reason when git, or the commit in this clone's history, is
    missing (a shallow clone: ``git fetch --unshallow``)."""
    if shutil.which("git") is None:
        pytest.skip("needs git to check out the committed tree")
    known = subprocess.run(["git", "-C", str(source), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    if known.returncode != 0:
        pytest.skip(f"commit {commit[:12]} is not in this clone's history (fix: git fetch --unshallow)")
    for argv in (["clone", "-q", "--shared", "--no-checkout", str(source), str(dest)],
                 ["-C", str(dest), "-c", "advice.detachedHead=false", "checkout", "-q", commit]):
        subprocess.run(["git", *argv], check=True, capture_output=True)
    return dest


@pytest.fixture(scope="session")
def committed_tree(tmp_path_factory) -> Path:
    """The repository as committed at ``COMMITTED`` (read only: copy it, or ``clone_at`` it, to change it)."""
    return clone_at(tmp_path_factory.mktemp("committed") / "repo")


def git_commit_all(root: Path, message: str) -> None:
    """``git add -A`` and commit, as a throwaway author (no signing, no hooks)."""
    for argv in (["add", "-A"], ["-c", "user.email=t@example.invalid", "-c", "user.name=t", "-c",
                                 "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", message]):
        subprocess.run(["git", "-C", str(root), *argv], check=True, capture_output=True)


@pytest.fixture
def tree(tmp_path, repo_root):
    """A miniature repository: the day-79 FIXTURE tree plus the real lessons/, as drafts."""
    root = tmp_path / "repo"
    shutil.copytree(repo_root / "tests" / "data" / "records" / "day79", root)
    copy_lessons_as_draft(repo_root / "lessons", root / "lessons")
    return root


def sources_tree(tmp_path: Path) -> Path:
    """kernels/ and lessons/ copied into ``tmp_path/repo``, with an empty cpp/: the course's sources without
    records (for tests that select or run programs)."""
    root = tmp_path / "repo"
    for folder in ("kernels", "lessons"):
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "cpp").mkdir()
    return root


def copy_lessons_as_draft(src: Path, dst: Path) -> None:
    """Copy ``lessons/`` and put every lesson back in its draft form.

    The inverse of publish: status draft, hardware all null, every result ``?``, no verified release.
    Tests that publish from FIXTURE records start from this, whatever the
    repository's lessons say today.
    """
    from tileproof import lesson_text
    from tileproof.records import lessons
    from tileproof.records.models import Hardware

    shutil.copytree(src, dst)
    # A tree that has not adopted signing: no runner key, no policy (FIXTURE records are unsigned).
    (dst / "runners.yaml").write_text("registry_version: 1\nrunners: []\n")
    for lesson in lessons.load_all(dst.parent):
        rows = [r.model_copy(update={"result": "?", "run_id": None}) for r in lesson.front.results]
        front = lesson.front.model_copy(update={"status": "draft", "hardware": Hardware(), "results": rows,
                                                "cuda_tile_verified": []})
        lesson.path.write_text(lesson_text.render(lesson, front))


def _outcome(call):
    """What ``call()`` gives, or the exception it raised (type and words): two calls compare equal when both
    gave equal values or both raised alike."""
    try:
        return ("gave", call())
    except Exception as e:  # noqa: BLE001  # compared, never swallowed: the caller asserts on it
        return ("raised", type(e).__name__, str(e))


def assert_same_verdicts(root: Path, chosen, every) -> None:
    """Each lesson's verdict and release rows judged over ``chosen`` (a tree of the records ``judge.preselect``
    chose) equal those over ``every`` (the tree of every record). Where the choice left nothing out (the same
    records, in the same order, over the same trust state and root) the two trees are one input and are not judged
    twice."""
    from tileproof.records import lessons

    if chosen.records == every.records:  # nothing left out (most small trees): the same inputs, the same verdicts
        return
    try:
        found = lessons.load_all(Path(root))
    except Exception:  # noqa: BLE001  # no lesson to judge: the command says why, for both trees alike
        return
    for lesson in found:
        for judge in ("verdict", "releases"):
            got = _outcome(functools.partial(lambda t, j, le: getattr(t, j)(le), chosen, judge, lesson))
            if every._versions is None:  # the committed tolerance tables: one git read of the same root serves both
                every._versions = chosen._versions
            want = _outcome(functools.partial(lambda t, j, le: getattr(t, j)(le), every, judge, lesson))
            assert got == want, f"{lesson.id}: {judge} over the chosen records differs from over every record"


@pytest.fixture(autouse=True)
def chosen_records_judge_alike(monkeypatch):
    """The proof obligation of ``gather.tree.Tree.chosen`` over every scenario the suite builds: each tree a test
    loads (``Tree.load``: status, publish, the tests' own) or the audit chooses (``Tree.choose``) judges every lesson
    exactly as the tree of every record does."""
    from tileproof.gather import tree as tree_module

    load, choose = tree_module.Tree.load.__func__, tree_module.Tree.choose

    def every_record(got):
        """The tree of every record under ``got.root``, as ``Tree.load(..., every=True)`` builds it, with what
        ``got`` already read of the same root and does not depend on which records are chosen: the trust state
        (history against the trust root), the history check and the refused inputs. Loading them again (git and a
        walk of evidence/, about half of the check's cost) would give the same values."""
        registry = tree_module.runner_keys.load_registry(got.root)
        with tree_module.Catalog.open(got.root, registry) as cat:
            records = got.trust.examine(cat.records())
        return tree_module.Tree.of(got.root, records, got.trust, got._history, got.refused())

    def checked_load(cls, root, trust_root=None, every=False):
        got = load(cls, root, trust_root, every)
        if not every:
            assert_same_verdicts(root, got, every_record(got))
        return got

    def checked_choose(self):
        got = choose(self)
        assert_same_verdicts(self.root, got, self)
        return got

    monkeypatch.setattr(tree_module.Tree, "load", classmethod(checked_load))
    monkeypatch.setattr(tree_module.Tree, "choose", checked_choose)


@pytest.fixture(autouse=True)
def verified_entries_read_alike(monkeypatch):
    """The proof obligation of ``gather.audit_read``'s verified entries over every scenario the suite builds: for each
    run record an audit reads in full and keeps an entry of, the entry (as the index stores it: through JSON) gives
    back exactly what was kept of the record, the same findings, and the report table's row of the record read
    again."""
    import dataclasses
    import json

    from tileproof.catalog import Audited
    from tileproof.gather import audit_read
    from tileproof.judge.audit.result import RunTable, table_row

    validate, add_entry = audit_read.validate, Audited.add
    made: dict[str, dict] = {}

    def recording_add(self, sha256, value):
        made[sha256] = json.loads(json.dumps(value, sort_keys=True))
        return add_entry(self, sha256, value)

    def checked(checking, names, audited):
        made.clear()
        kept, raw_refs, found = validate(checking, names, audited)
        fresh = audit_read.Transcripts(checking.root)
        for read in kept:
            if read.sha256 not in made or read.verification is not None:
                continue
            file = f"runs/{read.name}"
            again: list = []
            rows = RunTable()
            got = audit_read._from_entry(read.name, read.sha256, made[read.sha256], fresh, again.append, rows)
            assert got == dataclasses.replace(read, record=None), f"{file}: its entry gives other kept values"
            assert again == [f for f in found if f.file == file], f"{file}: its entry gives other findings"
            row, = rows.rows.values()
            assert row == table_row(read.name, audit_read.again(Path(checking.root), read, checking.runners)), \
                f"{file}: other row"
        return kept, raw_refs, found

    monkeypatch.setattr(Audited, "add", recording_add)
    monkeypatch.setattr(audit_read, "validate", checked)
