"""The first process of a contained step: it starts the program, ends the step's scope, reports.

``runner.process`` runs it as ``python -I -S stepinit.py SCOPE STATUS_FD SCRATCH WALL FILE ARGV...`` (isolated; it
imports only ``os`` and the C half of ``signal``, so that its start costs a step little, and nothing of tileproof,
so that it runs alone; ``runner.process`` imports ``end_cgroup`` and the scope names from here). ``SCOPE``:
``pid-namespace`` (this process is PID 1 of the step's namespace, the program PID 2) or ``cgroup:FOLDER`` (the
program alone runs in FOLDER, ended with ``cgroup.kill``; this process is a subreaper). ``WALL``: ``-``, or the
view ``runner.wall.plan`` wrote, which this process (root of the step's mount namespace) builds before the
program starts, the program's privileges dropped between its fork and exec (``_build_wall``, ``_drop``); when it
cannot, it writes ``wall ERRNO 0`` and nothing starts.

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

# _signal: signal.py only wraps it in enums, whose import is a fifth of this process's start (CPU)
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


def _spawn(scope: str, path: str, program: list[str], defaults: set[int],
           drop: tuple[str, int, int, list[int]] | None = None) -> int:
    """Fork and exec the program in its own session (in a cgroup scope, in the cgroup: it joins before exec,
    so that ``cgroup.kill`` leaves this process to report; behind a wall, with its privileges dropped:
    ``_drop``). The OSError it could not start with is raised here. (Not ``posix_spawn``: glibc's leaves its
    two internal signals ignored in the program.)"""
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
            signal.pthread_sigmask(signal.SIG_SETMASK, ())  # nothing blocked
            if drop is not None:
                _drop(*drop)
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


# --- the wall (runner.wall plans it; built here, as root of the step's mount namespace) ------------------------

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT = 1, 2, 4, 8, 32
_MS_NOATIME, _MS_NODIRATIME, _MS_BIND, _MS_REC, _MS_PRIVATE = 1024, 2048, 4096, 16384, 1 << 18
_MS_RELATIME, _MS_STRICTATIME = 1 << 21, 1 << 24
_OPTION_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC, "noatime": _MS_NOATIME,
                 "nodiratime": _MS_NODIRATIME, "relatime": _MS_RELATIME}
_SYS_MOUNT_SETATTR = 442  # the same number on every architecture (the unified syscall table)
_AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = -100, 0x8000, 1
_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 4, 24, 38, 47
_PR_CAP_AMBIENT_CLEAR_ALL, _CAP_LAST = 4, 63
_libc = None


def _c():
    """libc through ctypes (imported only behind a wall: it costs a few ms)."""
    global _libc
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _fail(what: str) -> OSError:
    import ctypes

    err = ctypes.get_errno()
    return OSError(err, f"wall: {what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    if _c().mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        raise _fail(f"mount {target}")


def _setattr(path: str, readonly: bool, recursive: bool) -> bool:
    """``mount_setattr``: read-only on (or off) for the mount at ``path`` (and below); False where the kernel
    has none (before Linux 5.12)."""
    import ctypes

    attr = (ctypes.c_uint64 * 4)(_MOUNT_ATTR_RDONLY if readonly else 0, 0 if readonly else _MOUNT_ATTR_RDONLY, 0, 0)
    got = _c().syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path.encode(), _AT_RECURSIVE if recursive else 0,
                       ctypes.byref(attr), ctypes.sizeof(attr))
    if got == 0:
        return True
    if ctypes.get_errno() == 38:  # ENOSYS
        return False
    raise _fail(f"read-only {path}")


def _mountinfo() -> list[tuple[str, int]]:
    """(mount point, its per-mount flags) of every mount of this namespace."""
    found = []
    for line in _read("/proc/self/mountinfo").decode().splitlines():
        fields = line.split(" ")
        point = fields[4].encode().decode("unicode_escape")
        flags = 0
        for option in fields[5].split(","):
            flags |= _OPTION_FLAGS.get(option, 0)
        found.append((point, flags))
    return found


def _readonly(path: str, readonly: bool, recursive: bool) -> None:
    """Make the mount at ``path`` (and every mount below, ``recursive``) read-only, or writable again."""
    if _setattr(path, readonly, recursive):
        return
    for point, flags in _mountinfo():  # an older kernel: remount each, keeping the flags it has
        if point == path or (recursive and point.startswith(path.rstrip("/") + "/")):
            try:
                _mount(None, point, None, _MS_REMOUNT | _MS_BIND | flags | (_MS_RDONLY if readonly else 0))
            except OSError:
                if point == path or not point.startswith(("/proc/", "/sys/", "/dev/")):
                    raise


def _makedirs(path: str, mode: int = 0o755) -> None:
    parent = os.path.dirname(path)
    if parent != path and not os.path.isdir(parent):
        _makedirs(parent, mode)
    if not os.path.isdir(path):
        os.mkdir(path, mode)
        os.chmod(path, mode)


def _bind(fd: int, target: str, recursive: bool = True) -> None:
    if not os.path.isdir(target):
        _makedirs(target)
    _mount(f"/proc/self/fd/{fd}", target, None, _MS_BIND | (_MS_REC if recursive else 0))


def _build_wall(spec: str) -> tuple[str, int, int, list[int]]:
    """Build the view ``runner.wall.plan`` wrote; what ``_drop`` needs (level, uid, gid, groups)."""
    directives: dict[str, list[str]] = {}
    for line in spec.split("\n"):
        word, _, rest = line.partition(" ")
        directives.setdefault(word, []).append(rest)
    level, uid_s, gid_s, groups_s = directives["level"][0].split(" ")
    uid, gid = int(uid_s), int(gid_s)
    groups = [] if groups_s == "-" else [int(g) for g in groups_s.split(",")]
    size = int(directives["size"][0])
    home = directives["home"][0]
    hidden, keep, write = directives.get("hide", []), directives.get("keep", []), directives.get("write", [])
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing mounted here reaches the host
    held = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in [*keep, *write]}  # before anything hides them
    # the private scratch: one tmpfs, its /tmp; /var/tmp, /dev/shm and the home are folders of it
    _mount("tileproof-scratch", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size},mode=1777")
    own = {"/var/tmp": 0o1777, "/dev/shm": 0o1777, home: 0o700}
    for folder in hidden:
        if folder in own:
            stand_in = "/tmp/.tileproof-" + folder.strip("/").replace("/", "-")
            os.mkdir(stand_in, own[folder])
            os.chmod(stand_in, own[folder])
            os.chown(stand_in, uid, gid)
            fd = os.open(stand_in, os.O_PATH | os.O_DIRECTORY)
            _bind(fd, folder, recursive=False)
            os.close(fd)
    # the signing key's folders (empty) and the folders bound back, outermost first: a key folder inside a kept
    # one is hidden again on top of it, a kept folder inside a key folder is bound back on top of that
    keys = [f for f in hidden if f not in own and f != "/tmp"]
    for _depth, is_key, path in sorted([(p.rstrip("/").count("/"), 1, p) for p in keys]
                                       + [(p.rstrip("/").count("/"), 0, p) for p in keep]):
        if is_key:
            if os.path.isdir(path):  # else not in this view at all
                _mount("tileproof-hidden", path, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=64k,mode=755")
        else:
            _bind(held[path], path)
    for path in directives.get("mask", []):
        if os.path.lexists(path):
            _mount("/dev/null", path, None, _MS_BIND)
    for path in write:
        _bind(held[path], path, recursive=False)
        if uid:  # the folder and what tileproof made in it (an output's own folders) become the program's
            os.chown(path, uid, gid)
            for below, folders, files in os.walk(path):
                for name in folders + files:
                    os.lchown(os.path.join(below, name), uid, gid)
    for fd in held.values():
        os.close(fd)
    _readonly("/", True, True)
    # the step's own /proc as procfs has it (a process writes its own entries, e.g. /proc/self/comm; what it may
    # not write, it may not by the files' own permissions), the scratch and the report folders writable again
    for folder in ["/proc", "/tmp", *[f for f in hidden if f in own]]:
        _readonly(folder, False, False)
    for path in write:
        _readonly(path, False, False)
    _c().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # nothing of this process for the program to read or trace
    return level, uid, gid, groups


def _drop(level: str, uid: int, gid: int, groups: list[int]) -> None:
    """In the program's process, before exec: no capability it could get back (an empty bounding and
    ambient set, ``no_new_privs``), and as ``separate-user`` the program's own uid and gid."""
    libc = _c()
    for cap in range(_CAP_LAST + 1):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and cap < 38:  # 0..37: every kernel since 4.3
            raise _fail(f"dropping capability {cap}")
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if level == "separate-user":
        os.setgroups(groups)
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)  # the permitted and effective sets go with uid 0
    else:
        import ctypes

        header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: none (two 32-bit halves)
        if libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
            raise _fail("capset")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("no_new_privs")


