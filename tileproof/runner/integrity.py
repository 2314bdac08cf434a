"""Before a session signs: nothing it relies on changed while it ran.

A session (run, bench, claims, compile) takes a ``Snapshot`` when it starts and checks it again before every
signature (``guard``: the signer it hands on checks first). Watched: the checkout's tracked files (git's list;
every file outside ``runs/``, ``evidence/`` and ``build/`` where there is no git), the ignored ``build/``
artifacts it may attest (but for the folders a walled step was given to write, whose files the record attests by
digest, and tileproof's own bookkeeping there), ``.git/hooks``, ``.git/config``, tileproof's own sources, the
``site-packages`` folders the interpreter reads (``environments``; ``.pth`` files included) and its standard library
folder.
A file is the same while its inode, size, mode, modification and change time are (a change time cannot be set
back; in an environment, whose files an installer hard-links from its cache, the change time is left out and the
files at its top, ``.pth`` among them, are compared by content); in the hooks, ``site-packages`` and ``build/`` a
new file is a change too. Bytecode caches (``__pycache__``) are left out: Python itself writes them as tileproof
imports. On a change: one line naming the path, and nothing is signed (``Changed``). Each pass (the snapshot,
every check) reads each folder once and takes each file's ``lstat`` once, as the folder is listed; no file is
taken as unchanged because its folder is.

The wall (``runner.wall``) makes all of these read-only to a program; this check is what holds where a program
ran without one (``none``), or anything else wrote them during the session.
"""

from __future__ import annotations

import hashlib
import os
import site
import stat
import sys
import sysconfig
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tileproof.records.errors import TileproofError
from tileproof.records.trust.runner_keys import REGISTRY, load_registry
from tileproof.records.trust.signing import KEY_ENV, Signer
from tileproof.runner import process
from tileproof.runner.query import QueryError, ask
from tileproof.runner.wall import PACKAGE

Fingerprint = tuple[int, int, int, int, int]
"""(inode, size, mode, modification time, change time) of one file, in ns."""
OWN = frozenset({"kernel-index.json", "meta.json", "tool-versions.json", ".lock"})
"""Files tileproof itself rewrites under ``build/`` during a session."""
SKIPPED_DIRS = frozenset({"__pycache__"})


class Changed(TileproofError):
    """A file the session relies on changed while it ran: nothing is signed."""


def _fingerprint(path: str, loose: bool = False, st: os.stat_result | None = None) -> Fingerprint | None:
    """The file's fingerprint (from ``st``, its ``lstat`` already taken, where given); ``loose`` (inside a Python
    environment): without its change time, which a new hard link to it elsewhere also moves (an installer linking
    from its cache), and with its content's digest instead when it lies at the top of the folder (``.pth`` files,
    ``sitecustomize``)."""
    if st is None:
        try:
            st = os.lstat(path)
        except OSError:
            return None
    if not loose:
        return st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns, st.st_ctime_ns
    if stat.S_ISREG(st.st_mode) and os.path.dirname(path) in _TOP:
        try:
            with open(path, "rb") as f:
                digest = int.from_bytes(hashlib.sha256(f.read()).digest()[:8], "big")
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns, digest
    return st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns, 0


_TOP: set[str] = set()
"""The environments' folders (``environments()``), filled when a snapshot is taken."""


def _walk(folder: str, skip: Callable[[str], bool] | None = None) -> Iterator[tuple[str, os.stat_result | None]]:
    """Every file (and link) under ``folder`` with its ``lstat`` (None where it went since it was listed), never
    following a link, bytecode caches and what ``skip`` names left out. One ``lstat`` per file, the folders read
    with ``os.scandir``: the whole pass, listing and fingerprints, is one loop over about 43,000 files."""
    stack = [folder]
    while stack:
        below = stack.pop()
        try:
            with os.scandir(below) as entries:
                listed = list(entries)
        except OSError:  # a folder that cannot be read (as os.walk): its files are not listed
            continue
        for entry in listed:
            path = entry.path
            if skip is not None and skip(path):
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:  # a link to a folder is a file here: listed, never entered
                if entry.name not in SKIPPED_DIRS:
                    stack.append(path)
                continue
            try:
                yield path, entry.stat(follow_symlinks=False)
            except OSError:
                yield path, None


