"""Containment that needs no marker variable and no parent chain.

A step in its own PID namespace or cgroup v2 folder ends whole, whatever its processes did, when the
program exits, at its timeout, when tileproof is signalled and when tileproof is killed (``kill -9``),
and the scratch folder of a killed tileproof goes too. Under the marker alone (the fallback) the same
program gets away, which is what these tests are for; the record says which containment held.

Every process a test starts has a fresh name (``own_processes``) and is found by it with /proc and
``ps``, never by a pattern that could match another suite's processes on this machine; every test has a
temp folder of its own (``own_temp``), so that the scratch folders it waits for are swept by its own tileproofs
only.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import SCOPES, each_containment
from own_processes import fresh_name, kill_named, left, left_after, named_sleep, wait_named
from pydantic import ValidationError

from tileproof.records.errors import TileproofError
from tileproof.records.models import AS_READ, STEP_VERSION, Step
from tileproof.runner import process
from tileproof.runner.environment import child_env
from tileproof.runner.process import containment, scratch_dir, start_and_wait
from tileproof.runner.step import Limits, run_step

pytestmark = [pytest.mark.skipif(
    not sys.platform.startswith("linux") or not all(shutil.which(t) for t in ("env", "setsid", "sleep", "ps")),
    reason="needs Linux's /proc and env, setsid, sleep and ps"),
    pytest.mark.usefixtures("own_temp")]  # the scratch folders and their sweep: this test's alone

WAIT_NAMED = """
def wait_named(*names):
    import os, time
    until = time.time() + 20
    while time.time() < until:
        running = set()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                running.add(open(f"/proc/{pid}/comm").read().strip())
            except OSError:
                pass
        if set(names) <= running:
            return
        time.sleep(0.01)
    raise SystemExit(f"{names} never started")
"""
"""For a program: wait until processes of these names run (in its namespace's /proc, or the machine's)."""

ESCAPES = WAIT_NAMED + """
import subprocess, sys, time
# env -i: no marker; setsid -f: its own session, and its parent gone at once (the parent chain broken)
subprocess.run(["env", "-i", "setsid", "-f", sys.argv[1], "600"], check=True)
wait_named(sys.argv[1].rsplit("/", 1)[-1])
print("started", flush=True)
"""
"""A program whose grandchild ``env -i setsid -f SLEEP 600`` (argv[1]) leaves it every way it can, then the
line ``escapes`` ends it with."""

TWO_KIDS = WAIT_NAMED + """
import os, subprocess, sys, time
subprocess.run(["env", "-i", "setsid", "-f", sys.argv[2], "600"], check=True)
kid = subprocess.Popen([sys.argv[3], "600"])  # stays in the program's process group
wait_named(sys.argv[2].rsplit("/", 1)[-1], sys.argv[3].rsplit("/", 1)[-1])
open(sys.argv[1], "w").write("same group" if os.getpgid(kid.pid) == os.getpgrp() else "another group")
time.sleep(600)
"""
"""argv: READY SLEEP_A SLEEP_B: A leaves as in ESCAPES, B stays in the program's group; READY says where B is."""

PARENT = """
import sys
from pathlib import Path
from tileproof.runner.environment import child_env
from tileproof.runner.process import install_signal_handlers, scratch_dir, start_and_wait
install_signal_handlers()
try:
    with scratch_dir() as tmp:
        Path(sys.argv[1]).write_text(str(tmp))
        start_and_wait([sys.executable, *sys.argv[2:]], env=child_env(), timeout=600, scratch=tmp)
except KeyboardInterrupt:
    sys.exit(130)
"""
"""A tileproof that runs one program (argv[2:]) with a scratch folder (its path written to argv[1])."""


def escapes(tail: str) -> str:
    return ESCAPES + tail + "\n"


def script(tmp_path: Path, body: str, name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def wait_for_text(path: Path, seconds: float = 30) -> str:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        if path.is_file() and path.read_text():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} never written")


def gone_after(path: Path, seconds: float = 5) -> bool:
    until = time.perf_counter() + seconds
    while path.exists() and time.perf_counter() < until:
        time.sleep(0.05)
    return not path.exists()


