"""The wall between a program and the signer: what a program behind it sees, as a plan ``runner.stepinit`` builds.

A program tileproof runs as untrusted work (a lesson program, an export of its kernels, a compiler reading its
source) starts behind the wall: its own PID and mount namespace, as a separate unprivileged user (tileproof is
root: ``separate-user``) or in a user namespace without host root (``user-namespace``), with ``no_new_privs``
and an empty capability bounding set, so that it can neither undo its namespaces nor see, trace or signal
tileproof. In its mount namespace everything is read-only; the signing key's folder, tileproof's home and the
temp folders are hidden under empty folders; the paths the program needs (the checkout, the Python
environments and their interpreter, tileproof's launcher, the folders on its PATH) are bound back read-only;
a private, size-capped scratch is its ``/tmp``, ``/var/tmp``, ``/dev/shm`` and home, and its report folders
(``Wall.writable``) are the only other places it can write. ``plan`` writes that view down for the step's
init, which builds it before it starts the program (docs/containment.md, "The wall").
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tileproof.records.errors import TileproofError
from tileproof.records.models import Isolation
from tileproof.records.trust.signing import DEFAULT_KEY, KEY_ENV

PROGRAM_ID = 0x70000000
"""The uid and gid a program runs as behind a ``separate-user`` wall: no passwd entry, no file of the host's."""
SCRATCH_VAR = "TILEPROOF_SCRATCH_MB"
"""The size of a walled program's private scratch (its ``/tmp``, ``/var/tmp``, ``/dev/shm`` and home), in MiB."""
DEFAULT_SCRATCH_MB = 4096
DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*")
"""The GPU device files whose groups a ``separate-user`` program joins (where a file is group-accessible)."""
JIT_TOOLS = ("tileiras", "ptxas")
"""The tools a cuTile Python program runs itself (its JIT, found on its ``PATH``): behind the separate-user wall
the program's uid must be allowed to execute them."""
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
"""Shared temp folders: each replaced by the program's private scratch."""
PRIVATE = ("/run/user",)
"""Folders hidden like the key's: the users' runtime folders (an ssh or gpg agent's socket, a session bus)."""
PACKAGE = Path(__file__).resolve().parents[1]
"""tileproof's own sources (the launcher a Python program starts through is among them)."""


@dataclass(frozen=True)
class Wall:
    """What a walled step needs beyond what every one gets: the checkout it reads and the folders it writes."""

    root: Path
    """The checkout: visible, read-only."""
    writable: tuple[Path, ...] = ()
    """Folders the program writes (its report folder, a build's output folder): bound in read-write."""
    readable: tuple[Path, ...] = ()
    """Folders besides the checkout it reads, where the wall would hide them (a temp folder): bound in read-only,
    as they are then and as they change later (tileproof's own checker of a session reads each program's handover
    folder, made inside one of them after it started)."""


def scratch_bytes() -> int:
    """The private scratch's size cap: ``TILEPROOF_SCRATCH_MB`` MiB, else 4 GiB."""
    raw = os.environ.get(SCRATCH_VAR, str(DEFAULT_SCRATCH_MB))
    try:
        mb = int(raw)
    except ValueError:
        raise TileproofError(f"{SCRATCH_VAR}={raw!r}: expected a whole number of MiB "
                             f"(fix: e.g. {DEFAULT_SCRATCH_MB})") from None
    if mb < 16:
        raise TileproofError(f"{SCRATCH_VAR}={mb}: expected at least 16 MiB (fix: raise it)")
    return mb << 20