def main(argv: list[str]) -> None:
    scope, fd, scratch, wall, path, *program = argv
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

    # SIGTERM came blocked (see above) and stays so until the program's pid is known; the program starts with no
    # signal blocked and every signal at its default, whatever tileproof had (nohup ignores SIGHUP; a shell's
    # background job SIGINT and SIGQUIT; a profiler or a tracer may block or ignore others).
    mask: set[int] = set(signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})) - {signal.SIGTERM}
    defaults: set[int] = {s for s in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}
                          if signal.getsignal(s) == signal.SIG_IGN} | {signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM,
                                                                        signal.SIGHUP, signal.SIGINT, signal.SIGQUIT}
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: end("ended", "-"))
    if scope != PID_NAMESPACE:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        os.write(status_fd, STARTED)
    except OSError:  # tileproof died before this process could handle its death signal
        end("ended", "-")
    drop = None
    if wall != "-":
        try:
            drop = _build_wall(wall)
        except (OSError, ValueError, KeyError) as e:
            os.write(2, f"{e}\n".encode())
            end("wall", getattr(e, "errno", None) or 0)
    try:
        program_pid[0] = pid = _spawn(scope, path, program, defaults, drop)
    except OSError as e:
        end("error", e.errno)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    while True:
        got, status = os.waitpid(-1, 0)  # every orphan comes here; the program's end ends the step
        if got == pid:
            end("exit", status)


if __name__ == "__main__":
    main(sys.argv[1:])