def tileproof_running(tmp_path: Path, *program: str) -> tuple[subprocess.Popen, Path]:
    """A tileproof (PARENT) running ``python PROGRAM...``; its scratch folder once it has one."""
    where = tmp_path / "scratch-path"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(where), *program], stdout=subprocess.DEVNULL)
    return parent, Path(wait_for_text(where))


# --- the four cases of the issue, in a namespace and in a cgroup ------------------------------------------


@each_containment(*SCOPES)
@pytest.mark.parametrize("how", ["normal-exit", "timeout"])
@pytest.mark.slow(reason="real escaping processes under each containment, waited out at a real timeout")
def test_env_i_setsid_sleep_ends_with_the_step(tmp_path, contained, how):
    """After the program's normal exit, and at its --timeout."""
    sleep = named_sleep(tmp_path)
    prog = script(tmp_path, escapes("sys.exit(0)" if how == "normal-exit" else "time.sleep(600)"))
    try:
        t0 = time.perf_counter()
        done = start_and_wait([sys.executable, str(prog), str(sleep)], env=child_env(),
                              timeout=60 if how == "normal-exit" else 3)
        if how == "normal-exit":
            assert done.exit_code == 0
            assert not done.timed_out
        else:
            assert done.timed_out
            assert done.exit_code is None
            assert time.perf_counter() - t0 < 3 + 2
        assert done.stdout == b"started\n"
        assert done.containment == contained
        assert done.strays_killed == 1
        assert not left(sleep.name), "killed and reaped with the step"
    finally:
        kill_named(sleep.name)


@each_containment(*SCOPES)
def test_env_i_setsid_sleep_ends_when_tileproof_gets_sigterm(tmp_path, contained):
    sleep = named_sleep(tmp_path)
    prog = script(tmp_path, escapes("time.sleep(600)"))
    parent, scratch = tileproof_running(tmp_path, str(prog), str(sleep))
    try:
        wait_named(sleep.name)
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(20) == 130
        assert not left_after(5, sleep.name, zombies=False), "the grandchild outlived tileproof's SIGTERM"
        assert not scratch.exists(), "the scratch folder is removed on the way out"
    finally:
        parent.kill()
        kill_named(sleep.name)


@contextlib.contextmanager
def tileproof_killed(tmp_path: Path):
    """A tileproof running TWO_KIDS, killed with ``kill -9`` once both grandchildren run: yields their names
    and the scratch folder; kills what is left afterwards."""
    a, b = named_sleep(tmp_path), named_sleep(tmp_path)
    ready = tmp_path / "ready"
    parent, scratch = tileproof_running(tmp_path, str(script(tmp_path, TWO_KIDS)), str(ready), str(a), str(b))
    try:
        assert wait_for_text(ready) == "same group"
        assert scratch.is_dir()
        parent.kill()
        parent.wait(20)
        yield a.name, b.name, scratch
    finally:
        parent.kill()
        kill_named(a.name, b.name)


@each_containment(*SCOPES)
def test_kill_9_of_tileproof_ends_both_grandchildren_and_its_scratch_folder(tmp_path, contained):
    """One grandchild in its own session without the marker, one in the program's process group: both die,
    and the scratch folder goes at once (the step's init removes it)."""
    with tileproof_killed(tmp_path) as (a, b, scratch):
        assert not left_after(5, a, b, zombies=False), "a grandchild outlived kill -9 of tileproof"
        assert gone_after(scratch), "the scratch folder outlived kill -9 of tileproof"


# --- the fallback: what the marker alone leaves (why the above needs a namespace or a cgroup) ------------------


@each_containment("marker")
def test_under_the_marker_alone_the_grandchild_gets_away(tmp_path, contained):
    """The fallback holds what keeps its marker or its parent chain (tests/test_runner.py), not this one:
    the program above, contained by the marker alone (as before the namespace), leaves it running."""
    sleep = named_sleep(tmp_path)
    prog = script(tmp_path, escapes("sys.exit(0)"))
    try:
        done = start_and_wait([sys.executable, str(prog), str(sleep)], env=child_env(), timeout=60)
        assert done.exit_code == 0
        assert done.containment == "marker"
        assert done.strays_killed == 0
        assert left(sleep.name, zombies=False), "escaped the marker: these tests would test nothing"
    finally:
        kill_named(sleep.name)


