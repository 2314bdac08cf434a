"""Starting one process, contained: the one starter of every program tileproof runs as work.

(Short questions to a tool, git or Slurm's clients, go through ``runner.query``; the forked helper for byte work
is ``runner.forked``; nothing else in tileproof starts a process, which tests/test_architecture.py checks.)

Every child starts in its own session, stdin closed, its stdout and stderr read through ``select`` with a hard
deadline (each stream keeps its first ``cap`` bytes and counts the rest), and dies whole when it ends, at its
timeout, when tileproof is signalled (``install_signal_handlers``) or killed: by the containment chosen once per
process (``pid-namespace``, ``cgroup`` or ``marker``; ``TILEPROOF_CONTAINMENT``) and recorded on every step.
``scratch_dir`` makes a step's temp folder. How each containment holds, what it needs and costs, and the
temp folders: docs/containment.md.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import fcntl
import functools
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast, get_args

from tileproof.records.errors import TileproofError
from tileproof.records.models import Containment, Isolation
from tileproof.runner import wall as walls
from tileproof.runner.query import QueryError, ask
from tileproof.runner.stepinit import CGROUP, CGROUP_NAME, PID_NAMESPACE, STARTED, end_cgroup, proc_stat
from tileproof.runner.wall import Wall

DEFAULT_CAP = 16 * 1024 * 1024
"""Bytes kept per output stream unless ``--output-cap``/``TILEPROOF_OUTPUT_CAP`` says otherwise."""
CAP_VAR = "TILEPROOF_OUTPUT_CAP"
MARKER_VAR = "TILEPROOF_STEP"
"""Set in every child's environment: how its descendants are found after it ends (``marker``)."""
CONTAIN_VAR = "TILEPROOF_CONTAINMENT"
"""Names the one containment to use (it must hold here, or nothing starts); unset: the best that holds."""
CONTAINMENTS: tuple[Containment, ...] = get_args(Containment)
"""Every containment, best first: the order in which they are tried."""
ISOLATE_VAR = "TILEPROOF_ISOLATION"
"""Names the one wall to build (it must hold here, or nothing starts); unset: the best that holds."""
ISOLATIONS: tuple[Isolation, ...] = get_args(Isolation)
"""Every wall, best first (``none`` last: the program on the signer's side)."""
RESTORED = tuple(sorted(signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}))
"""Signals every program starts with at their default action, and unblocked, whatever tileproof had (``nohup``
ignores SIGHUP, a shell's background job SIGINT and SIGQUIT, a profiler or a tracer may block or ignore others)."""
DRAIN_S = 1.0
"""How long output is still read after the process tree is dead (buffered bytes)."""
END_GRACE_S = 2.0
"""How long a step's init has, once asked (SIGTERM), to end its scope before it is killed."""
STEP_INIT = Path(__file__).with_name("stepinit.py")
SCRATCH_PREFIX = "tileproof-scratch-"
"""The name of every scratch folder tileproof makes in the temp folder (``scratch_dir``)."""

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
    containment: Containment
    """How its processes were kept together and ended (``containment()``)."""
    isolation: Isolation = "none"
    """The wall it ran behind (``isolation()``); ``none`` for tileproof's own tools, started without one."""


# --- the live-children registry ------------------------------------------------------------


@dataclass(frozen=True)
class _Live:
    token: str
    cgroup: Path | None


_lock = threading.RLock()  # re-entrant: the signal handler may run while the main thread holds it
_live: dict[int, _Live] = {}  # pid -> marker token (and cgroup) of every running child
_stopping = threading.Event()
_subreaper_set = False


def _become_subreaper() -> None:
    global _subreaper_set
    if _LINUX and not _subreaper_set and _libc is not None:
        _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        _subreaper_set = True


@functools.cache
def _pdeathsig_launcher(sig: str = "KILL") -> tuple[str, ...] | None:
    """``(setpriv, --pdeathsig, SIG, --)`` when this machine's setpriv sets the death signal (checked once by
    running it), else None: the children are then forked with ``_child_setup``."""
    found = shutil.which("setpriv") if _LINUX else None
    if found is None:
        return None
    argv = (found, "--pdeathsig", sig, "--")
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