def _git(root: Path, *args: str) -> bytes | None:
    try:
        answer = ask(["git", "-C", str(root), *args], timeout=60)
    except QueryError:
        return None
    return answer.stdout if answer.exit_code == 0 else None


def environments() -> list[str]:
    """The ``site-packages`` folders this interpreter reads code and ``.pth`` files from at start (``site``'s own
    list: in a virtual environment, the base installation's too only where the environment includes them,
    ``include-system-site-packages``), and the user's. A base installation the environment leaves out is read by
    none of the session's processes (they all run this interpreter): a machine's system Python with tens of
    thousands of files there would double every pass for nothing. The standard library folder (``sitecustomize``),
    which every interpreter reads, is watched by ``Snapshot.take``. A folder is listed whether it exists or not:
    ``site`` reads one made later (a user site holding a planted ``.pth``), so one made during a session is a
    change too."""
    found = [*site.getsitepackages(), site.getusersitepackages()]
    return list(dict.fromkeys(os.path.abspath(p) for p in found))


@dataclass(frozen=True)
class Snapshot:
    """What a session relies on, as it was when it started."""

    root: Path
    files: dict[str, Fingerprint]
    closed: tuple[str, ...]
    """Folders in which a new file is a change too."""

    @classmethod
    def take(cls, root: Path) -> Snapshot:
        root = root.resolve()
        top = str(root)
        envs = environments()
        _TOP.update(envs)
        loose = _loose_prefixes()
        git_dirs = _git_dirs(root)  # asked once: the hooks' folders and the configs are both in them
        closed = (os.path.join(top, "build"), str(PACKAGE), *envs, *_git_folders(git_dirs))
        snapshot = cls(root, {}, closed)
        found: dict[str, os.stat_result | None] = {}  # a file's lstat where the listing took it already
        listed = _git(root, "ls-files", "-z")
        if listed is not None:
            found.update((os.path.join(top, name), None)
                         for name in listed.decode(errors="surrogateescape").split("\0") if name)
        else:
            tileproofs = {os.path.join(top, d) for d in ("runs", "evidence", "build", ".git")}
            found.update(_walk(top, tileproofs.__contains__))
        found.update(snapshot._scan())
        stdlib = sysconfig.get_path("stdlib", vars={"installed_base": sys.base_prefix})
        if os.path.isdir(stdlib):
            found.update((e.path, None) for e in os.scandir(stdlib) if not e.is_dir(follow_symlinks=False))
        found.update((config, None) for config in _git_configs(git_dirs))
        for path, st in found.items():
            fingerprint = _fingerprint(path, path.startswith(loose), st)
            if fingerprint is not None:
                snapshot.files[path] = fingerprint
        return snapshot

    def _output(self, path: str) -> bool:
        """Under ``build/``: tileproof's own bookkeeping, or in a folder a walled step was given to write."""
        if not path.startswith(os.path.join(str(self.root), "build", "")):
            return False
        granted = [str(w) for w in process.granted()]
        return os.path.basename(path) in OWN or any(path == g or path.startswith(g + os.sep) for g in granted)

    def _scan(self) -> Iterator[tuple[str, os.stat_result | None]]:
        """Every file of the closed folders but ``build/``'s outputs (``_output``), once, with its ``lstat``."""
        build = os.path.join(str(self.root), "build", "")
        seen: set[str] = set()
        for folder in self.closed:
            if os.path.isfile(folder) or os.path.islink(folder):
                found: Iterator[tuple[str, os.stat_result | None]] = iter([(folder, _lstat(folder))])
            elif os.path.isdir(folder):
                found = _walk(folder, self._output if (folder + os.sep).startswith(build) or
                              build.startswith(folder + os.sep) else None)
            else:
                continue
            for path, st in found:
                if path not in seen:
                    seen.add(path)
                    yield path, st

    def changed(self) -> str | None:
        """The first path that changed, went or (in a closed folder) appeared since the snapshot; None. One
        ``lstat`` per watched file: the closed folders' files as they are listed, then the rest."""
        loose = _loose_prefixes()
        seen: set[str] = set()
        for path, st in self._scan():
            seen.add(path)
            known = self.files.get(path)
            if known is None or st is None or _fingerprint(path, path.startswith(loose), st) != known:
                return path  # new, gone, or not the same
        for path, fingerprint in self.files.items():
            if path not in seen and _fingerprint(path, path.startswith(loose)) != fingerprint \
                    and not self._output(path):
                return path
        return None

    def check(self) -> None:
        """Raise ``Changed`` (one line naming the path) when anything changed since the snapshot."""
        path = self.changed()
        if path is not None:
            shown = os.path.relpath(path, self.root) if path.startswith(str(self.root) + os.sep) else path
            raise Changed(f"{shown}: changed while this session ran; nothing signed (fix: find what wrote it, "
                          f"restore it, and run again; a program behind the wall cannot write it)")