@each_containment("marker")
def test_after_kill_9_under_the_marker_the_next_tileproof_removes_the_scratch_folder(tmp_path, contained):
    """The marker's ``kill -9`` case: the direct child dies (PR_SET_PDEATHSIG) but both grandchildren live on,
    and nothing can remove the scratch folder then; the next tileproof that makes one removes it."""
    with tileproof_killed(tmp_path) as (a, b, scratch):
        time.sleep(0.5)
        assert left(a, zombies=False)
        assert left(b, zombies=False)
        assert scratch.is_dir()
        process._sweep_scratch.cache_clear()  # this process as the next tileproof: its first scratch_dir sweeps
        with scratch_dir():
            pass
        assert not scratch.exists(), "the next tileproof's scratch_dir sweeps it"


# --- each link of the namespace's chain -----------------------------------------------------------------


@each_containment("pid-namespace")
@pytest.mark.parametrize("link", ["unshare", "init"])
def test_each_link_of_the_namespace_ends_the_step(tmp_path, contained, link):
    """tileproof's death kills ``unshare`` (its death signal, set by setpriv or in the forked child); unshare's
    death sends SIGTERM to PID 1 (``--kill-child=TERM``), which ends the namespace; PID 1's death makes the
    kernel kill every process left in it. Here each of the last two links alone, with tileproof alive."""
    sleep = named_sleep(tmp_path)
    prog = script(tmp_path, escapes("time.sleep(600)"))
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(
        done=start_and_wait([sys.executable, str(prog), str(sleep)], env=child_env(), timeout=600)))
    worker.start()
    try:
        wait_named(sleep.name)
        unshare = next(iter(process._live))
        init = int(Path(f"/proc/{unshare}/task/{unshare}/children").read_text().split()[0])
        assert "stepinit.py" in Path(f"/proc/{init}/cmdline").read_text()
        os.kill(unshare if link == "unshare" else init, signal.SIGKILL)
        worker.join(20)
        assert not worker.is_alive()
        assert result["done"].exit_code == -signal.SIGKILL
        # the kernel tears the namespace down after the link died, not before start_and_wait returns: allow it
        # the seconds a loaded machine takes (the fresh clone's suite, beside a new lesson's, once saw it lag)
        assert not left_after(5, sleep.name), f"the namespace outlived its {link}"
    finally:
        kill_named(sleep.name)
        worker.join(20)


@each_containment("pid-namespace")
def test_the_init_refuses_a_namespace_it_is_not_pid_1_of(tmp_path, contained):
    """Anywhere but PID 1, the init's ``kill(-1)`` would reach every process this user may signal: it refuses
    the namespace scope before anything starts. Run here as PID 2 of a namespace of the test's own, so that a
    broken guard could only kill that namespace's processes."""
    sleep = named_sleep(tmp_path)
    sh = (f"{sleep} 600 & {sys.executable} -I -S {process.STEP_INIT} pid-namespace 1 - /bin/true true; "
          "echo rc=$?; kill -0 $! && echo alive")
    ran = subprocess.run(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--", "sh", "-c", sh],
                         capture_output=True, text=True, timeout=60)
    assert ran.stdout.split() == ["rc=1", "alive"], ran
    assert "not PID 1" in ran.stderr, ran


# --- the program ends as it would have uncontained ----------------------------------------------------------


@each_containment()
@pytest.mark.parametrize(("body", "want"), [
    ("raise SystemExit(3)", 3),
    ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", -signal.SIGTERM),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL),
    ("import os, resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); os.abort()", -signal.SIGABRT),
    ("import signal, time; signal.setitimer(signal.ITIMER_REAL, 0.05); time.sleep(30)", -signal.SIGALRM),
], ids=["exit-3", "own-sigterm", "own-sigkill", "abort", "alarm"])
def test_a_program_ends_as_it_would_uncontained(tmp_path, contained, body, want):
    """The program is never PID 1 of its namespace: a PID 1 does not die of a signal it sends itself without a
    handler (its own SIGTERM would read as exit 0), nor of SIGALRM, and ``abort()`` would read as SIGSEGV."""
    prog = script(tmp_path, body)
    done = start_and_wait([sys.executable, str(prog)], env=child_env(), timeout=60)
    assert (done.exit_code, done.timed_out, done.containment) == (want, False, contained)