def _child_setup(sig: int = signal.SIGKILL, unblock: bool = False) -> None:  # between fork and exec: no locks
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    for restored in RESTORED:
        signal.signal(restored, signal.SIG_DFL)
    if unblock:
        signal.pthread_sigmask(signal.SIG_SETMASK, ())


def _inherited() -> bool:
    """Whether tileproof ignores or blocks a signal a program must start with at its default and unblocked
    (``RESTORED``): an exec keeps both, so such a child is forked with ``_child_setup`` (no vfork)."""
    return bool(signal.pthread_sigmask(signal.SIG_BLOCK, ())) or any(
        signal.getsignal(s) == signal.SIG_IGN for s in RESTORED if s not in (signal.SIGPIPE, signal.SIGXFSZ))


# --- choosing the containment ---------------------------------------------------------------


def _unshare(isolation: Isolation = "none") -> tuple[str, ...] | None:
    """The ``unshare`` launcher of a PID namespace; behind a wall also a mount and IPC namespace, and for
    ``user-namespace`` a user namespace whose root is this user (no host root)."""
    found = shutil.which("unshare") if _LINUX else None
    if found is None:
        return None
    wall = {"none": (), "separate-user": ("--mount", "--ipc"),
            "user-namespace": ("--user", "--map-root-user", "--mount", "--ipc")}[isolation]
    return (found, *wall, "--pid", "--fork", "--kill-child=TERM", "--mount-proc", "--")


def _own_cgroup() -> Path | None:
    """This process's cgroup v2 folder where this user may make child cgroups and move processes (its folder
    and its ``cgroup.procs`` writable: a delegated subtree, or root); else None. Whether a program really
    starts in a child of it, and ``cgroup.kill`` ends it, the trial run in ``_refused`` shows."""
    if not _LINUX:
        return None
    try:
        own = next(ln[3:] for ln in Path("/proc/self/cgroup").read_text().splitlines() if ln.startswith("0::"))
        mounts = [ln.split() for ln in Path("/proc/self/mountinfo").read_text().splitlines()]
    except (OSError, StopIteration):
        return None
    for fields in mounts:
        sep = fields.index("-") if "-" in fields else -1
        if sep < 0 or fields[sep + 1] != "cgroup2":
            continue
        root, point = fields[3], fields[4]
        if not (own == root or own.startswith(root.rstrip("/") + "/")):
            continue
        folder = Path(point, own[len(root):].lstrip("/"))
        if os.access(folder / "cgroup.procs", os.W_OK) and os.access(folder, os.W_OK):
            return folder
    return None


def _refused(kind: Containment) -> str | None:
    """Why ``kind`` cannot hold on this machine (tried once, by running ``true`` under it), or None."""
    if kind == "marker":
        return None
    if kind == "pid-namespace" and _unshare() is None:
        return "no unshare (util-linux) on PATH"
    if kind == "cgroup" and _own_cgroup() is None:
        return "no writable cgroup v2 folder holds this process"
    true = shutil.which("true", path=os.defpath) or "/bin/true"
    done = _start_and_wait(_Spec([true], {"PATH": os.defpath}, None, kind), timeout=20.0, cap=4096, echo=False)
    if done.exit_code == 0:
        return None
    said = [ln for ln in done.stderr.decode(errors="replace").splitlines() if ln.strip()]
    return said[-1] if said else f"exit {done.exit_code}"


def _wall_refused(level: Isolation) -> str | None:
    """Why the wall ``level`` cannot be built here (tried once: ``true`` behind it), or None."""
    if level == "none":
        return None
    if level == "separate-user" and os.geteuid() != 0:
        return "tileproof is not root"
    if _unshare(level) is None:
        return "no unshare (util-linux) on PATH"
    true = shutil.which("true", path=os.defpath) or "/bin/true"
    with scratch_dir() as tmp:
        try:
            spec = _Spec([true], {"PATH": os.defpath}, Path("/"), "pid-namespace", level, wall=Wall(Path("/"), (tmp,)))
            done = _start_and_wait(spec, timeout=20.0, cap=4096, echo=False)
        except TileproofError as e:
            return str(e)
    if done.exit_code == 0:
        return None
    said = [ln for ln in done.stderr.decode(errors="replace").splitlines() if ln.strip()]
    return said[-1] if said else f"exit {done.exit_code}"


