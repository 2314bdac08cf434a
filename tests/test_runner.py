"""The runner's containment: deadlines kill whole process trees, streams are capped,
a signal kills every live child, children get the allowlisted environment only."""

import os
import shutil
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import each_containment
from own_processes import NAME_SELF, fresh_name, left, left_after, named_sleep

from tileproof.records.errors import TileproofError
from tileproof.runner import process
from tileproof.runner.environment import CHILD_ENV, child_env
from tileproof.runner.process import Interrupted, start_and_wait
from tileproof.runner.step import Limits, run_step

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the process table is read from /proc")


def script(tmp_path: Path, body: str) -> list[str]:
    p = tmp_path / "prog.py"
    p.write_text(textwrap.dedent(body))
    return [sys.executable, str(p)]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


DETACHED = """
    import subprocess, sys, time
    kid = subprocess.Popen(["setsid", sys.argv[1], "infinity"])  # its own session; keeps our pipes open
    print("started", flush=True)
    {tail}
"""
"""argv[1]: a ``named_sleep``, by whose name the test finds the grandchild (a PID written inside a step's
own PID namespace means nothing outside it)."""


@linux
@each_containment()
def test_setsid_grandchild_dies_at_the_deadline(tmp_path, contained):
    sleep = named_sleep(tmp_path)
    argv = script(tmp_path, DETACHED.format(tail="time.sleep(600)"))
    t0 = time.perf_counter()
    done = start_and_wait([*argv, str(sleep)], env=child_env(), timeout=1.5)  # run_cmd's test keeps the 3 s
    assert time.perf_counter() - t0 < 1.5 + 2
    assert done.timed_out
    assert done.exit_code is None
    assert done.stdout == b"started\n"
    assert done.strays_killed == 1
    assert done.containment == contained
    assert not left(sleep.name), "killed, and reaped (by the subreaper, or the step's init)"


@linux
@each_containment()
def test_detached_grandchild_of_a_finished_program_is_killed(tmp_path, contained):
    """The program exits 0 at once; its grandchild holds the pipes: the step still ends now."""
    sleep = named_sleep(tmp_path)
    argv = script(tmp_path, DETACHED.format(tail="time.sleep(0.5); sys.exit(0)"))
    t0 = time.perf_counter()
    done = start_and_wait([*argv, str(sleep)], env=child_env(), timeout=60)
    assert time.perf_counter() - t0 < 10
    assert done.exit_code == 0
    assert not done.timed_out
    assert done.strays_killed == 1
    assert not left(sleep.name, zombies=False)


def test_program_closing_its_streams_still_runs_to_its_deadline(tmp_path):
    argv = script(tmp_path, """
        import os, time
        os.close(1); os.close(2)
        time.sleep(600)
    """)
    done = start_and_wait(argv, env=child_env(), timeout=1)
    assert done.timed_out
    assert done.exit_code is None


def test_each_stream_is_capped_and_counted(tmp_path):
    argv = script(tmp_path, """
        import sys
        sys.stdout.write("x" * 5_000_000)
        sys.stderr.write("short\\n")
    """)
    done = start_and_wait(argv, env=child_env(), timeout=60, cap=4096)
    assert done.exit_code == 0
    assert len(done.stdout) == 4096
    assert done.stdout_total == 5_000_000
    assert done.stderr == b"short\n"
    assert done.stderr_total == 6


def test_cut_transcript_says_where(tmp_path):
    argv = script(tmp_path, "print('y' * 10000)")
    step = run_step(tmp_path, "r1", "big", argv, child_env(), Limits(60, 2048))
    assert step.stdout_cut is not None
    assert (step.stdout_cut.kept_bytes, step.stdout_cut.total_bytes) == (2048, 10001)
    text = (tmp_path / step.stdout.path).read_text()
    assert text.startswith("y" * 2048)
    assert (text.endswith("[tileproof: output cut at byte 2048 of 10001; "
                                                          "raise --output-cap to keep more]\n"))
    assert step.stderr_cut is None