@each_containment()
def test_a_program_starts_as_it_would_uncontained(tmp_path, contained):
    """The environment it was given (not the init's Python's: with LANG=C that adds LC_CTYPE), its own
    session, no signal blocked or ignored."""
    env = {"PATH": os.environ["PATH"], "LANG": "C", "ODD": "a=b"}
    seen = start_and_wait(["env"], env=env, timeout=60).stdout.decode().splitlines()
    assert sorted(seen) == sorted([*(f"{k}={v}" for k, v in env.items()),
                                   next(ln for ln in seen if ln.startswith(f"{process.MARKER_VAR}="))])
    shown = start_and_wait(["cat", "/proc/self/status", "/proc/self/stat"], env=env, timeout=60).stdout.decode()
    status = dict(line.split(":\t", 1) for line in shown.splitlines()[:-1] if ":\t" in line)
    assert status["SigBlk"] == status["SigIgn"] == "0" * 16
    pid, _, rest = shown.splitlines()[-1].partition(" (")
    pgrp, session = rest.rpartition(") ")[2].split()[2:4]
    assert pid == pgrp == session, "it leads its own session"


@each_containment()
def test_a_program_starts_at_defaults_whatever_signals_tileproof_inherited(contained):
    """A wrapper, profiler or tracer may start tileproof with signals blocked or ignored, and an exec keeps both:
    the program still starts with none blocked and none ignored."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGWINCH, signal.SIGUSR1})
    usr2 = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        shown = start_and_wait(["cat", "/proc/self/status"], env={"PATH": os.environ["PATH"]}, timeout=60)
    finally:
        signal.signal(signal.SIGUSR2, usr2)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    status = dict(line.split(":\t", 1) for line in shown.stdout.decode().splitlines() if ":\t" in line)
    assert (status["SigBlk"], status["SigIgn"]) == ("0" * 16, "0" * 16)


# --- choosing the containment --------------------------------------------------------------------------------


def fake_unshare(folder: Path) -> Path:
    """An unshare that fails as util-linux's does without CAP_SYS_ADMIN."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    (bin_dir / "unshare").write_text("#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\n"
                                     "exit 1\n")
    (bin_dir / "unshare").chmod(0o755)
    return bin_dir


@pytest.fixture
def choose_again(monkeypatch):
    process.containment.cache_clear()
    yield monkeypatch
    process.containment.cache_clear()


