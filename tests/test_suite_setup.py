"""How the suite runs: its temporary folders on RAM_TEMP (a tmpfs) where it can hold them, else where the
system says; the longest test files first; and ``nox -s tests``' pytest-xdist options and bytecode cache."""

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest

REPO = Path(__file__).resolve().parents[1]


def test_an_explicit_tmpdir_or_pytest_temp_root_is_kept(monkeypatch, tmp_path):
    monkeypatch.setattr(conftest, "RAM_TEMP", tmp_path)
    monkeypatch.delenv("PYTEST_DEBUG_TEMPROOT", raising=False)
    monkeypatch.setenv("TMPDIR", "/somewhere/chosen")
    assert conftest.ram_temp_root() is None
    monkeypatch.delenv("TMPDIR")
    monkeypatch.setenv("PYTEST_DEBUG_TEMPROOT", "/somewhere/else")
    assert conftest.ram_temp_root() is None
    monkeypatch.delenv("PYTEST_DEBUG_TEMPROOT")
    assert conftest.ram_temp_root() == tmp_path


def test_a_missing_or_too_small_ram_folder_is_not_used(monkeypatch, tmp_path):
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.delenv("PYTEST_DEBUG_TEMPROOT", raising=False)
    monkeypatch.setattr(conftest, "RAM_TEMP", tmp_path / "absent")
    assert conftest.ram_temp_root() is None
    monkeypatch.setattr(conftest, "RAM_TEMP", tmp_path)
    free = os.statvfs(tmp_path)
    monkeypatch.setattr(conftest, "RAM_TEMP_FREE", free.f_bavail * free.f_frsize * 2)
    assert conftest.ram_temp_root() is None


def test_where_the_ram_folder_was_chosen_every_temporary_folder_is_in_it(tmp_path):
    # Chosen once, by the first process (an xdist worker inherits TMPDIR from it).
    if os.environ.get("TMPDIR") != str(conftest.RAM_TEMP):
        pytest.skip(f"not chosen here (TMPDIR or PYTEST_DEBUG_TEMPROOT set, or {conftest.RAM_TEMP} unusable)")
    assert tmp_path.is_relative_to(conftest.RAM_TEMP)
    assert Path(tempfile.gettempdir()) == conftest.RAM_TEMP


def test_the_longest_files_come_first_and_each_file_keeps_its_order():
    names = ["test_a.py", conftest.FIRST[1], "test_b.py", conftest.FIRST[0], conftest.FIRST[1]]
    items = [SimpleNamespace(path=Path("tests") / n, n=i) for i, n in enumerate(names)]
    conftest.pytest_collection_modifyitems(items)
    assert [(i.path.name, i.n) for i in items] == [(conftest.FIRST[0], 3), (conftest.FIRST[1], 1),
                                                   (conftest.FIRST[1], 4), ("test_a.py", 0), ("test_b.py", 2)]
    assert all((REPO / "tests" / name).is_file() for name in conftest.FIRST)  # a renamed file is named here too


def _noxfile():
    return conftest.noxfile()