@functools.cache
def isolation() -> Isolation:
    """The wall every program of this process runs behind: ``TILEPROOF_ISOLATION`` when set (and it must hold),
    else the first of ``ISOLATIONS`` that holds here. Chosen once per process; ``none`` only where neither wall
    can be built (``unisolated_reason`` says why)."""
    _load_uvm()
    return cast(Isolation, _first_that_holds(ISOLATE_VAR, ISOLATIONS, _wall_refused, _why_not))


_why_not: dict[Isolation, str] = {}
_granted: set[Path] = set()


def granted() -> tuple[Path, ...]:
    """Every folder a walled step of this process was given to write (its outputs: ``runner.integrity``)."""
    with _lock:
        return tuple(_granted)


def _load_uvm() -> None:
    """Make the NVIDIA driver's device files before any walled program needs them: the CUDA driver makes a
    missing ``/dev/nvidia-uvm`` through the setuid ``nvidia-modprobe``, which ``no_new_privs`` and a read-only
    ``/dev`` refuse behind the wall."""
    modprobe = shutil.which("nvidia-modprobe")
    if modprobe is None or not os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia-uvm"):
        return
    with contextlib.suppress(QueryError):
        ask([modprobe, "-u", "-c=0"], timeout=20)


def unisolated_reason() -> str:
    """One line: why this host runs programs without a wall (``isolation()`` is ``none``)."""
    told = os.environ.get(ISOLATE_VAR, "")
    if told == "none":
        return f"{ISOLATE_VAR}=none"
    why = _why_not.get("user-namespace") or _why_not.get("separate-user") or "no wall was tried"
    return f"neither wall holds here (user namespace: {why})"


@functools.cache
def containment() -> Containment:
    """How this process contains every child: ``TILEPROOF_CONTAINMENT`` when set (and it must hold), else
    the first of ``CONTAINMENTS`` that holds here. Chosen once per process."""
    return cast(Containment, _first_that_holds(CONTAIN_VAR, CONTAINMENTS, _refused))


def _first_that_holds(var: str, choices: Sequence[str], refused: Callable[[Any], str | None],
                      reasons: dict[Any, str] | None = None) -> str:
    """``$var`` when set (one of ``choices``, and it must hold here), else the first of ``choices`` that holds; why
    each one tried did not go into ``reasons``. One rule for the wall (``isolation``) and the containment: the
    last choice of each always holds."""
    wanted = os.environ.get(var, "")
    if wanted and wanted not in choices:
        raise TileproofError(f"{var}={wanted!r}: expected one of {', '.join(choices)} "
                             f"(fix: unset it to use the best that holds here)")
    for choice in choices:
        if wanted and choice != wanted:
            continue
        why = refused(choice)
        if why is None:
            return choice
        if reasons is not None:
            reasons[choice] = why
        if wanted:
            raise TileproofError(f"{var}={wanted}: it does not hold here: {why} "
                                 f"(fix: unset it to fall back to the best that holds)")
    raise TileproofError(f"{var}: none of {', '.join(choices)} holds here")


# --- scratch folders ----------------------------------------------------------------------------


@functools.cache
def _sweep_scratch() -> None:
    """Remove the scratch folders of tileproofs that are gone (killed; nothing could remove them then):
    this user's ``tileproof-scratch-*`` folders whose lock no process holds. Once per process."""
    base = Path(tempfile.gettempdir())
    try:
        entries = [e for e in os.scandir(base) if e.name.startswith(SCRATCH_PREFIX)]
    except OSError:
        return
    for entry in entries:
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if os.fstat(fd).st_uid != os.getuid():
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its tileproof is alive
            continue
        else:
            shutil.rmtree(entry.path, ignore_errors=True)
        finally:
            os.close(fd)


