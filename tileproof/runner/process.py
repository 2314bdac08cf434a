"""Starting one process, contained: the one starter of every program tileproof runs as work.

(Short questions to a tool, git or Slurm's clients, go through ``runner.query``; the
forked helper for byte work is ``runner.forked``; nothing else in tileproof starts a
process, which tests/test_architecture.py checks.)

Every child

* starts in its own session (so its process group is its own), with
  ``PR_SET_PDEATHSIG`` = SIGKILL on Linux (``kill -9`` of tileproof takes the
  child with it), and a marker variable ``TILEPROOF_STEP=<token>`` in its
  environment, which its descendants inherit. The death signal is set by
  util-linux's ``setpriv --pdeathsig KILL`` where it works (the child then
  starts through vfork: 0.5 ms instead of 8 ms from a 150 MB process, whose
  memory map a fork copies), else by a ``preexec_fn`` in the forked child;
* has its stdout and stderr read by this thread through ``select`` with a hard
  deadline (never a blocking wait on a pipe): each stream keeps its first
  ``cap`` bytes and counts the rest;
* dies whole when it ends or times out: its process group is killed, then every
  process still carrying its marker or descending from it (a grandchild that
  called ``setsid`` included). tileproof is a child subreaper
  (``PR_SET_CHILD_SUBREAPER``) so such orphans come back to it, and are reaped.

``install_signal_handlers`` (called by the commands) turns SIGTERM/SIGHUP into
an interrupt after killing every live child; SIGINT does the same.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import functools
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tileproof.records.errors import TileproofError
from tileproof.runner.query import QueryError, ask

DEFAULT_CAP = 16 * 1024 * 1024
"""Bytes kept per output stream unless ``--output-cap``/``TILEPROOF_OUTPUT_CAP`` says otherwise."""
CAP_VAR = "TILEPROOF_OUTPUT_CAP"
MARKER_VAR = "TILEPROOF_STEP"
"""Set in every child's environment: how its descendants are found after it ends."""
DRAIN_S = 1.0
"""How long output is still read after the process tree is dead (buffered bytes)."""

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_LINUX = sys.platform.startswith("linux")
_libc = ctypes.CDLL(None, use_errno=True) if _LINUX else None


class Interrupted(TileproofError):
    """tileproof was told to stop (a signal): no new process starts."""


def output_cap(value: int | None = None) -> int:
    """The per-stream cap: ``value`` if given, else ``TILEPROOF_OUTPUT_CAP``, else 16 MiB."""
    if value is not None:
        raw: str | int = value
    else:
        raw = os.environ.get(CAP_VAR, DEFAULT_CAP)
    try:
        cap = int(raw)
    except ValueError:
        raise TileproofError(f"{CAP_VAR}={raw!r}: expected a whole number of bytes (fix: e.g. {DEFAULT_CAP})") from None
    if cap < 1024:
        raise TileproofError(f"output cap {cap}: expected at least 1024 bytes (fix: raise --output-cap)")
    return cap


def add_output_cap(parser: argparse.ArgumentParser) -> None:
    """``--output-cap BYTES``: the option of every command that runs programs (run, bench)."""
    parser.add_argument("--output-cap", type=int, default=None, metavar="BYTES",
                        help=f"bytes kept per output stream of a program (default: {CAP_VAR} or {DEFAULT_CAP})")


@dataclass(frozen=True)
class Finished:
    """What one process did: exit code (None when killed at the deadline) and its capped streams."""

    argv: tuple[str, ...]
    exit_code: int | None
    timed_out: bool
    duration_s: float
    stdout: bytes
    stderr: bytes
    stdout_total: int
    stderr_total: int
    strays_killed: int


# --- the live-children registry ------------------------------------------------------------

_lock = threading.RLock()  # re-entrant: the signal handler may run while the main thread holds it
_live: dict[int, str] = {}  # pid -> marker token of every running child
_stopping = threading.Event()
_subreaper_set = False


def _become_subreaper() -> None:
    global _subreaper_set
    if _LINUX and not _subreaper_set and _libc is not None:
        _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        _subreaper_set = True


