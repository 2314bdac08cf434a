"""The git history read fast: the gits started at once, each waited on by a thread, and the comparison of the log
with git's index kept in the catalog's index under what fixes it. A fast path, never a source of truth: the answer
is ``runner.git_history.read``'s (the plain serial reader, which this composes), and deleting the index changes no
output.

``start`` begins the history read: its git reads (the log, the index listing, the stat check) do not depend on one
another, so the gits are started at once and the caller works meanwhile (``gather`` reads the records' facts while
git reads). The log and the index listing are what many committed files make long to read, and both are fixed by what
:func:`_cache_key` digests (HEAD, git's index file, git's configuration and version, the replacement refs and grafts,
the root's place in the repository), so their comparison is kept under that key (:func:`_cached`); the stat check
(``git diff-files``), which is about the working tree, runs every time, and a kept comparison is used only when it
lists no file under runs/ or evidence/. ``changes_since`` begins ``runner.git_history.changed_since`` the same way.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from tileproof.catalog.index import Index
from tileproof.records.history_check import REGENERATED, WATCHED, FirstVersion, GitHistory, NoHistory, ObjectFormat
from tileproof.runner import git_history
from tileproof.runner.git_history import DIRTY, LISTED, LOG, git, watched_paths, working_id
from tileproof.runner.query import Answer

CACHE_FOLDER, CACHE_KIND = "", "git-history"
"""Where :func:`start` keeps its one comparison: the index's summary of the whole tree, under the scope
:func:`_cache_key` (a newer one replaces it)."""


def start(index: Index, root: Path, stat_check: Callable[[], Answer] | None = None
          ) -> Callable[[], GitHistory | NoHistory]:
    """``runner.git_history.read`` begun (module docstring), its comparison kept in ``index``; the callable returned
    waits for the gits and reads their answers (once). ``stat_check``: the working tree's :func:`stat_check`, when
    the caller started it already (``audit --since`` reads its scope from the same one)."""
    root = Path(root)
    at = git_history.checkout(root)
    if isinstance(at, NoHistory):
        return lambda: at
    if at.head is None:
        return lambda: GitHistory(first=(), current={})  # no commit yet: nothing was ever committed
    fmt = at.fmt
    dirty = stat_check or _later(root, *DIRTY, "--", *WATCHED)
    key = _cache_key(root, at)
    kept = index.summary(CACHE_FOLDER, CACHE_KIND, key) if key is not None else None
    # Without a kept comparison both reads begin now. With one, the log begins as soon as the stat check lists a file
    # under runs/ or evidence/ (then the comparison cannot serve), and the listing once the log is read: the two gits
    # and their answers are not all held at once, nor beside an audit's peak.
    log = _later(root, *LOG, once=True) if kept is None else _later_if(root, LOG, dirty, _changes_watched)
    listing = _later(root, *LISTED, once=True) if kept is None else _none
    done: list[GitHistory | NoHistory] = []

    def result() -> GitHistory | NoHistory:
        if not done:  # once: then git's answers are let go, the result kept
            done.append(read_answers())
        return done[0]

    def read_answers() -> GitHistory | NoHistory:
        if kept is not None:
            found = _cached(root, fmt, kept, dirty())
            if found is not None:
                return found
        history, first, vouched = git_history.compared(root, fmt, log, listing, dirty)
        if key is not None and vouched:
            index.summarise(CACHE_FOLDER, CACHE_KIND, _comparison(first, vouched), key)
            index.save()
        return history
    return result


def _none() -> None:
    return None


def _changes_watched(checked: Answer) -> bool:
    return checked.exit_code != 0 or bool(watched_paths(checked))


def stat_check(root: Path) -> Callable[[], Answer]:
    """``git diff-files`` over the working tree under ``root`` (every tracked file whose stat data, or content
    where the stat cannot tell, differs from git's index), started now in a thread of its own; the callable
    returned waits for it. One answer serves both :func:`start` and :func:`changes_since`."""
    return _later(Path(root), *DIRTY)


def changes_since(root: Path, rev: str, folders: Iterable[str], checked: Callable[[], Answer] | None = None
                  ) -> Callable[[], tuple[str, frozenset[str]] | NoHistory]:
    """``runner.git_history.changed_since`` begun: ``rev`` resolved here, and its gits (independent) started at once,
    each waited on by a thread (``checked``: the caller's :func:`stat_check`, shared with the history read); the
    callable returned waits for them (once) and reads them (``git_history.changes_from``)."""
    commit = git_history.resolve_commit(root, rev)
    if commit is None:
        missing = git_history.no_commit(root, rev)
        return lambda: missing
    folders = list(folders)
    staged = _later(root, *git_history.staged_since(commit, folders))
    working = checked or stat_check(root)
    others = _later(root, *git_history.untracked(folders))
    return lambda: git_history.changes_from(root, commit, folders, staged(), working(), others())


def _later(root: Path, *args: str, once: bool = False) -> Callable[[], Answer]:
    """``git(root, *args)`` started in a thread of its own (it waits on git's output, so the caller's work goes
    on); the callable returned waits for the answer, or raises what ``git`` raised (git could not start).
    ``once``: the answer is given once and then let go (a log's bytes are not held while they are parsed)."""
    return _in_thread(lambda: git(root, *args), once)


def _later_if(root: Path, args: tuple[str, ...], first: Callable[[], Answer], wanted: Callable[[Answer], bool]
              ) -> Callable[[], Answer | None]:
    """``git(root, *args)`` in a thread of its own, begun once ``first`` answers and only if ``wanted`` of its answer;
    the callable returned waits, and gives None when it was not wanted (or raises what ``git`` or ``first`` raised)."""
    return _in_thread(lambda: git(root, *args) if wanted(first()) else None, once=True)


T = TypeVar("T")


def _in_thread(work: Callable[[], T], once: bool = False) -> Callable[[], T]:
    """``work()`` in a daemon thread begun now; the callable returned waits for it and gives its result, or raises
    what it raised, there (``once``: the first call takes the result, none is kept)."""
    box: list[T | BaseException] = []

    def run() -> None:
        try:
            box.append(work())
        except Exception as e:  # raised again where the answer is asked for
            box.append(e)
    worker = threading.Thread(target=run, daemon=True)
    worker.start()

    def answer() -> T:
        worker.join()
        got = box.pop() if once else box[0]
        if isinstance(got, BaseException):
            raise got
        return got
    return answer


def _cache_key(root: Path, at: git_history.Checkout) -> str | None:
    """A digest of everything the log's and the index listing's output depend on besides the code (the
    index's own key): HEAD (a commit id fixes the whole history behind it), the object format, git's version
    (``runner.git_history.git_version``), its whole configuration (``git config --list``: path matching, quoting,
    replacement refs and the like), every ``GIT_*`` variable of the environment, the replacement refs and the
    grafts file (both rewrite history as git reads it), the root's prefix in the repository (``--relative``) and
    the bytes of git's index file (the listing is read from it: stage, mode, flags and object id of every entry).
    None (nothing cached) when one of them cannot be read. ``at``: what git said of the checkout
    (``runner.git_history.checkout``: HEAD, the prefix, where the index and the grafts file are)."""
    if at.where is None:
        return None  # a path holding a line break: git's answer cannot be split, so nothing is cached
    config = git(root, "config", "--list", "-z")
    version = git_history.git_version()
    replaced = git(root, "for-each-ref", "--format=%(refname) %(objectname)", "refs/replace/")
    if version is None or any(a.exit_code != 0 for a in (config, replaced)):
        return None
    prefix, index_file, grafts = at.where
    files = [_file_digest(root / index_file), _file_digest(root / grafts)]
    if files[0] in (None, "absent") or files[1] is None:  # the listing is read from git's index: it must be there
        return None
    environment = sorted((k, v) for k, v in os.environ.items() if k.startswith("GIT_"))
    h = hashlib.sha256()
    for part in (at.fmt, at.head, prefix, *files, config.stdout, version, replaced.stdout, repr(environment)):
        h.update(part if isinstance(part, bytes) else str(part).encode(errors="surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def _file_digest(path: Path) -> str | None:
    """sha256 of the regular file at ``path``, ``absent`` when there is none, None when it is something else
    or cannot be read (opened without following a link, never blocking on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return "absent"
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def _comparison(first: dict[str, FirstVersion], vouched: dict[str, str]) -> dict:
    """What :func:`_cached` needs of a full read, as JSON: how many first versions the index listing shows
    unchanged (``vouched``: path → the object id git's index holds), the others (with the id the index holds,
    or None), and the commit that first added each record."""
    odd, same = [], 0
    records: dict[str, list[str]] = {}
    for path, f in first.items():
        if path in REGENERATED or vouched.get(path) != f.blob:
            odd.append([path, f.commit, f.blob, vouched.get(path)])
        else:
            same += 1
        if path.startswith(f"{WATCHED[0]}/"):
            records.setdefault(f.commit, []).append(path)
    return {"vouched": same, "odd": odd, "records": sorted(records.items())}


def _cached(root: Path, fmt: ObjectFormat, kept: Any, checked: Answer) -> GitHistory | None:
    """The history a full read would give, from a kept comparison (:func:`_comparison`) and this moment's stat
    check: only when ``git diff-files`` ran and listed no file under runs/ or evidence/ (every indexed file
    there is as the index says), so each file git's index vouches for is that object; a first version the
    index does not hold is hashed from the working tree, as a full read hashes it. None (read in full)
    otherwise, or when ``kept`` is not such a comparison."""
    if checked.exit_code != 0 or watched_paths(checked):
        return None
    try:
        odd = [(FirstVersion(str(p), str(c), str(b)), i) for p, c, b, i in kept["odd"]]
        records = {str(p): str(c) for c, paths in kept["records"] for p in paths}
        same = int(kept["vouched"])
    except (KeyError, TypeError, ValueError):
        return None
    current = {f.path: str(i) if i is not None else working_id(root, f.path, fmt) for f, i in odd}
    return GitHistory(first=tuple(f for f, _i in odd), current=current, vouched=same, records=records)