@contextlib.contextmanager
def scratch_dir(parent: Path | None = None) -> Iterator[Path]:
    """A new private temp folder for one step or session (a check report's path, a JIT cache), removed
    when the ``with`` ends. It holds a lock while it lives: once its tileproof is gone, the next tileproof
    that makes one removes it (``_sweep_scratch``); a step's init removes it at once (``scratch=``).
    ``parent``: a scratch folder to make it in (a session's handover folder: ``runner.outside_check``), removed
    with it."""
    _sweep_scratch()
    made = Path(tempfile.mkdtemp(prefix="tileproof-new-", dir=parent))
    fd = os.open(made, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # taken before it has the name a sweep looks for
        path = made.with_name(SCRATCH_PREFIX + made.name[len("tileproof-new-"):])
        os.rename(made, path)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
    finally:
        os.close(fd)
        shutil.rmtree(made, ignore_errors=True)


# --- finding and killing a step's processes (marker) ----------------------------------------


def _proc_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, state, process group) of every process, from /proc (empty off Linux)."""
    table: dict[int, tuple[int, str, int]] = {}
    if not _LINUX:
        return table
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (stat := proc_stat(entry.name)) is not None:
            table[int(entry.name)] = (stat[1], stat[0], stat[2])
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
    stat = proc_stat(pid)
    return stat is not None and stat[0] != "Z"


def kill_all_live() -> None:
    """Kill every running child's tree (a signal arrived, or tileproof is exiting)."""
    with _lock:
        live = list(_live.items())
    for pid, child in live:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # a namespace's unshare and PID 1: the namespace dies with them
        if child.cgroup is not None:
            with contextlib.suppress(OSError):
                (child.cgroup / "cgroup.kill").write_text("1")


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


@dataclass(frozen=True)
class _Spec:
    """One child as it is to be started: its argv, environment and folder, how it is contained (``kind``) and
    walled (``wall``, at ``level``; None: no wall), and the scratch its init removes should tileproof be killed."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path | None
    kind: Containment
    level: Isolation = "none"
    scratch: Path | None = None
    wall: Wall | None = None


@dataclass(frozen=True)
class _Started:
    """A child as started: the process tileproof waits on (the program, or its launcher), the read end of
    its init's status pipe and its cgroup (None for ``marker``)."""

    proc: subprocess.Popen
    status_fd: int | None
    cgroup: Path | None


def _launch(spec: _Spec, path: str, token: str, plan: str | None = None,
            stdin: int = subprocess.DEVNULL) -> _Started:
    """Start ``spec.argv`` (its file: ``path``) under ``spec.kind``; behind the wall ``plan`` (``spec.level``) when
    one is given (always in a PID namespace, its init building the view first). ``stdin``: closed, or a pipe
    (``start``)."""
    argv, kind, scratch = spec.argv, spec.kind, spec.scratch
    common: dict = dict(cwd=spec.cwd, env={**spec.env, MARKER_VAR: token}, stdin=stdin, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, start_new_session=True)
    if kind == "marker":
        launcher = None if _inherited() else _pdeathsig_launcher()
        spawn = [*launcher, path, *argv[1:]] if launcher else argv
        setup = functools.partial(_child_setup, unblock=True)
        proc = subprocess.Popen(spawn, preexec_fn=setup if _LINUX and not launcher else None, **common)
        return _Started(proc, None, None)
    # A namespace's unshare dies with tileproof (SIGKILL; it then sends SIGTERM to PID 1); a cgroup's init
    # itself gets SIGTERM, which it handles by ending the cgroup.
    sig = "KILL" if kind == "pid-namespace" else "TERM"
    launcher = _pdeathsig_launcher(sig)
    read, write = os.pipe()
    cgroup = None
    try:
        if kind == "pid-namespace":
            unshare = _unshare(spec.level if plan is not None else "none")
            assert unshare is not None  # containment() or isolation() chose it
            scope = [*unshare, sys.executable, "-I", "-S", str(STEP_INIT), PID_NAMESPACE]
        else:
            own = _own_cgroup()
            assert own is not None  # containment() chose it
            cgroup = own / f"{CGROUP_NAME}{os.getpid()}-{token}"
            cgroup.mkdir()
            scope = [sys.executable, "-I", "-S", str(STEP_INIT), f"{CGROUP}{cgroup}"]
        spawn = [*(launcher or ()), *scope, str(write), str(scratch or "-"), plan or "-", path, *argv]
        setup = functools.partial(_child_setup, getattr(signal, f"SIG{sig}"))
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # the init starts with it blocked,
        try:  # so that a death signal sent before it can handle one waits for it (stepinit's docstring)
            proc = subprocess.Popen(spawn, pass_fds=(write,), preexec_fn=None if launcher else setup, **common)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
    except BaseException:
        os.close(read)
        if cgroup is not None:
            end_cgroup(cgroup)
        raise
    finally:
        os.close(write)
    return _Started(proc, read, cgroup)