@functools.cache
def _pdeathsig_launcher() -> tuple[str, ...] | None:
    """``(setpriv, --pdeathsig, KILL, --)`` when this machine's setpriv sets the death signal (checked once by
    running it), else None: the children are then forked with ``_child_setup``."""
    found = shutil.which("setpriv") if _LINUX else None
    if found is None:
        return None
    argv = (found, "--pdeathsig", "KILL", "--")
    try:
        works = ask([*argv, "true"], timeout=10).exit_code == 0
    except QueryError:
        works = False
    return argv if works else None


def _executable(name: str, env: dict[str, str], cwd: Path | None) -> str:
    """The file ``name`` runs, found as ``subprocess`` would find it (``env``'s PATH; a relative path from
    ``cwd``); the OSError ``subprocess`` would raise when there is none, so a missing program reads the same
    through the launcher."""
    if os.sep in name:
        path = name if os.path.isabs(name) else os.path.join(cwd or os.getcwd(), name)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    else:
        found = shutil.which(name, path=env.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
        path = found
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)
    return path


def _child_setup() -> None:  # runs in the child between fork and exec: no locks, no imports
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# --- finding and killing a step's processes ------------------------------------------------


def _proc_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, state, process group) of every process, from /proc (empty off Linux)."""
    table: dict[int, tuple[int, str, int]] = {}
    if not _LINUX:
        return table
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_bytes()
        except OSError:
            continue
        rest = stat[stat.rfind(b")") + 2:].split()
        if len(rest) >= 3:
            table[int(entry.name)] = (int(rest[1]), rest[0].decode(), int(rest[2]))
    return table


def _marked(pid: int, token: bytes) -> bool:
    try:
        return token in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _step_pids(root_pid: int, token: str, table: dict[int, tuple[int, str, int]]) -> set[int]:
    """Live processes of one step: descendants of its first process, and anything with its marker."""
    marker = f"{MARKER_VAR}={token}".encode()
    me = os.getpid()
    found = {pid for pid, (_, state, _) in table.items() if state != "Z" and pid != me and _marked(pid, marker)}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = [root_pid]
    while todo:
        for kid in children.get(todo.pop(), []):
            if kid not in found and table[kid][1] != "Z":
                found.add(kid)
                todo.append(kid)
    return found


def _kill_tree(proc: subprocess.Popen, token: str) -> tuple[int, set[int]]:
    """Kill the step's group, then every process of it still alive, until none is left.

    Returns how many processes outside its process group (escaped with ``setsid``
    or ``setpgid``) had to be killed one by one, and every pid signalled."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    escaped: set[int] = set()
    signalled: set[int] = set()
    for _ in range(20):  # a process may fork while we look: look again until nothing is left
        table = _proc_table()
        strays = _step_pids(proc.pid, token, table) - {proc.pid}
        strays -= {pid for pid in strays if pid in signalled and not _alive(pid)}
        if not strays:
            break
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            signalled.add(pid)
            if table[pid][2] != proc.pid:  # the group kill already took the others
                escaped.add(pid)
        time.sleep(0.01)
    return len(escaped), signalled


def _reap(proc: subprocess.Popen, signalled: set[int]) -> None:
    """Reap the step's orphans that came to this subreaper (its group's and the strays' zombies)."""
    until = time.perf_counter() + 1.0
    while any(_alive(pid) for pid in signalled) and time.perf_counter() < until:
        time.sleep(0.005)
    me = os.getpid()
    for pid, (ppid, state, group) in _proc_table().items():
        if ppid == me and state == "Z" and pid != proc.pid and (group == proc.pid or pid in signalled):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return state[state.rfind(b")") + 2:][:1] != b"Z"