def _loose_prefixes() -> tuple[str, ...]:
    """What a path inside one of the environments (``_TOP``) starts with: such a path's fingerprint is loose."""
    return tuple(top + os.sep for top in _TOP)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _git_dirs(root: Path) -> list[Path]:
    out = _git(root, "rev-parse", "--absolute-git-dir", "--git-common-dir")
    if out is None:
        return []
    dirs = [Path(line) if os.path.isabs(line) else root / line for line in out.decode().split("\n") if line]
    return list(dict.fromkeys(d.resolve() for d in dirs))


def _git_folders(git_dirs: list[Path]) -> list[str]:
    """``hooks`` of the repository (and of the worktree's common folder): ``git_dirs``, from :func:`_git_dirs`."""
    return [str(d / "hooks") for d in git_dirs]


def _git_configs(git_dirs: list[Path]) -> list[str]:
    """The repository's configuration files (and the worktree's): ``git_dirs``, from :func:`_git_dirs`."""
    return [str(d / name) for d in git_dirs for name in ("config", "config.worktree")]


def guard(root: Path, signer: Signer | None) -> Signer | None:
    """``signer``, checking before every signature that nothing changed since now (``Snapshot.check``);
    None stays None (an unsigned session has nothing to refuse)."""
    if signer is None:
        return None
    snapshot = Snapshot.take(root)
    return signer.guarded(snapshot.check)


def unisolated_line(root: Path, signer: Signer | None) -> str | None:
    """Where this host cannot build the wall (``process.isolation()`` is ``none``): the one line that says so, or
    ``Unisolated`` raised when ``signer``'s registry entry does not allow unisolated runs (nothing may start);
    None where there is a wall."""
    if process.isolation() != "none":
        return None
    why = process.unisolated_reason()
    if signer is not None:
        entry = load_registry(root).keys.get(signer.keyid)
        if entry is None or not entry[0].unisolated:
            raise Unisolated(f"no wall here ({why}): programs would run unisolated, and key {signer.keyid[:16]}… may "
                             f"not sign such runs (its entry in {REGISTRY.as_posix()} does not say unisolated: true); "
                             f"nothing run (fix: run where user namespaces are allowed or as root, or unset "
                             f"{KEY_ENV} for unsigned records)")
    return (f"unisolated: no wall here ({why}); programs run as this user with the whole filesystem in view and "
            f"every record says isolation none" + ("; signed: the key's registry entry allows unisolated runs"
                                                   if signer is not None else ""))


class Unisolated(TileproofError):
    """No wall can be built here, and the signing key may not sign unisolated runs: nothing starts."""


def start(root: Path, signer: Signer | None, say: Callable[[str], None] = print) -> Signer | None:
    """What every signing session does first: say so in one line where no wall can be built here (refused when
    the key may not sign unisolated runs: ``unisolated_line``), and hand on ``signer`` guarded by a snapshot
    taken now (``guard``)."""
    line = unisolated_line(root, signer)
    if line is not None:
        say(line)
    return guard(root, signer)