def _status(fd: int) -> tuple[bool, list[str]]:
    """Whether the init started, and its one line (``exit STATUS STRAYS``, ``ended - STRAYS``, ``error ERRNO 0``)
    split ([] when it wrote none: it died, or never started)."""
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 4096)
    except OSError:
        data = b""
    finally:
        os.close(fd)
    words = data.removeprefix(STARTED).split(b"\n")[0].decode(errors="replace").split()
    return data.startswith(STARTED), (words if len(words) == 3 else [])


def start_and_wait(argv: list[str], *, env: dict[str, str], cwd: Path | None = None,
                   timeout: float | None = None, cap: int | None = None, scratch: Path | None = None,
                   wall: Wall | None = None) -> Finished:
    """Run ``argv`` (never through a shell) to its end or ``timeout``; its whole tree dies with it.

    ``scratch``: the step's ``scratch_dir``, removed by its init should tileproof be killed while it runs.
    ``wall``: untrusted work (a program, an export of its kernels): it runs behind the wall ``isolation()``
    builds here, reading ``wall.root`` and writing only its private scratch and ``wall.writable``; without a wall
    where none can be built (``isolation()`` is ``none``, and the step says so)."""
    return _start_and_wait(_spec(argv, env, cwd, scratch, wall), timeout=timeout, cap=output_cap(cap), echo=False)


def start_and_echo(argv: list[str], *, env: dict[str, str], cwd: Path | None = None,
                   timeout: float | None = None) -> Finished:
    """``start_and_wait``, its streams also copied to this process's own stdout and stderr as they arrive (a
    child someone watches, e.g. a fleet task's ``run`` in its Slurm log)."""
    return _start_and_wait(_spec(argv, env, cwd, None, None), timeout=timeout, cap=output_cap(None), echo=True)


def _spec(argv: list[str], env: dict[str, str], cwd: Path | None, scratch: Path | None, wall: Wall | None,
          grant_unbuilt: bool = True) -> _Spec:
    """How a child is started here: behind ``wall`` where one can be built (in a PID namespace), else in the
    best containment this host has. Its ``wall.writable`` joins ``granted()``; where no wall can be built, only
    when ``grant_unbuilt`` (a step's; not the session checker's, ``start``)."""
    if _stopping.is_set():
        raise Interrupted("interrupted: no new process is started")
    level = isolation() if wall is not None else "none"
    if wall is not None and (grant_unbuilt or level != "none"):
        with _lock:
            _granted.update(Path(w).resolve() for w in wall.writable)
    kind = "pid-namespace" if level != "none" else containment()
    return _Spec(argv, env, cwd, kind, level, scratch, wall if level != "none" else None)