def key_folders(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The folders a signing key may be in: the one ``TILEPROOF_SIGNING_KEY`` names and the default's."""
    env = os.environ if environ is None else environ
    named = env.get(KEY_ENV, "")
    paths = [Path(named).expanduser()] if named else []
    paths.append(DEFAULT_KEY.expanduser())
    return list(dict.fromkeys(Path(os.path.abspath(p)).parent for p in paths))


def device_groups() -> list[int]:
    """Groups owning a GPU device file that its group may open (``separate-user`` programs join them)."""
    groups = set()
    for pattern in DEVICES:
        for path in glob.glob(pattern):
            try:
                st = os.stat(path)
            except OSError:
                continue
            if stat.S_ISCHR(st.st_mode) and st.st_mode & 0o060 and st.st_gid != 0:
                groups.add(st.st_gid)
    return sorted(groups)


def _required(wall: Wall, argv: list[str]) -> list[str]:
    """The folders a walled program cannot do without: the checkout, the environment and its interpreter,
    tileproof's launcher, the program's own folder."""
    reads: list[str | os.PathLike[str]] = [wall.root, sys.prefix, sys.base_prefix, sys.exec_prefix,
                                           *_link_folders(sys.executable), PACKAGE]
    if argv and os.sep in argv[0]:
        reads += _link_folders(argv[0])
    return [os.path.abspath(os.fspath(r)) for r in reads]


def _link_folders(path: str) -> list[str]:
    """The folder of ``path`` and of each link on the way to the file it names: an interpreter reached through
    another environment's (a venv made from a venv's Python, as uv does on Python 3.10, whose
    ``sys._base_executable`` is the venv's own) starts only where every hop is there."""
    folders, current = [], os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        folders.append(os.path.dirname(current))
        try:
            target = os.readlink(current)
        except OSError:  # not a link (or gone): the end of the way
            break
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    return folders


def _closed(path: str, hidden: list[str]) -> str | None:
    """The first folder on the way to ``path`` (``path`` included) that others may not enter (read, for
    ``path``), where the wall shows it as it is (a hidden folder's stand-in is open); None when none is."""
    current = os.path.realpath(path)
    need = 0o005
    while True:  # the folder itself is bound back as it is; above it, a hidden folder's stand-ins are open
        if need == 0o005 or not any(_under(current, h) for h in hidden):
            try:
                mode = os.stat(current).st_mode
            except OSError:
                return None
            if mode & need != need:
                return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current, need = parent, 0o001


def _needed(env: Mapping[str, str], wall: Wall, argv: list[str]) -> list[str]:
    """Every folder a walled program reads: the checkout, the environments, the launcher, its PATH."""
    reads: list[str | os.PathLike[str]] = list(_required(wall, argv))
    for name in ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH"):
        reads += [d for d in env.get(name, "").split(os.pathsep) if d]
    for folder in env.get("PATH", "").split(os.pathsep):
        reads += _linked_prefixes(folder)
    if env.get("VIRTUAL_ENV"):
        reads.append(env["VIRTUAL_ENV"])
    depots = env.get("JULIA_DEPOT_PATH", "").split(os.pathsep) if env.get("JULIA_DEPOT_PATH") else ["~/.julia"]
    reads += [os.path.expanduser(d) for d in depots if d]  # a cuTile.jl program's packages
    found = []
    for entry in reads:
        path = os.path.abspath(os.fspath(entry))
        for one in (path, os.path.realpath(path)):
            if os.path.isdir(one):
                found.append(_prefix(one))
    return found


def _prefix(folder: str) -> str:
    """A ``bin`` folder's installation (its parent: the ``lib`` beside it too, e.g. tileiras' libnvvm)."""
    parent = os.path.dirname(folder)
    return parent if os.path.basename(folder) == "bin" and parent != "/" else folder


@functools.cache
def _linked_prefixes(folder: str) -> tuple[str, ...]:
    """The installations that the tools linked into a ``PATH`` folder live in (a toolchain under ``/tmp``
    linked from ``/usr/local/bin``), and the folder of each link on the way (:func:`_link_folders`); read once per
    process."""
    found: set[str] = set()
    try:
        entries = list(os.scandir(folder)) if folder else []
    except OSError:
        return ()
    for entry in entries:
        if entry.is_symlink():
            target = os.path.realpath(entry.path)
            if os.path.isfile(target):
                found.add(_prefix(os.path.dirname(target)))
                found.update(_prefix(hop) for hop in _link_folders(entry.path)[1:])  # every link on the way
    return tuple(sorted(found))


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _outermost(paths: Iterable[str]) -> list[str]:
    """The paths with none inside another kept (a bind of the outer one holds the inner)."""
    ordered = sorted(set(paths), key=len)
    kept: list[str] = []
    for p in ordered:
        if not any(_under(p, k) for k in kept):
            kept.append(p)
    return kept


def plan(level: Isolation, wall: Wall, env: Mapping[str, str], argv: list[str]) -> str:
    """The view the step's init builds (``stepinit``'s wall argument): one directive per line."""
    if level == "none":
        raise ValueError("no wall to plan at isolation 'none'")
    if KEY_ENV in env:
        raise TileproofError(f"{KEY_ENV} in a walled program's environment: refused, nothing started "
                             f"(fix: remove it from the lesson's env: list)")
    home = os.path.abspath(os.path.expanduser("~"))
    hidden = [*TEMP_DIRS]
    if home != "/":
        hidden.append(home)
    hidden += [f for f in PRIVATE if os.path.isdir(f)]
    for folder in key_folders():  # hidden even inside a folder hidden anyway: one bound back may hold it
        path = str(folder)
        if path != "/" and path not in hidden:
            hidden.append(path)
    writable = [os.path.abspath(w) for w in wall.writable]
    shared = [*TEMP_DIRS, home]  # replaced by the private scratch: a folder holding one is not bound back whole
    keep = _outermost(p for p in [*_needed(env, wall, argv), *(os.path.abspath(r) for r in wall.readable)]
                      if any(_under(p, h) for h in hidden) and not any(_under(h, p) for h in shared)
                      and not any(_under(p, w) for w in writable))
    if level == "separate-user":
        for path in _required(wall, argv):
            closed = _closed(path, hidden)
            if closed is not None:
                raise TileproofError(
                    f"{closed}: others may not read it (mode {stat.S_IMODE(os.stat(closed).st_mode):o}), and a "
                    f"program behind the separate-user wall runs as uid {PROGRAM_ID}: nothing started "
                    f"(fix: chmod o+rX {closed}, or run tileproof as a user other than root)")
        for tool in JIT_TOOLS:
            found = shutil.which(tool, mode=os.F_OK, path=env.get("PATH", ""))
            if found is not None and not os.stat(found).st_mode & 0o001:
                mode = stat.S_IMODE(os.stat(found).st_mode)
                raise TileproofError(
                    f"{found}: others may not execute it (mode {mode:o}), and a program behind the separate-user "
                    f"wall runs as uid {PROGRAM_ID} and calls {tool} itself: nothing started "
                    f"(fix: chmod a+rx {found})")
    uid = gid = PROGRAM_ID if level == "separate-user" else 0
    groups = device_groups() if level == "separate-user" else []
    lines = [f"level {level} {uid} {gid} {','.join(map(str, groups)) or '-'}", f"size {scratch_bytes()}",
             f"home {home}"]
    lines += [f"hide {h}" for h in hidden if os.path.isdir(h)]
    lines += [f"keep {k}" for k in keep]
    lines += [f"write {w}" for w in writable]
    named = os.environ.get(KEY_ENV, "")
    key = os.path.abspath(os.path.expanduser(named)) if named else None
    if key is not None and os.path.dirname(key) == "/":  # a key whose folder is / itself: the file covered
        lines.append(f"mask {key}")
    for path in [home, *hidden, *keep, *writable]:
        if "\n" in path or "\0" in path:
            raise TileproofError(f"{path!r}: a path with a line break cannot be walled: nothing started "
                                 f"(fix: rename it)")
    return "\n".join(lines)