def test_output_cap_from_the_environment(monkeypatch):
    monkeypatch.setenv(process.CAP_VAR, "4096")
    assert process.output_cap() == 4096
    assert process.output_cap(8192) == 8192
    monkeypatch.setenv(process.CAP_VAR, "lots")
    with pytest.raises(TileproofError, match="TILEPROOF_OUTPUT_CAP") as e:
        process.output_cap()
    assert "\n" not in str(e.value)
    monkeypatch.delenv(process.CAP_VAR)
    assert process.output_cap() == process.DEFAULT_CAP == 16 * 1024 * 1024


def test_missing_program_is_exit_127_not_a_crash(tmp_path):
    done = start_and_wait([str(tmp_path / "no-such-tool")], env=child_env(), timeout=5)
    assert done.exit_code == 127
    assert b"no-such-tool" in done.stderr
    bare = start_and_wait(["no-such-tool-on-path"], env=child_env(), timeout=5)
    assert bare.exit_code == 127
    assert bare.stderr == b"no-such-tool-on-path: No such file or directory\n"


def test_a_program_that_is_not_executable_or_a_folder_is_127_permission_denied(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\necho never\n")
    for argv0 in (str(plain), str(tmp_path)):
        done = start_and_wait([argv0], env=child_env(), timeout=5)
        assert done.exit_code == 127
        assert done.stderr == f"{argv0}: Permission denied\n".encode()


def test_a_relative_program_path_is_found_from_the_step_s_folder(tmp_path):
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "tool"
    tool.write_text("#!/bin/sh\necho ran \"$0\"\n")
    tool.chmod(0o755)
    done = start_and_wait(["bin/tool"], env=child_env(), cwd=tmp_path, timeout=5)
    assert done.exit_code == 0
    assert done.stdout.startswith(b"ran ")
    assert done.argv == ("bin/tool",)


@linux
def test_the_death_signal_is_set_by_setpriv_only_where_it_works(monkeypatch, tmp_path):
    def launcher(path: str):
        process._pdeathsig_launcher.cache_clear()
        monkeypatch.setenv("PATH", path)
        return process._pdeathsig_launcher()

    assert launcher(str(tmp_path)) is None  # no setpriv: the child is forked and sets it itself
    broken = tmp_path / "setpriv"
    broken.write_text("#!/bin/sh\nexit 1\n")  # a setpriv without --pdeathsig (util-linux before 2.33)
    broken.chmod(0o755)
    assert launcher(str(tmp_path)) is None
    if SETPRIV is not None:
        assert launcher(os.path.dirname(SETPRIV)) == (SETPRIV, "--pdeathsig", "KILL", "--")
    process._pdeathsig_launcher.cache_clear()  # the next start looks again, with the suite's PATH


@linux
@each_containment()
def test_a_signal_kills_every_live_child(tmp_path, contained):
    """What SIGTERM/SIGINT do (``_on_signal``): kill the live trees; then nothing new starts."""
    name = fresh_name()
    argv = script(tmp_path, f"import time; {NAME_SELF.format(name=name)}; time.sleep(600)")
    result = {}
    worker = threading.Thread(target=lambda: result.update(done=start_and_wait(argv, env=child_env(), timeout=600)))
    worker.start()
    for _ in range(200):
        if process._live:
            break
        time.sleep(0.01)
    pid = next(iter(process._live))
    process._stopping.set()
    try:
        process.kill_all_live()
        worker.join(10)
        assert not worker.is_alive()
        assert result["done"].exit_code == -9
        assert not alive(pid)
        assert not left(name, zombies=False)
        with pytest.raises(Interrupted):
            start_and_wait(argv, env=child_env(), timeout=5)
    finally:
        process._stopping.clear()


def test_children_get_the_allowlist_only(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "a" * 36)
    monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda-12.0")
    monkeypatch.setenv("LESSON_KNOB", "7")
    argv = script(tmp_path, "import os, json; print(json.dumps(sorted(os.environ)))")
    names = set(eval(start_and_wait(argv, env=child_env(device=3), timeout=60).stdout))
    assert "GITHUB_TOKEN" not in names
    assert "CUDA_HOME" not in names
    assert "LESSON_KNOB" not in names
    assert names - {process.MARKER_VAR, "PYTHONUNBUFFERED"} <= set(CHILD_ENV)
    extra = child_env(extra=["LESSON_KNOB", "CUDA_HOME"], device=3)
    assert extra["LESSON_KNOB"] == "7"
    assert "CUDA_HOME" not in extra
    assert extra["CUDA_VISIBLE_DEVICES"] == "3"
    assert child_env(path_dirs=["/opt/tools"], base={"PATH": "/bin"})["PATH"] == os.pathsep.join(["/opt/tools", "/bin"])


PARENT = """
import sys
from tileproof.runner.process import install_signal_handlers, start_and_wait
from tileproof.runner.environment import child_env
install_signal_handlers()
try:
    start_and_wait([sys.executable, sys.argv[1], sys.argv[2]], env=child_env(), timeout=600)
except KeyboardInterrupt:
    sys.exit(130)
"""


def _wait_for(path: Path, seconds: float = 20) -> int:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        if path.is_file() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


SETPRIV = shutil.which("setpriv")
UNSHARE = shutil.which("unshare")


@linux
@pytest.mark.parametrize("launcher", [
    pytest.param("setpriv", marks=pytest.mark.skipif(SETPRIV is None, reason="util-linux setpriv not installed")),
    "fork"])
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
@each_containment()
def test_killing_tileproof_kills_what_it_started(tmp_path, how, launcher, contained):
    """SIGTERM: the whole tree, a setsid grandchild included. ``kill -9``: the direct child
    (PR_SET_PDEATHSIG), e.g. nvcc; under the marker alone nothing can run in tileproof after SIGKILL, so
    a grandchild that left the session outlives it (tests/test_containment.py: not in a namespace or a
    cgroup; docs/containment.md). The death signal is set by setpriv, or (no setpriv on PATH) in the forked child."""
    import signal
    import subprocess

    name = fresh_name()
    prog = tmp_path / "compiler.py"
    prog.write_text(f"import sys, time\n{NAME_SELF.format(name=name)}\nopen(sys.argv[1], 'w').write('1')\n"
                    "time.sleep(600)\n")
    pid_file = tmp_path / "pid"
    path = os.environ["PATH"]
    if launcher == "fork":  # a folder without setpriv (with unshare, which a namespace needs)
        path = str(tmp_path / "bin")
        (tmp_path / "bin").mkdir()
        if UNSHARE is not None:
            (tmp_path / "bin" / "unshare").symlink_to(UNSHARE)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(prog), str(pid_file)], env={**os.environ,
                                                                                           "PATH": path})
    try:
        _wait_for(pid_file)
        parent.send_signal(getattr(signal, how))
        parent.wait(20)
        assert not left_after(5, name, zombies=False), f"the child outlived tileproof's {how}"
        if how == "SIGTERM":
            assert parent.returncode == 130
    finally:
        parent.kill()


def test_toolchain_asks_its_caller_to_run_tools(tmp_path):
    """toolchain/ starts no process: versions come through the ``version_text`` it is given."""
    from tileproof.toolchain.find import discover, tool_version

    nvcc = tmp_path / "nvcc"
    nvcc.write_text("not run: the fake runner answers for it\n")
    asked: list[list[str]] = []

    def fake(argv: list[str]) -> str:
        asked.append(argv)
        return "Cuda compilation tools, release 13.4, V13.4.92\n"

    assert tool_version(nvcc, fake) == "13.4.92"
    assert asked == [[str(nvcc), "--version"]]
    tools = discover(system_nvcc=str(nvcc), env={}, version_text=fake)
    assert tools.source == "system"
    assert {t.name: t.version for t in tools.facts.tools}["nvcc"] == "13.4.92"