def _start_and_wait(spec: _Spec, *, timeout: float | None, cap: int, echo: bool) -> Finished:
    argv = spec.argv
    if spec.kind == "marker":
        _become_subreaper()
    token = secrets.token_hex(8)
    t0 = time.perf_counter()
    plan = None if spec.wall is None else walls.plan(spec.level, spec.wall, spec.env, argv)
    try:
        path = _executable(argv[0], spec.env, spec.cwd)
        with _lock:
            started = _launch(spec, path, token, plan)
            _live[started.proc.pid] = _Live(token, started.cgroup)
    except OSError as e:
        return Finished(tuple(argv), 127, False, time.perf_counter() - t0, b"",
                        f"{argv[0]}: {e.strerror}\n".encode(), 0, 0, 0, spec.kind, spec.level)
    proc = started.proc
    assert proc.stdout is not None and proc.stderr is not None  # both are pipes
    out_echo, err_echo = (sys.stdout.buffer, sys.stderr.buffer) if echo else (None, None)
    if echo:  # what this process printed comes first
        sys.stdout.flush()
        sys.stderr.flush()
    sinks = {proc.stdout: _Sink(cap, out_echo), proc.stderr: _Sink(cap, err_echo)}
    timed_out = False
    try:
        timed_out = _pump(proc, sinks, None if timeout is None else t0 + timeout)
    finally:
        ended = _close(started, token, sinks)
    return _finished(spec, ended, sinks, started, timed_out, t0)


def _close(started: _Started, token: str, sinks: dict) -> tuple[int, bool, list[str]]:
    """End a started child's whole tree and read what is left of its streams: (strays killed, whether its init
    started, its init's status words)."""
    proc = started.proc
    strays, init_started = 0, False
    status: list[str] = []
    try:
        if started.status_fd is None:
            strays, signalled = _kill_tree(proc, token)
            proc.wait()
            _reap(proc, signalled)
        else:
            _end_scope(started)
            init_started, status = _status(started.status_fd)
    finally:
        with _lock:
            _live.pop(proc.pid, None)
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        _pump(proc, sinks, time.perf_counter() + DRAIN_S, drain=True)
        for stream in sinks:
            stream.close()
    return strays, init_started, status


def _finished(spec: _Spec, ended: tuple[int, bool, list[str]], sinks: dict, started: _Started,
              timed_out: bool, t0: float) -> Finished:
    """What a closed child did (``_close``), as ``Finished``; a wall that could not be built is refused."""
    argv, kind, level = spec.argv, spec.kind, spec.level
    strays, init_started, status = ended
    proc = started.proc
    out, err = sinks[proc.stdout], sinks[proc.stderr]
    exit_code: int | None = proc.returncode
    stderr = err.value()
    if status:
        what, value, count = status
        strays = int(count)
        if what == "wall":  # its init could not build the wall: nothing of the program ran
            said = [ln for ln in stderr.decode(errors="replace").splitlines() if ln.strip()]
            raise TileproofError(f"{argv[0]}: not started: the {level} wall could not be built here "
                                 f"({said[-1] if said else 'no reason given'}); fix: {ISOLATE_VAR}=none runs "
                                 f"programs unisolated (only a key allowed to sign unisolated runs signs them)")
        if what == "exit":
            exit_code = os.waitstatus_to_exitcode(int(value))
        elif what == "ended":  # still running when its scope was killed (SIGKILL, like every process of it)
            exit_code = -signal.SIGKILL
        else:  # "error": the program could not be started, as subprocess would have said
            exit_code, stderr = 127, f"{argv[0]}: {os.strerror(int(value))}\n".encode()
    elif init_started:  # its init was killed (from outside, or by tileproof's signal handler), and the
        exit_code = -signal.SIGKILL  # program with every process of its scope (unshare says what it saw)
    elif started.status_fd is not None and exit_code is not None and exit_code > 0:
        exit_code = 127  # its launcher (unshare) failed before the init started: its stderr says why
    return Finished(tuple(argv), None if timed_out else exit_code, timed_out, time.perf_counter() - t0,
                    out.value(), stderr, out.total, err.total, strays, kind, level)