def test_the_test_session_runs_a_worker_per_core_plus_one_with_options_pytest_accepts():
    options = _noxfile().pytest_parallel()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert options[:2] == ["-n", str(cores + 1)]
    assert "--no-loadscope-reorder" in options
    # the pinned pytest-xdist knows every option; a later "-n 0" (as the README shows) wins
    listed = subprocess.run([sys.executable, "-m", "pytest", *options, "-n", "0", "-p", "no:cacheprovider",
                             "--collect-only", "-q", "tests/test_lock.py"], cwd=REPO, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "tests/test_lock.py::" in listed.stdout, listed.stdout + listed.stderr


def test_the_test_session_keeps_bytecode_in_one_absolute_folder_outside_the_tree(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    env = _noxfile().bytecode_cache(SimpleNamespace(cache_dir=Path(".nox") / ".cache"))
    assert env == {"PYTHONPYCACHEPREFIX": str(tmp_path / ".nox" / ".cache" / "pycache"), "PYTHONDONTWRITEBYTECODE": ""}
    prefix = subprocess.run([sys.executable, "-c", "import sys; print(sys.pycache_prefix, sys.dont_write_bytecode)"],
                            env={**os.environ, **env}, capture_output=True, text=True, cwd="/")
    assert prefix.stdout.split() == [env["PYTHONPYCACHEPREFIX"], "False"]  # "" is unset for Python


class _Session(SimpleNamespace):
    """What ``noxfile.install`` reads of a nox session, and what it asks of one."""

    def log(self, message):
        self.logs.append(message)

    def install(self, *args):
        self.installed.append(args)


@pytest.mark.parametrize("backend, exit_code, locked, offline_tried, installed_online", [
    ("uv", 0, True, True, False),    # everything in uv's cache: no index request
    ("uv", 2, True, True, True),     # something not cached: the normal install fetches it
    ("uv", 0, False, False, True),   # another release than the lock's: the index decides
    ("venv", 0, True, False, True),  # no uv: pip as before
])
def test_a_locked_install_tries_uv_s_cache_alone_first(monkeypatch, tmp_path, backend, exit_code, locked,
                                                       offline_tried, installed_online):
    nf = _noxfile()
    fake = tmp_path / "uv"
    fake.write_text('#!/bin/sh\necho "$@" > "$VIRTUAL_ENV/argv"\nexit $FAKE_UV_EXIT\n')
    fake.chmod(0o755)
    monkeypatch.setattr(nf.nox.virtualenv, "UV", str(fake))
    monkeypatch.setenv("FAKE_UV_EXIT", str(exit_code))
    monkeypatch.setenv("UV_PYTHON", "/some/other/python")  # must not aim the install elsewhere
    monkeypatch.chdir(REPO)  # the lock pip gets a copy of
    session = _Session(venv_backend=backend, virtualenv=SimpleNamespace(location=str(tmp_path)), posargs=[],
                       bin=str(tmp_path / "bin"), logs=[], installed=[], create_tmp=lambda: str(tmp_path))
    assert nf.install(session, "-e", ".", locked=locked)
    argv = tmp_path / "argv"
    assert argv.is_file() == offline_tried
    if offline_tried:
        assert argv.read_text().split() == ["pip", "install", "--offline", "-q", "--python",
                                            str(tmp_path / "bin" / "python"), "-c", nf.LOCK, "-e", "."]
    lock = str(tmp_path / f"pip-{nf.LOCK}") if backend == "venv" else nf.LOCK  # pip: the lock less its hashes
    assert session.installed == ([(*(["-c", lock] if locked else []), "-e", ".")] if installed_online else [])


def test_pip_gets_the_lock_without_its_hashes_and_the_same_pins(monkeypatch, tmp_path):
    """A hash puts pip in hash-checking mode, which refuses an editable install: pip's copy of the lock keeps
    every pin (and marker) and drops every ``--hash`` option; uv is given the lock itself."""
    from tileproof import sessions
    from tileproof.records import lock as lock_file

    nf = _noxfile()
    monkeypatch.chdir(REPO)
    session = _Session(logs=[], create_tmp=lambda: str(tmp_path))
    copy = Path(sessions.pip_lock(session, nf.LOCK)).read_text()
    original = (REPO / nf.LOCK).read_text()
    assert "--hash=" in original and "--hash=" not in copy and "\\" not in copy
    assert lock_file.pins(copy, "copy") == lock_file.pins(original, nf.LOCK)


@pytest.mark.parametrize("reused", [True, False])
def test_with_no_install_a_reused_environment_gets_no_install_and_no_stamp(monkeypatch, tmp_path, reused):
    """``nox -R``: nothing is installed into a reused environment (nox's own rule), and the shared environment's
    stamp is left as it was, so the next run without -R installs what changed."""
    nf = _noxfile()
    fake = tmp_path / "uv"
    fake.write_text('#!/bin/sh\ntouch "$VIRTUAL_ENV/ran"\n')
    fake.chmod(0o755)
    monkeypatch.setattr(nf.nox.virtualenv, "UV", str(fake))
    monkeypatch.chdir(REPO)  # shared_env reads pyproject.toml and the lock
    env = tmp_path / "env"
    env.mkdir()
    session = _Session(venv_backend="uv", virtualenv=SimpleNamespace(location=str(env), _reused=reused),
                       _runner=SimpleNamespace(global_config=SimpleNamespace(no_install=True)), posargs=[],
                       bin=str(env / "bin"), env_dir=env, cache_dir=tmp_path, logs=[], installed=[])
    nf.shared_env(session, "test", "python.txt")
    assert (env / "ran").exists() == (not reused)
    assert (env / "tileproof-lock.sha256").exists() == (not reused)


def test_the_checks_beside_pytest_all_run_and_a_failing_one_fails_the_session(capsys):
    nf = _noxfile()
    errors = []
    session = _Session(logs=[], error=errors.append)
    py = sys.executable
    beside = nf.Beside(session, [[py, "-c", "import sys; print('one'); sys.exit(3)"], [py, "-c", "print('two')"]],
                       {"TILEPROOF_BESIDE": "1"})
    beside.report()
    out = capsys.readouterr().out
    assert out.index("one") < out.index("two")  # in order, each one's output printed
    assert [line.endswith("(beside pytest: exit 3)") for line in session.logs] == [True, False]
    assert errors == ["failed beside pytest: import sys; print('one'); sys.exit(3)"]  # what follows python -m
    clean = _Session(logs=[], error=errors.append)
    nf.Beside(clean, [[py, "-c", "import os; assert os.environ['TILEPROOF_BESIDE'] == '1'"]],
              {"TILEPROOF_BESIDE": "1"}).report()
    assert len(errors) == 1  # the second one passed: its environment had the session's variables


def test_a_check_that_cannot_start_fails_and_the_ones_after_it_still_run(tmp_path):
    nf = _noxfile()
    errors = []
    session = _Session(logs=[], error=errors.append)
    py = sys.executable
    nf.Beside(session, [[str(tmp_path / "no-python"), "-m", "mypy"], [py, "-c", "print('after')"]], {}).report()
    assert session.logs[0].endswith("(beside pytest: did not start)")
    assert session.logs[1].endswith("exit 0)")
    assert errors == ["failed beside pytest: mypy"]


@pytest.mark.parametrize("pytest_ends", [None, KeyboardInterrupt, RuntimeError])
def test_pytest_s_own_failure_or_interrupt_is_what_the_session_ends_with(capsys, pytest_ends):
    """``Beside.around``: the checks' output is shown either way; a failed check fails the session only when
    pytest itself finished cleanly, so pytest's failure (or Ctrl-C) is never replaced by the check's."""
    nf = _noxfile()
    errors = []
    session = _Session(logs=[], error=errors.append)

    def pytest_run():
        if pytest_ends is not None:
            raise pytest_ends("pytest")

    beside = nf.Beside(session, [[sys.executable, "-c", "import sys; print('check ran'); sys.exit(1)"]], {})
    if pytest_ends is None:
        beside.around(pytest_run)
    else:
        with pytest.raises(pytest_ends):
            beside.around(pytest_run)
    assert "check ran" in capsys.readouterr().out
    assert len(errors) == (1 if pytest_ends is None else 0)


def test_the_controller_collects_once_first_only_when_the_bytecode_is_not_cached(monkeypatch, tmp_path):
    models = REPO / "tileproof" / "records" / "models" / "__init__.py"
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pycache"))  # nothing compiled there yet
    controller = SimpleNamespace(option=SimpleNamespace(numprocesses=3))
    argv = conftest.warm_up_argv(controller)
    assert argv is not None
    assert argv[1:5] == ["-m", "pytest", "--collect-only", "-q"]
    assert "no:xdist" in argv
    assert conftest.warm_up_argv(SimpleNamespace(option=SimpleNamespace(numprocesses=3), workerinput={})) is None
    assert conftest.warm_up_argv(SimpleNamespace(option=SimpleNamespace(numprocesses=0))) is None
    cached = Path(importlib.util.cache_from_source(str(models)))
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"")
    assert conftest.warm_up_argv(controller) is None  # compiled already: the workers start at once
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "other"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert conftest.warm_up_argv(controller) is None  # nothing would be written


@pytest.mark.parametrize("posargs, selects, one_file", [
    ([], False, False),
    (["-x"], False, False),
    (["-n", "0"], False, False),
    (["tests/test_lock.py"], True, True),
    (["-n", "0", "tests/test_lock.py"], True, True),
    (["tests/test_lock.py::test_a", "tests/test_lock.py::test_b"], True, True),
    (["tests/test_lock.py", "tests/test_cli.py"], True, False),
    (["tests"], True, False),
    (["-k", "lock or cli"], True, False),  # "lock or cli" is -k's value, not a path
    (["-klock"], True, False),
    (["-m", "gpu"], True, False),
    (["--deselect", "tests/test_lock.py::test_a"], True, False),
])
def test_a_selection_runs_pytest_alone_and_one_file_in_one_process(posargs, selects, one_file):
    nf = _noxfile()
    assert nf.selects(posargs) == selects
    assert nf.one_file(posargs) == one_file
    assert ("-n" in nf.pytest_options(posargs)) == (not one_file)


def test_one_file_leaves_hypothesis_plugin_out_unless_the_file_names_hypothesis(monkeypatch):
    nf = _noxfile()
    monkeypatch.chdir(REPO)
    assert nf.pytest_options(["tests/test_lock.py"]) == ["-p", "no:hypothesispytest"]
    assert nf.pytest_options(["tests/test_fuzz_parsers.py::test_parse_pip_freeze"]) == []
    assert nf.pytest_options(["tests/test_not_there.py"]) == []  # pytest says what is missing, with every plugin


class _Run(_Session):
    def run(self, *argv, **kwargs):
        self.ran.append(argv)


@pytest.mark.parametrize("posargs, beside", [([], True), (["tests/test_lock.py"], False), (["-k", "x"], False)])
def test_the_tests_session_runs_the_checks_beside_the_whole_suite_only(monkeypatch, tmp_path, posargs, beside):
    """``nox -s tests -- FILE`` (or ``-k``) is pytest alone; the checks run beside the whole suite (and in
    ``nox -s lint``): what each call of the session starts, through a session that records it."""
    nf = _noxfile()
    (tmp_path / nf.TOOLCHAIN_PYTHON).write_text(sys.executable)
    started = []
    monkeypatch.setattr(nf.Beside, "__init__", lambda self, session, commands, env: started.append(commands)
                        or setattr(self, "session", session))
    monkeypatch.setattr(nf.Beside, "report", lambda self, fail=True: None)
    session = _Run(posargs=posargs, cache_dir=tmp_path, logs=[], ran=[])
    nf.tests.func(session) if hasattr(nf.tests, "func") else nf.tests(session)
    pytest_argv, = session.ran
    assert pytest_argv[:3] == (sys.executable, "-m", "pytest")
    assert list(pytest_argv[-len(posargs):] if posargs else []) == posargs
    assert ("-n" in pytest_argv) == (not nf.one_file(posargs))
    assert bool(started) == beside
    if beside:
        assert [argv[2:] for argv in started[0]] == nf.BESIDE_PYTEST