def test_a_containment_asked_for_that_does_not_hold_stops_with_one_line(tmp_path, choose_again):
    choose_again.setenv("PATH", f"{fake_unshare(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    choose_again.setenv(process.CONTAIN_VAR, "pid-namespace")
    with pytest.raises(TileproofError, match="TILEPROOF_CONTAINMENT=pid-namespace: it does not hold here: "
                                             "unshare: unshare failed: Operation not permitted") as e:
        containment()
    assert "\n" not in str(e.value)
    assert "fix: unset it" in str(e.value)
    process.containment.cache_clear()
    choose_again.setenv(process.CONTAIN_VAR, "namespace")
    with pytest.raises(TileproofError, match="expected one of pid-namespace, cgroup, marker"):
        containment()


def test_where_unshare_is_refused_the_next_that_holds_is_used_and_recorded(tmp_path, choose_again):
    choose_again.setenv("PATH", f"{fake_unshare(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    choose_again.delenv(process.CONTAIN_VAR, raising=False)
    fallback = "cgroup" if process._own_cgroup() is not None else "marker"
    assert containment() == fallback
    step = run_step(tmp_path, "r1", "echo", ["echo", "hi"], child_env(), Limits(60))
    assert step.containment == fallback
    assert step.step_version == STEP_VERSION == 3
    process.containment.cache_clear()
    choose_again.setattr(process, "_own_cgroup", lambda: None)  # no writable cgroup v2 either
    assert containment() == "marker"
    assert run_step(tmp_path, "r2", "echo", ["echo", "hi"], child_env(), Limits(60)).containment == "marker"


NOBODY = 65534


def closed_to_others(path: str) -> str | None:
    """The first folder on the way to ``path`` that others may not enter, with its mode; None when none is."""
    current = os.path.realpath(path)
    while True:
        mode = os.stat(current).st_mode
        if os.path.isdir(current) and mode & 0o001 == 0:
            return f"{current} (mode {mode & 0o777:o})"
        if current == "/":
            return None
        current = os.path.dirname(current)


def python_for_nobody() -> str | None:
    """An interpreter of this Python's version that ``nobody`` runs from its own installation (this one's, or
    the system's of the same version): a Python under a folder only root may enter starts for nobody without
    its standard library, or not at all."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    probe = "import json, sys; print(json.dumps([sys.prefix, list(sys.version_info[:2])]))"
    on_path = [os.path.join(d, version) for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    for candidate in dict.fromkeys([sys.executable, *filter(os.path.isfile, on_path)]):
        candidate = os.path.realpath(candidate)
        if closed_to_others(candidate) is not None:
            continue
        ran = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", candidate,
                              "-I", "-c", probe], capture_output=True, text=True, cwd="/", timeout=60)
        own = os.path.dirname(os.path.dirname(os.path.realpath(candidate)))
        if ran.returncode == 0 and __import__("json").loads(ran.stdout) == [own, list(sys.version_info[:2])]:
            return candidate
    return None


def readable_copy(folder: Path) -> Path:
    """tileproof and the libraries it imports, copied into ``folder`` for ``nobody`` to import: the checkout
    and its environment may be in a folder only their owner may enter."""
    import site

    tops = set()
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None) or ""
        for packages in site.getsitepackages():
            if origin.startswith(packages + os.sep) and not name.startswith("tileproof"):
                tops.add(Path(packages) / Path(origin).relative_to(packages).parts[0])
    shutil.copytree(Path(process.__file__).parents[1], folder / "tileproof",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for top in tops:
        if top.name.startswith("__editable__"):
            continue
        if top.is_dir():
            shutil.copytree(top, folder / top.name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(top, folder / top.name)
    for below, dirs, files in os.walk(folder):  # whatever umask this test runs under
        for name in dirs:
            os.chmod(os.path.join(below, name), 0o755)
        for name in files:
            os.chmod(os.path.join(below, name), 0o644)
    folder.chmod(0o755)
    return folder


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="runs a tileproof as nobody: needs root and util-linux setpriv")
@pytest.mark.slow(reason="tileproof and its libraries copied where nobody may read them, and run as nobody")
def test_an_unprivileged_tileproof_falls_back_and_says_so():
    """unshare refused for real (no CAP_SYS_ADMIN), and no cgroup nobody may write: the marker holds, and the
    step says so. Run from a copy of tileproof and its libraries that nobody may read, in a temp folder of the
    test's own: the checkout may be in a folder only root may enter."""
    import tempfile

    python = python_for_nobody()
    if python is None:
        pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that nobody may run: "
                    f"{closed_to_others(sys.executable) or sys.executable} (and no system one of that version)")
    base = Path(tempfile.mkdtemp())  # not under pytest's own folder, which only root may enter
    try:
        base.chmod(0o755)
        if (closed := closed_to_others(str(base))) is not None:
            pytest.skip(f"the temp folder is closed to nobody: {closed}")
        code_dir = readable_copy(base / "lib")
        tmp_path = base / "work"
        tmp_path.mkdir()
        tmp_path.chmod(0o777)
        code = ("import json, sys\nfrom pathlib import Path\nfrom tileproof.runner.environment import child_env\n"
                "from tileproof.runner.process import containment\nfrom tileproof.runner.step import Limits, run_step\n"
                "step = run_step(Path(sys.argv[1]), 'r1', 'echo', ['echo', 'hi'], child_env(), Limits(60))\n"
                "print(json.dumps([containment(), step.containment, step.exit_code]))\n")
        env = {k: v for k, v in os.environ.items() if k not in (process.CONTAIN_VAR, "PYTHONHOME", "VIRTUAL_ENV")}
        env.update(PYTHONPATH=str(code_dir), HOME=str(tmp_path), TMPDIR=str(tmp_path))
        ran = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python,
                              "-c", code, str(tmp_path)], capture_output=True, text=True, env=env, cwd=tmp_path,
                             timeout=120)
        assert ran.returncode == 0, ran.stderr
        chosen, recorded, exit_code = __import__("json").loads(ran.stdout)
        assert chosen == recorded != "pid-namespace"
        assert exit_code == 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --- the record -----------------------------------------------------------------------------------------------