class Running:
    """A contained child kept running to answer one line per line it is sent (``start``): tileproof's own checker
    of a run session (``runner.outside_check``). Its stdin is a pipe; its stdout is read line by line; its stderr
    keeps its first ``cap`` bytes. ``end`` ends its whole tree, as ``start_and_wait`` ends a step's."""

    def __init__(self, spec: _Spec, started: _Started, token: str, cap: int, t0: float) -> None:
        self.spec, self.started, self.token, self.t0 = spec, started, token, t0
        self.argv, self.kind, self.level = spec.argv, spec.kind, spec.level
        proc = started.proc
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        self.sinks = {proc.stdout: _Sink(cap), proc.stderr: _Sink(cap)}
        self._err = self.sinks[proc.stderr]
        self.cap = cap
        self._buffer = b""
        self._eof = False
        self._drained: set[object] = set()
        self.timed_out = False
        self._result: Finished | None = None

    def send(self, line: bytes) -> bool:
        """Write one line (at most ``select.PIPE_BUF`` bytes: never blocks on a child that reads nothing); False
        when the child is gone."""
        stdin = self.started.proc.stdin
        if stdin is None or self._eof or self.started.proc.poll() is not None:
            return False
        try:
            stdin.write(line.rstrip(b"\n") + b"\n")
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def read_line(self, timeout: float) -> bytes | None:
        """The child's next line of stdout, or None: it ended, closed its stdout, or wrote no whole line within
        ``timeout`` seconds (``timed_out``) or within ``cap`` bytes."""
        deadline = time.perf_counter() + timeout
        proc = self.started.proc
        while b"\n" not in self._buffer:
            if self._eof or len(self._buffer) > self.cap:
                return None
            now = time.perf_counter()
            if now >= deadline:
                self.timed_out = True
                return None
            with selectors.DefaultSelector() as sel:
                for stream in self.sinks:
                    if not stream.closed and stream not in self._drained:
                        sel.register(stream, selectors.EVENT_READ)
                ready = sel.select(min(0.1, deadline - now))
            for key, _ in ready:
                data = os.read(key.fd, 1 << 16)
                if key.fileobj is proc.stdout:
                    if data:
                        self._buffer += data
                        self.sinks[proc.stdout].add(data)
                    else:
                        self._eof = True
                elif data:
                    self._err.add(data)
                else:
                    self._drained.add(key.fileobj)
            if not ready and proc.poll() is not None and b"\n" not in self._buffer:
                self._eof = True
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def end(self) -> Finished:
        """End the child's whole tree (its stdin closed first: a child that ends at end of input ends by itself
        within ``END_GRACE_S``) and say what it did; once."""
        if self._result is None:
            proc = self.started.proc
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            if not self.timed_out:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(END_GRACE_S)
            ended = _close(self.started, self.token, self.sinks)
            try:
                self._result = _finished(self.spec, ended, self.sinks, self.started, self.timed_out, self.t0)
            except TileproofError as e:  # the wall could not be built: it never ran
                self._result = Finished(tuple(self.argv), 127, False, time.perf_counter() - self.t0, b"",
                                        f"{e}\n".encode(), 0, 0, 0, self.kind, self.level)
        return self._result


def start(argv: list[str], *, env: dict[str, str], cwd: Path | None = None, cap: int | None = None,
          scratch: Path | None = None, wall: Wall | None = None) -> Running:
    """Start ``argv`` as ``start_and_wait`` would (its containment, behind ``wall``), but with its stdin a pipe,
    and return at once: the caller sends it lines and reads its answers (``Running``), and ends it with
    ``Running.end``. OSError when ``argv[0]`` cannot be run."""
    spec = _spec(argv, env, cwd, scratch, wall, grant_unbuilt=False)
    if spec.kind == "marker":
        _become_subreaper()
    token = secrets.token_hex(8)
    t0 = time.perf_counter()
    plan = None if spec.wall is None else walls.plan(spec.level, spec.wall, env, argv)
    path = _executable(argv[0], env, cwd)
    with _lock:
        started = _launch(spec, path, token, plan, stdin=subprocess.PIPE)
        _live[started.proc.pid] = _Live(token, started.cgroup)
    return Running(spec, started, token, output_cap(cap), t0)


def _end_scope(started: _Started) -> None:
    """End a namespace's or cgroup's step: ask its init (SIGTERM, to the launcher's group) if it still runs,
    kill the group if the init does not end in ``END_GRACE_S``; then kill what a cgroup still holds."""
    proc = started.proc
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)  # unshare blocks it; PID 1 (or the cgroup's init) ends the step
        try:
            proc.wait(END_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if started.cgroup is not None:  # its init killed (a signal to tileproof): nothing of it may outlive it
        end_cgroup(started.cgroup)


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