def kill_all_live() -> None:
    """Kill every running child's tree (a signal arrived, or tileproof is exiting)."""
    with _lock:
        pids = list(_live)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def _on_signal(signum: int, _frame: object) -> None:
    _stopping.set()
    kill_all_live()
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def install_signal_handlers() -> None:
    """SIGINT/SIGTERM/SIGHUP: stop starting processes, kill the live ones, raise KeyboardInterrupt.

    Only from the main thread (Python's rule); elsewhere it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)


# --- running ---------------------------------------------------------------------------------


class _Sink:
    """The head of one stream, up to ``cap`` bytes, and the count of every byte seen; every byte is also
    copied to ``echo`` as it arrives, when one is given."""

    def __init__(self, cap: int, echo: BinaryIO | None = None) -> None:
        self.cap, self.kept, self.total, self.echo = cap, 0, 0, echo
        self.parts: list[bytes] = []

    def add(self, data: bytes) -> None:
        if self.echo is not None:
            self.echo.write(data)
            self.echo.flush()
        self.total += len(data)
        room = self.cap - self.kept
        if room > 0:
            self.parts.append(data[:room])
            self.kept += min(room, len(data))

    def value(self) -> bytes:
        return b"".join(self.parts)


def start_and_wait(argv: list[str], *, env: dict[str, str], cwd: Path | None = None,
                   timeout: float | None = None, cap: int | None = None, echo: bool = False) -> Finished:
    """Run ``argv`` (never through a shell) to its end or ``timeout``; its whole tree dies with it.

    ``echo``: its streams are also copied to this process's own stdout and stderr as they arrive (a child
    someone watches, e.g. a fleet task's ``run`` in its Slurm log)."""
    if _stopping.is_set():
        raise Interrupted("interrupted: no new process is started")
    cap = output_cap(cap)
    _become_subreaper()
    token = secrets.token_hex(8)
    t0 = time.perf_counter()
    launcher = _pdeathsig_launcher()
    try:
        spawn = [*launcher, _executable(argv[0], env, cwd), *argv[1:]] if launcher else argv
        with _lock:
            proc = subprocess.Popen(spawn, cwd=cwd, env={**env, MARKER_VAR: token}, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                    preexec_fn=_child_setup if _LINUX and not launcher else None)
            _live[proc.pid] = token
    except OSError as e:
        return Finished(tuple(argv), 127, False, time.perf_counter() - t0, b"",
                        f"{argv[0]}: {e.strerror}\n".encode(), 0, 0, 0)
    assert proc.stdout is not None and proc.stderr is not None  # both are pipes
    out_echo, err_echo = (sys.stdout.buffer, sys.stderr.buffer) if echo else (None, None)
    if echo:  # what this process printed comes first
        sys.stdout.flush()
        sys.stderr.flush()
    sinks = {proc.stdout: _Sink(cap, out_echo), proc.stderr: _Sink(cap, err_echo)}
    timed_out, strays = False, 0
    try:
        timed_out = _pump(proc, sinks, None if timeout is None else t0 + timeout)
    finally:
        strays, signalled = _kill_tree(proc, token)
        proc.wait()
        _reap(proc, signalled)
        with _lock:
            _live.pop(proc.pid, None)
        _pump(proc, sinks, time.perf_counter() + DRAIN_S, drain=True)
        for stream in sinks:
            stream.close()
    out, err = sinks[proc.stdout], sinks[proc.stderr]
    return Finished(tuple(argv), None if timed_out else proc.returncode, timed_out, time.perf_counter() - t0,
                    out.value(), err.value(), out.total, err.total, strays)


def _pump(proc: subprocess.Popen, sinks: dict, deadline: float | None, drain: bool = False) -> bool:
    """Read both streams until the process ends (or, when draining, EOF); True at the deadline."""
    sel = selectors.DefaultSelector()
    for stream in sinks:
        if not stream.closed:
            try:
                sel.register(stream, selectors.EVENT_READ)
            except (ValueError, KeyError):
                continue
    try:
        while sel.get_map():
            now = time.perf_counter()
            if deadline is not None and now >= deadline:
                return not drain
            if not drain and proc.poll() is not None:
                return False  # ended: the caller kills what is left, then drains
            wait = 0.1 if deadline is None else min(0.1, deadline - now)
            for key, _ in sel.select(wait):
                data = os.read(key.fd, 1 << 16)
                if data:
                    sinks[key.fileobj].add(data)
                else:
                    sel.unregister(key.fileobj)
        if drain:
            return False
        try:  # both streams closed while the process runs on: wait for it, still to the deadline
            proc.wait(None if deadline is None else max(0.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            return True
        return False
    finally:
        sel.close()
