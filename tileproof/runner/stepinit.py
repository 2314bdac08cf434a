"""The first process of a contained step: it starts the program, ends the step's scope, reports.

``runner.process`` runs it as ``python -I -S stepinit.py SCOPE STATUS_FD SCRATCH FILE ARGV...`` (isolated; it
imports only ``os`` and the C half of ``signal``, to start in about 15 ms of CPU time, and nothing of tileproof,
so that it runs alone; ``runner.process`` imports ``end_cgroup`` and the scope names from here). ``SCOPE``:
``pid-namespace`` (this process is PID 1 of the step's namespace, the program PID 2) or ``cgroup:FOLDER`` (the
program alone runs in FOLDER, ended with ``cgroup.kill``; this process is a subreaper).

The program is forked and exec'd in its own session, with the environment this process was exec'd with
(``/proc/self/environ``: Python's locale coercion may have added ``LC_CTYPE``) and the signal state a child
started directly would have. The step ends when the program does, or on SIGTERM (started blocked, so none is
lost): count the scope's live processes outside the program's process group, write one line to STATUS_FD
(``exit WAITSTATUS STRAYS``; ``ended - STRAYS`` when the program was still running; ``error ERRNO 0`` when it
could not start; the first byte, ``+``, says this process started), kill the scope, exit. A write that finds no
reader means tileproof is gone (``kill -9``): SCRATCH (``-``: none) is removed here. Why the program is never
PID 1, and the rest of the design: docs/containment.md.
"""

from __future__ import annotations

# _signal: signal.py only wraps it in enums, whose import is 5 to 7 ms of this process's 25 ms start (CPU)
import _signal as signal  # type: ignore[import-not-found]
import os
import sys
import time

PID_NAMESPACE = "pid-namespace"
CGROUP = "cgroup:"
"""The SCOPE argument's prefix before a cgroup v2 folder."""
STARTED = b"+"
"""The byte this process writes first: it runs, and tileproof still reads."""
CGROUP_EMPTY_S = 5.0
"""How long ``end_cgroup`` waits for the killed processes to leave their cgroup."""
_PR_SET_CHILD_SUBREAPER = 36


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _tried(path: str, text: str) -> bool:
    """``_write``, saying whether it could."""
    try:
        _write(path, text)
    except OSError:
        return False
    return True


def proc_stat(pid: int | str) -> tuple[str, int, int] | None:
    """(state, parent pid, process group) of ``pid`` from ``/proc``; None when it is gone."""
    try:
        raw = _read(f"/proc/{pid}/stat")
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()
    return fields[0].decode(), int(fields[1]), int(fields[2])


def _members(scope: str) -> list[str]:
    """Every process of the scope but this one, as ``/proc`` names them."""
    if scope == PID_NAMESPACE:
        return [e for e in os.listdir("/proc") if e.isdigit() and e != "1"]
    found: list[str] = []
    for folder, _, _ in os.walk(scope[len(CGROUP):]):
        try:
            found += _read(os.path.join(folder, "cgroup.procs")).decode().split()
        except OSError:
            continue
    return [p for p in found if p != str(os.getpid())]


def _strays(scope: str, program: int | None) -> int:
    """Live processes of the scope outside the program's process group (its pid: it leads its session)."""
    n = 0
    for pid in _members(scope):
        stat = proc_stat(pid)
        if stat is not None and stat[0] not in ("Z", "X") and stat[2] != program:
            n += 1
    return n


CGROUP_NAME = "tileproof-"
"""How the name of every cgroup folder tileproof makes begins (``end_cgroup`` touches no other)."""


def end_cgroup(folder: str | os.PathLike[str]) -> None:
    """Kill every process in the cgroup ``folder`` (one tileproof made) and below, wait until it is empty,
    remove its folders."""
    root = os.fspath(folder)
    if not os.path.basename(root).startswith(CGROUP_NAME) or not os.path.isdir(root):
        return
    _tried(os.path.join(root, "cgroup.kill"), "1")
    until = time.monotonic() + CGROUP_EMPTY_S
    while time.monotonic() < until:
        try:
            if b"populated 0" in _read(os.path.join(root, "cgroup.events")):
                break
        except OSError:
            break
        time.sleep(0.002)
    for below, _, _ in sorted(os.walk(root), key=lambda w: w[0].count(os.sep), reverse=True):  # deepest first
        try:
            os.rmdir(below)
        except OSError:
            continue