@each_containment()
def test_a_step_records_its_containment(tmp_path, contained):
    step = run_step(tmp_path, "r1", "echo", ["echo", "hi"], child_env(), Limits(60))
    assert (step.step_version, step.containment, step.exit_code) == (STEP_VERSION, contained, 0)
    assert Step.model_validate_json(step.model_dump_json()) == step


def test_an_older_step_reads_as_written():
    """Step version 1 (written before): no containment, and neither field in what its seal covers."""
    old = {"name": "echo", "argv": ["echo"], "started": "2026-01-01T00:00:00Z", "ended": "2026-01-01T00:00:01Z",
           "duration_s": 1.0, "exit_code": 0, "stdout": {"path": "evidence/r/a.txt", "sha256": "0" * 64, "bytes": 0},
           "stderr": {"path": "evidence/r/b.txt", "sha256": "0" * 64, "bytes": 0}}
    step = Step.model_validate(old, context=AS_READ)  # as a record file holds it
    assert (step.step_version, step.containment) == (1, None)
    assert not {"step_version", "containment"} & set(step.model_dump(exclude_unset=True))
    with pytest.raises(ValidationError, match="only they, say how the step was contained"):
        Step.model_validate({**old, "containment": "marker"}, context=AS_READ)
    with pytest.raises(ValidationError, match="only they, say how the step was contained"):
        Step.model_validate({**old, "step_version": 2}, context=AS_READ)
    two = Step.model_validate({**old, "step_version": 2, "containment": "marker"}, context=AS_READ)
    assert (two.step_version, two.isolation) == (2, None)  # before the wall: no isolation field
    with pytest.raises(ValidationError, match="only it, says which wall"):
        Step.model_validate({**old, "step_version": 3, "containment": "marker"}, context=AS_READ)


# --- scratch folders ------------------------------------------------------------------------------------------


HOLD = ("import sys, time\nfrom tileproof.runner.process import scratch_dir\n"
        "with scratch_dir() as tmp:\n    print(tmp, flush=True)\n    time.sleep(600)\n")


def holder() -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


@pytest.mark.slow(reason="two tileproof processes holding scratch folders, one of them killed")
def test_the_sweep_removes_only_what_a_dead_tileproof_left(tmp_path):
    dead, dead_dir = holder()
    live, live_dir = holder()
    try:
        (dead_dir / "report.json").write_text("{}")
        dead.kill()
        dead.wait(20)
        base = live_dir.parent
        link = base / f"{process.SCRATCH_PREFIX}link-{fresh_name()}"
        link.symlink_to(tmp_path)
        theirs = base / f"{process.SCRATCH_PREFIX}theirs-{fresh_name()}"
        theirs.mkdir()
        root = os.geteuid() == 0
        if root:  # another user's (only root can make one here)
            os.chown(theirs, NOBODY, NOBODY)
        process._sweep_scratch.__wrapped__()  # what the next tileproof does, once
        assert not dead_dir.exists(), "its lock died with its tileproof"
        assert live_dir.is_dir(), "a live tileproof's lock is held"
        assert link.is_symlink(), "a link is never followed"
        assert tmp_path.is_dir(), "a link is never followed"
        if root:
            assert theirs.is_dir(), "another user's folder is left alone"
        link.unlink()
        shutil.rmtree(theirs, ignore_errors=True)
    finally:
        dead.kill()
        live.kill()
        live.wait(20)


def test_a_scratch_folder_is_removed_when_its_step_is_done():
    with scratch_dir() as tmp:
        (tmp / "x").write_text("x")
        assert tmp.name.startswith(process.SCRATCH_PREFIX)
        assert oct(tmp.stat().st_mode & 0o777) == "0o700"
    assert not tmp.exists()