def _reap_all() -> None:
    """Wait for every child of this process (all killed by now)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _kill_namespace() -> bool:
    """As PID 1: kill every process of the namespace but this one; False when there was none.

    Only ever as PID 1: anywhere else ``kill(-1)`` is every process this user may signal (``main``
    refuses the namespace scope outside PID 1 before anything starts; this checks again)."""
    if os.getpid() != 1:
        return False
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def _kill_scope(scope: str, orphaned: bool) -> None:
    if scope == PID_NAMESPACE:
        if _kill_namespace() and orphaned:  # wait for them (they all come to PID 1) before removing their scratch
            _reap_all()
    else:
        end_cgroup(scope[len(CGROUP):])
        _reap_all()


def _environment() -> dict[bytes, bytes]:
    """The environment this process was exec'd with, which the program gets."""
    env: dict[bytes, bytes] = {}
    for item in _read("/proc/self/environ").split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[name] = value
    return env


def _spawn(scope: str, path: str, program: list[str], mask: set[int], defaults: set[int]) -> int:
    """Fork and exec the program in its own session (in a cgroup scope, in the cgroup: it joins before exec,
    so that ``cgroup.kill`` leaves this process to report). The OSError it could not start with is raised
    here. (Not ``posix_spawn``: glibc's leaves its two internal signals ignored in the program.)"""
    env = _environment()
    errors_r, errors_w = os.pipe()  # closed on exec: EOF with nothing written means it started
    pid = os.fork()
    if pid == 0:
        try:
            os.close(errors_r)
            os.setsid()
            if scope != PID_NAMESPACE:
                _write(os.path.join(scope[len(CGROUP):], "cgroup.procs"), "0")
            for sig in defaults:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.execve(path, program, env)
        except OSError as e:
            os.write(errors_w, str(e.errno).encode())
        finally:
            os._exit(127)
    os.close(errors_w)
    said = os.read(errors_r, 64)
    os.close(errors_r)
    if said:
        os.waitpid(pid, 0)
        raise OSError(int(said), os.strerror(int(said)))
    return pid


def main(argv: list[str]) -> None:
    scope, fd, scratch, path, *program = argv
    if scope == PID_NAMESPACE and os.getpid() != 1:
        sys.exit(f"stepinit: {PID_NAMESPACE} given, but this is not PID 1 of a PID namespace: nothing started")
    status_fd = int(fd)
    os.set_inheritable(status_fd, False)
    program_pid: list[int | None] = [None]

    def end(kind: str, value: object) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        strays = _strays(scope, program_pid[0])
        try:
            os.write(status_fd, f"{kind} {value} {strays}\n".encode())
            orphaned = False
        except OSError:  # no reader: tileproof is gone
            orphaned = True
        _kill_scope(scope, orphaned)
        if orphaned and scratch != "-":
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)
        os._exit(0)

    # SIGTERM came blocked (see above) and stays so until the program's pid is known; the program gets the
    # mask without it, SIGPIPE and SIGXFSZ at their defaults (subprocess's restore_signals) and SIGINT as
    # tileproof had it (ignored only if it was).
    mask: set[int] = set(signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})) - {signal.SIGTERM}
    defaults: set[int] = {signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM}
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        defaults.add(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: end("ended", "-"))
    if scope != PID_NAMESPACE:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        os.write(status_fd, STARTED)
    except OSError:  # tileproof died before this process could handle its death signal
        end("ended", "-")
    try:
        program_pid[0] = pid = _spawn(scope, path, program, mask, defaults)
    except OSError as e:
        end("error", e.errno)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    while True:
        got, status = os.waitpid(-1, 0)  # every orphan comes here; the program's end ends the step
        if got == pid:
            end("exit", status)


if __name__ == "__main__":
    main(sys.argv[1:])
