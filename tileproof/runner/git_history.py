"""The thin git reader behind ``records.history_check``: first committed versions of
every file under runs/ and evidence/, and the working tree's object ids.

``git log --reverse --raw -z --no-renames`` lists, oldest first, each commit's
added/changed/deleted files with their object ids; a path's first ``A`` is its
first committed version (a rename is a delete plus an add, so a moved record is
a missing one). No git, no repository, or a shallow clone: ``NoHistory``, from :func:`checkout`,
the one ``git rev-parse`` every reader here starts from (object format, HEAD, the root's prefix, where
git's index is), asked once per root inside a :func:`remembered` block (``catalog.Catalog.open``). The
working tree's object ids come from git's own index where git vouches for the file
(``git ls-files -s`` and ``git diff-files``, the stat-data check ``git status`` makes:
`listed_ids`); every other file is hashed through ``records.safe_read.stream``
(:func:`working_id`). Paths in git's output are decoded as ``os.fsdecode`` decodes a folder's listing
(UTF-8, ``surrogateescape``): a name that is not UTF-8 is the same string here as in the audit's walk
(which refuses it, ``input-not-utf8``), and names the same file when it is opened.

:func:`at_commits` reads, for the commits records name (``git.commit``), whether
each is in this repository's history and the sha256 of each attested path's blob
there (one ``git cat-file --batch`` for all of them). :func:`trust_history` reads the commit graph,
every version of the runner registry and of the CI's pin along it, and the commits that added each
registry endorsement's bytes (``judge.trust.trust_root`` walks them);
:func:`commit_by_id`, :func:`commits_by_prefix` and :func:`refs_named` are what ``gather.given_commit`` asks of
git about a commit a reviewer names (``--trust-root``, ``--expect-ancestor``, ``--since``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import cast, get_args

from tileproof.records.errors import InputRefused
from tileproof.records.history_check import (
    REGENERATED,
    WATCHED,
    AtCommits,
    FirstVersion,
    GitHistory,
    HistoryReport,
    NoHistory,
    ObjectFormat,
    Unhashed,
    blob_hasher,
    check,
)
from tileproof.records.safe_read import InputKind, stream
from tileproof.records.trust.registry_change import SIGNATURES
from tileproof.records.trust.runner_keys import REGISTRY
from tileproof.records.trust.trust_history import TrustHistory
from tileproof.records.trust.trust_pin import PIN
from tileproof.runner.query import Answer, QueryError, ask

GIT_TIMEOUT_S = 300.0
"""A git read over the whole history of runs/ and evidence/ that takes longer is stopped."""


def git(root: Path, *args: str, stdin: bytes | None = None) -> Answer:
    return ask(["git", "-C", str(root), *args], stdin=stdin, timeout=GIT_TIMEOUT_S, fix="install git")


_VERSIONS: dict[tuple, bytes] = {}
"""``git version``'s answer by the git program it came from (:func:`git_version`)."""


def git_version() -> bytes | None:
    """What ``git version`` prints (None: it failed), asked once per process for each git program: the one ``PATH``
    finds, known by its path and its file's identity (device, inode, size, modification and change time), so a git
    replaced or put first on ``PATH`` meanwhile is asked again."""
    found = shutil.which("git")
    try:
        st = os.stat(found) if found is not None else None
    except OSError:
        st = None
    program = (found, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) if st is not None else None
    known = _VERSIONS.get(program) if program is not None else None
    if known is None:
        answer = ask(["git", "version"], timeout=GIT_TIMEOUT_S, fix="install git")
        if answer.exit_code != 0:
            return None
        known = answer.stdout
        if program is not None:
            _VERSIONS[program] = known
    return known


def tracked_under(root: Path, folder: str) -> str | None:
    """The first path git tracks under ``folder`` (relative to ``root``, or ``folder`` itself), or None: nothing, or
    no repository (or no git) at ``root``. Reads git's index only; a committed index folder is refused with it
    (``records.cache_folder.refusal``)."""
    try:
        listed = ask(["git", "-C", str(root), "ls-files", "-z", "--", folder], timeout=GIT_TIMEOUT_S)
    except QueryError:
        return None
    if listed.exit_code != 0 or not listed.stdout:
        return None
    return listed.stdout.split(b"\0", 1)[0].decode(errors="replace")


@dataclass(frozen=True)
class Checkout:
    """What one ``git rev-parse`` says of the checkout at a root (:func:`checkout`)."""

    fmt: ObjectFormat
    head: str | None
    """HEAD's full id; None when ``git rev-parse --verify HEAD`` names nothing (no commit yet)."""
    where: tuple[str, str, str] | None
    """The root's prefix in the repository, git's index file and the grafts file, as git names them from the root;
    None when one of them holds a line break (then the three cannot be told apart)."""


FACTS = ("rev-parse", "--is-inside-work-tree", "--is-shallow-repository", "--show-object-format", "--show-prefix",
         "--git-path", "index", "--git-path", "info/grafts", "--verify", "-q", "HEAD")
"""One ``git rev-parse`` for everything :class:`Checkout` holds: git prints each answer on a line of its own, in this
order, and HEAD's id last (nothing, and exit status 1, when HEAD names no object)."""

_HELD: dict[tuple[int, Path], Checkout | NoHistory] = {}
"""What :func:`checkout` answered for each root inside :func:`remembered` blocks, by process and root."""
_DEPTH: dict[int, int] = {}
"""How many :func:`remembered` blocks are open in each process."""


@contextmanager
def remembered() -> Iterator[None]:
    """For the block, what git says of a checkout (:func:`checkout`: its object format, whether it is shallow, HEAD,
    where its index file is) is asked once per root and remembered: a command that only reads sees one state of the
    repository, and its readers (the history read, the trust history, the commits records name) ask git once, not
    each. Nested blocks share the outermost one's answers, forgotten when it ends; outside any block every call
    asks git."""
    pid = os.getpid()
    _DEPTH[pid] = _DEPTH.get(pid, 0) + 1
    try:
        yield
    finally:
        _DEPTH[pid] -= 1
        if not _DEPTH[pid]:
            for key in [k for k in _HELD if k[0] == pid]:
                del _HELD[key]


def checkout(root: Path) -> Checkout | NoHistory:
    """What git says of the checkout at ``root`` (one ``git rev-parse``: :data:`FACTS`), or why it has no usable
    history: no git, not a checkout, a shallow clone, an object format tileproof does not know. Asked once per root
    inside a :func:`remembered` block."""
    root = Path(root)
    key = (os.getpid(), root)
    found = _HELD.get(key) if _DEPTH.get(key[0]) else None
    if found is None:
        found = _checkout(root)
        if _DEPTH.get(key[0]):
            _HELD[key] = found
    return found


def _checkout(root: Path) -> Checkout | NoHistory:
    if shutil.which("git") is None:
        return NoHistory("git is not installed")
    facts = git(root, *FACTS)
    lines = facts.stdout.decode(errors="surrogateescape").split("\n")
    inside, shallow, named = [*lines, "", "", ""][:3]
    if facts.exit_code not in (0, 1) or inside != "true":
        return NoHistory(f"{root} is not a git checkout")
    if shallow == "true":
        return NoHistory("a shallow clone (fix: git fetch --unshallow)")
    named = named or "sha1"  # a git that prints no format has only sha1
    if named not in get_args(ObjectFormat):
        return NoHistory(f"git names an object format tileproof does not know: {named!r}")
    fmt = cast(ObjectFormat, named)
    head = lines[-2] if facts.exit_code == 0 and len(lines) >= 8 else None
    if facts.exit_code == 0 and not re.fullmatch(FULL_ID[fmt], head or ""):
        return NoHistory(f"git rev-parse printed what tileproof cannot read: {facts.stdout[-120:]!r}")
    if lines[-1] or len(lines) < 7:
        return NoHistory(f"git rev-parse printed what tileproof cannot read: {facts.stdout[-120:]!r}")
    middle = lines[3:-2] if head is not None else lines[3:-1]  # three lines unless one holds a line break
    return Checkout(fmt, head, (middle[0], middle[1], middle[2]) if len(middle) == 3 else None)


def repository(root: Path) -> ObjectFormat | NoHistory:
    """The object format of the repository at ``root`` (:func:`checkout`), or why it has no usable history."""
    found = checkout(root)
    return found if isinstance(found, NoHistory) else found.fmt


def _no_history(root: Path) -> NoHistory | None:
    """Why ``root`` has no usable history, or None when it has."""
    found = checkout(root)
    return found if isinstance(found, NoHistory) else None


def read(root: Path) -> GitHistory | NoHistory:
    """What ``records.history_check.check`` needs, from the repository at ``root``: the log, the index listing and
    the stat check, read one after another (:func:`compared`). The catalog (``catalog.history``) reads the same
    three at once, and keeps their comparison."""
    root = Path(root)
    at = checkout(root)
    if isinstance(at, NoHistory):
        return at
    if at.head is None:
        return GitHistory(first=(), current={})  # no commit yet: nothing was ever committed
    found, _first, _vouched = compared(root, at.fmt, lambda: git(root, *LOG), lambda: git(root, *LISTED),
                                       lambda: git(root, *DIRTY, "--", *WATCHED))
    return found


Read = Callable[[], "Answer | None"]
"""A git answer to be waited for (None: a read that was not wanted, made here instead)."""


def compared(root: Path, fmt: ObjectFormat, log: Read, listing: Read, dirty: Callable[[], Answer]
             ) -> tuple[GitHistory | NoHistory, dict[str, FirstVersion], dict[str, str]]:
    """The history from git's three answers: the log (:data:`LOG`), the index listing (:data:`LISTED`) and the
    stat check (:data:`DIRTY`), each asked for in that order, as when they ran one after another: a failed log is
    NoHistory whatever the other two say. Also the first versions read and the object ids git's index vouches
    for (what ``catalog.history`` keeps). The log's bytes are let go before the listing is asked for: the two
    answers are never held at once (whoever passes ``log`` must not hold it either)."""
    answer = log()
    del log
    if answer is None:  # not wanted after all: read it now
        answer = git(root, *LOG)
    if answer.exit_code != 0:
        why = NoHistory(f"git log failed: {answer.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
        return why, {}, {}
    first = first_versions(answer.stdout)
    del answer
    if isinstance(first, NoHistory):
        return first, {}, {}
    listed = listing()
    del listing
    listed = listed if listed is not None else git(root, *LISTED)
    checked = dirty()
    vouched = listed_ids(listed, first) if listed.exit_code == 0 and checked.exit_code == 0 else {}
    del listed
    changed = set(watched_paths(checked))

    def now(f: FirstVersion) -> str | Unhashed | None:
        oid = vouched.get(f.path) if f.path not in changed else None
        if oid is None:
            return working_id(root, f.path, fmt)
        return f.blob if oid == f.blob else oid  # unchanged: one string for both (kept to the end)
    current = {path: now(f) for path, f in first.items()}
    return GitHistory(first=tuple(first.values()), current=current), first, vouched


def watched_paths(checked: Answer) -> list[str]:
    """The paths under runs/ and evidence/ a stat check lists."""
    return [p for p in paths(checked) if p.split("/", 1)[0] in WATCHED]


LOG = ("-c", "core.quotePath=false", "log", "--reverse", "--raw", "--no-renames", "--no-abbrev", "-z",
       "--format=%x01%H", "--relative", "--", *WATCHED)
LISTED = ("-c", "core.quotePath=false", "ls-files", "-v", "-s", "-z", "--", *WATCHED)
DIRTY = ("-c", "core.quotePath=false", "diff-files", "--name-only", "--no-renames", "-z", "--relative")
"""The stat check: paths relative to the root, as ``LOG``'s and ``LISTED``'s are (without ``--relative``, git
names them from the repository's top, and a tree in a subfolder of one would match none of them)."""


_LOG_ENTRY = re.compile(rb"\n*(?:\x01([0-9a-f]+)\0|:[0-7]+ [0-7]+ [0-9a-f]+ ([0-9a-f]+) ([A-Z][0-9]*)\0([^\0]*)\0)")
"""One token of ``LOG``'s output: a commit (``\\x01<id>``), or one file's ``:<modes> <ids> <status>`` and its path."""


def first_versions(out: bytes) -> dict[str, FirstVersion] | NoHistory:
    """Path → its first ``A`` in the output of ``LOG`` (oldest commit first): NUL-separated tokens, each
    commit ``\\x01<id>`` followed by a ``:<modes> <ids> <status>`` token and its path for each file. The tokens
    must follow one another with nothing between them (a path is never searched for a token), else the
    log is one this code cannot read: NoHistory, never a partial map."""
    first: dict[str, FirstVersion] = {}
    commit, end = "", 0
    for m in _LOG_ENTRY.finditer(out):
        if m.start() != end:
            break
        end = m.end()
        named, new, status, path = m.groups()
        if named is not None:
            commit = named.decode()
        elif status == b"A":
            decoded = path.decode(errors="surrogateescape")
            if decoded not in first:
                first[decoded] = FirstVersion(decoded, commit, new.decode())
    if out[end:].strip(b"\n\0"):
        return NoHistory(f"git log printed what tileproof cannot read, at byte {end}: {out[end:end + 60]!r}")
    return first


_LISTED_ENTRY = re.compile(rb"[^\0]+")
"""One entry of ``LISTED``'s output (NUL-terminated)."""


def listed_ids(listed: Answer, first: Mapping[str, FirstVersion] | None = None) -> dict[str, str]:
    """Path → git's object id of each regular file under runs/ and evidence/ that git's own index holds: an
    index entry at stage 0 (``git ls-files -v -s``), a regular file's mode, tagged ``H`` (neither
    assume-unchanged nor skip-worktree, which would make git skip the file). Its working copy is that object
    when ``git diff-files`` does not list it (it compares each file's stat data with the index, and its content
    where the stat cannot tell: git's racy-entry check); every other file is hashed by :func:`working_id`. ``first``:
    the first versions read (:func:`first_versions`), whose path and object id strings are used for an entry that
    has them, not made again (400,000 entries of a fleet's tree, most unchanged since they were added)."""
    out: dict[str, str] = {}
    for found in _LISTED_ENTRY.finditer(listed.stdout):  # one at a time: split() would make 400,000 at once
        head, _tab, path = found.group().partition(b"\t")
        words = head.split()
        if len(words) == 4 and words[0] == b"H" and words[1] in (b"100644", b"100755") and words[3] == b"0":
            name, oid = path.decode(errors="surrogateescape"), words[2].decode()
            was = first.get(name) if first is not None else None
            if was is not None:
                name, oid = was.path, was.blob if was.blob == oid else oid
            out[name] = oid
    return out


def working_id(root: Path, path: str, fmt: ObjectFormat) -> str | Unhashed | None:
    """Git's object id of the working-tree file at ``path`` (under runs/ or evidence/), hashed in chunks
    as ``records.safe_read.stream`` hands them out: never a link followed, never a FIFO or device
    opened, never more than the folder's cap read (``safe_read.LIMITS``: no file tileproof writes or
    reads there is larger, so a larger one is changed, unread). None when it is missing."""
    kind: InputKind = "record" if path.startswith(f"{WATCHED[0]}/") else "evidence"
    try:
        with stream(root, path, kind) as (size, chunks):
            digest, seen = blob_hasher(size, fmt), 0
            for chunk in chunks:
                digest.update(chunk)
                seen += len(chunk)
    except InputRefused as e:
        if e.kind == "missing":
            return None
        return Unhashed("changed" if e.kind == "too-large" else "refused", e.problem)
    if seen != size:
        return Unhashed("changed", f"its size changed from {size} to {seen} bytes while it was read")
    return digest.hexdigest()


def check_repository(root: Path, regenerated: frozenset[str] = REGENERATED) -> HistoryReport:
    """The audit's one call: read the repository's history and check it."""
    return check(read(root), regenerated)


def at_commits(root: Path, commits: Iterable[str], pairs: Iterable[tuple[str, str]]) -> AtCommits | NoHistory:
    """Which of ``commits`` are in this repository's history, and for each (commit, path) of
    ``pairs`` the sha256 of the path's content at that commit (None when it has no such file)."""
    commits, pairs = sorted(set(commits)), sorted(set(pairs))
    if not commits:
        return AtCommits(known={}, sha256={})
    missing = _no_history(Path(root))
    if missing is not None:
        return missing
    queries = [f"{c}^{{commit}}" for c in commits] + [f"{c}:{p}" for c, p in pairs]
    answers = _cat_file(root, queries)
    return AtCommits(known={c: answers[i] is not None for i, c in enumerate(commits)},
                     sha256={cp: None if data is None else hashlib.sha256(data).hexdigest()
                             for cp, data in zip(pairs, answers[len(commits):], strict=True)})


def versions(root: Path, path: str) -> dict[str, bytes] | NoHistory:
    """Every committed version of ``path`` reachable from HEAD, by the sha256 of its content (one
    ``git log`` and one ``git cat-file --batch``): how a record's whole-file digest of the tolerance
    table is read back as the table it attests."""
    missing = _no_history(Path(root))
    if missing is not None:
        return missing
    log = git(root, "log", "--format=%H", "--no-renames", "--", path)
    if log.exit_code != 0:
        return {}
    commits = log.stdout.decode().split()
    found: dict[str, bytes] = {}
    for data in _cat_file(root, [f"{c}:{path}" for c in commits]):
        if data is not None:
            found.setdefault(hashlib.sha256(data).hexdigest(), data)
    return found


def _cat_file(root: Path, queries: list[str]) -> list[bytes | None]:
    """``git cat-file --batch`` over ``queries``: each object's content, or None when missing. A path is sent
    as the bytes ``os.fsencode`` gives (a name that is not UTF-8, as git's output decoded here names it); a
    query no file name can hold (a lone surrogate that stands for no byte, from a record's JSON) is missing,
    unsent."""
    sent = [_fs_bytes(q) for q in queries]
    if not any(q is not None for q in sent):
        return [None] * len(queries)
    out = git(root, "cat-file", "--batch", stdin=b"".join(q + b"\n" for q in sent if q is not None)).stdout
    answers: list[bytes | None] = []
    at = 0
    for query in sent:  # "<oid> <type> <size>\n<content>\n", or "<query> missing|ambiguous\n"
        if query is None:
            answers.append(None)
            continue
        end = out.find(b"\n", at)
        if end < 0:
            answers.append(None)
            continue
        head = out[at:end].split()
        at = end + 1
        if len(head) == 3 and head[2].isdigit():
            size = int(head[2])
            answers.append(out[at:at + size])
            at += size + 1
        else:
            answers.append(None)
    return answers


def _fs_bytes(text: str) -> bytes | None:
    """``text`` as ``os.fsencode`` encodes a name (UTF-8, ``surrogateescape``); None when no name's bytes
    decode to it, or when it holds a line break (git's ``--batch`` reads a query per line, and strips a
    carriage return before the line feed: such a name would be cut short there, or read as two queries)."""
    if "\n" in text or "\r" in text:
        return None
    try:
        return text.encode(errors="surrogateescape")
    except UnicodeEncodeError:
        return None


def trust_history(root: Path, paths: tuple[str, str] = (REGISTRY.as_posix(), PIN.as_posix())
                  ) -> TrustHistory | NoHistory:
    """The commit graph reachable from HEAD (one ``git log --topo-order --reverse``), with the sha256 of
    the registry and the pin file (``paths``) at every commit and each version's bytes, and the commits that added
    each endorsement's bytes (:func:`_endorsements`): one ``git cat-file --batch-check`` for every commit's object
    ids, then one ``--batch`` for the distinct versions and the endorsements' blobs together."""
    root = Path(root)
    at = checkout(root)
    if isinstance(at, NoHistory):
        return at
    if at.head is None:
        return TrustHistory(commits=(), parents={}, times={}, registry={}, pin={})
    log = git(root, "log", "--topo-order", "--reverse", "--format=%H %ct %P", "HEAD")
    if log.exit_code != 0:
        return NoHistory(f"git log failed: {log.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
    commits: list[str] = []
    parents: dict[str, tuple[str, ...]] = {}
    times: dict[str, datetime] = {}
    for line in log.stdout.decode().splitlines():
        commit, when, *above = line.split()
        commits.append(commit)
        parents[commit] = tuple(above)
        times[commit] = datetime.fromtimestamp(int(when), timezone.utc)
    ids = _object_ids(root, [f"{c}:{p}" for c in commits for p in paths])
    distinct = sorted({i for i in ids if i is not None})
    added = _endorsed_blobs(root)
    if isinstance(added, NoHistory):
        return added
    wanted = sorted({*distinct, *added})
    read = dict(zip(wanted, _cat_file(root, wanted), strict=True))
    blobs = {i: read[i] for i in distinct}
    sha = {i: hashlib.sha256(data).hexdigest() for i, data in blobs.items() if data is not None}
    texts = {sha[i]: data for i, data in blobs.items() if data is not None}
    at_commit = iter(ids)
    versions = [{p: sha.get(next(at_commit) or "") for p in paths} for _c in commits]
    endorsements = _endorsements(added, read)
    if isinstance(endorsements, NoHistory):
        return endorsements
    return TrustHistory(commits=tuple(commits), parents=parents, times=times,
                        registry={c: v[paths[0]] for c, v in zip(commits, versions, strict=True)},
                        pin={c: v[paths[1]] for c, v in zip(commits, versions, strict=True)}, texts=texts,
                        endorsements=endorsements)


_ENDORSEMENTS_LOG = ("-c", "core.quotePath=false", "-c", "log.showRoot=true", "log", "--full-history", "-m",
                     "--no-renames", "--raw", "--no-abbrev", "-z", "--format=%x01%H", "HEAD", "--",
                     SIGNATURES.as_posix())
"""Every commit reachable from HEAD that touches the endorsements' folder, none simplified away
(``--full-history``), a merge compared with each of its parents (``-m``: one that brings in a file neither
parent had is listed too), a root commit with nothing."""


def _endorsed_blobs(root: Path) -> dict[str, set[str]] | NoHistory:
    """The object id of each version of a file under ``lessons/registry-signatures/`` → the commits that added or
    changed a file to it: one ``git log`` (its raw diff against each parent). A log this code cannot read is
    NoHistory, never a partial map (an endorsement missing from it would pass as one not committed yet)."""
    log = git(root, *_ENDORSEMENTS_LOG)
    if log.exit_code != 0:
        return NoHistory(f"git log failed: {log.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
    added: dict[str, set[str]] = {}
    commit, end = "", 0
    for m in _LOG_ENTRY.finditer(log.stdout):
        if m.start() != end:
            break
        end = m.end()
        named, new, status, _path = m.groups()
        if named is not None:
            commit = named.decode()
        elif status != b"D" and new.strip(b"0"):
            added.setdefault(new.decode(), set()).add(commit)
    if log.stdout[end:].strip(b"\n\0"):
        return NoHistory(f"git log printed what tileproof cannot read, at byte {end}: {log.stdout[end:end + 60]!r}")
    return added


def _endorsements(added: dict[str, set[str]], read: Mapping[str, bytes | None]
                  ) -> dict[str, frozenset[str]] | NoHistory:
    """sha256 of each version of a file under ``lessons/registry-signatures/`` → the commits that added or changed a
    file to it (``records.trust.trust_history.TrustHistory.endorsements``), from :func:`_endorsed_blobs` and each
    blob's bytes as ``git cat-file --batch`` read them (``read``)."""
    out: dict[str, set[str]] = {}
    for blob in sorted(added):
        data = read.get(blob)
        if data is None:
            return NoHistory(f"git cat-file could not read {blob}, an endorsement some commit added (a partial "
                             f"clone? fix: git fetch --refetch)")
        out.setdefault(hashlib.sha256(data).hexdigest(), set()).update(added[blob])
    return {sha: frozenset(commits) for sha, commits in out.items()}


def resolve_commit(root: Path, rev: str) -> str | None:
    """The full id of the commit ``rev`` names in the repository at ``root``; None when it names none."""
    if not rev or rev.startswith("-") or _no_history(Path(root)) is not None:
        return None
    found = git(root, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}")
    return found.stdout.decode().strip() or None if found.exit_code == 0 else None


def object_format(root: Path) -> ObjectFormat | NoHistory:
    """The object format of the repository at ``root`` (a full commit id is 40 hex digits in ``sha1``, 64 in
    ``sha256``), or why it has no usable history."""
    return repository(Path(root))


def commit_by_id(root: Path, full: str) -> str | None:
    """``full`` when it is the full id of a commit of the repository at ``root``, looked up as an object id alone
    (``git cat-file --batch-check``: a full id is never read as a ref, a file or an abbreviation); None when no
    commit has that id, or there is no history."""
    fmt = repository(Path(root))
    if isinstance(fmt, NoHistory) or not re.fullmatch(FULL_ID[fmt], full):
        return None
    out = git(root, "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin=f"{full}\n".encode())
    return full if out.exit_code == 0 and out.stdout.decode(errors="replace").split() == [full, "commit"] else None


ID_LENGTH: dict[ObjectFormat, int] = {"sha1": 40, "sha256": 64}
"""How many hex digits a full object id of each format has."""
FULL_ID: dict[ObjectFormat, str] = {fmt: f"[0-9a-f]{{{n}}}" for fmt, n in ID_LENGTH.items()}
"""A full object id of each format, as git prints it."""


def commits_by_prefix(root: Path, prefix: str) -> list[str]:
    """The full ids of the commits whose id begins with the hex ``prefix`` (``git rev-parse --disambiguate``,
    which reads no ref; 4 digits at least), sorted; none without history."""
    if not re.fullmatch("[0-9a-f]{4,64}", prefix) or _no_history(Path(root)) is not None:
        return []
    found = git(root, "rev-parse", f"--disambiguate={prefix}")
    ids = found.stdout.decode(errors="replace").split() if found.exit_code == 0 else []
    if not ids:
        return []
    out = git(root, "cat-file", "--batch-check=%(objectname) %(objecttype)",
               stdin="".join(f"{i}\n" for i in ids).encode()).stdout.decode(errors="replace").splitlines()
    return sorted(words[0] for line in out if len(words := line.split()) == 2 and words[1] == "commit")


def refs_named(root: Path, name: str) -> dict[str, str]:
    """The refs git would take the bare name ``name`` for (``refs/NAME``, ``refs/tags/NAME``, ``refs/heads/NAME``,
    ``refs/remotes/NAME``, ``refs/remotes/NAME/HEAD``: ``git rev-parse``'s rules) → the object each names, a tag
    peeled (one ``git for-each-ref``); none without history."""
    if not name or _no_history(Path(root)) is not None:
        return {}
    wanted = [f"refs/{name}", f"refs/tags/{name}", f"refs/heads/{name}", f"refs/remotes/{name}",
              f"refs/remotes/{name}/HEAD"]
    found = git(root, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(*objectname)", "--", *wanted)
    out: dict[str, str] = {}
    for line in found.stdout.decode(errors="surrogateescape").splitlines() if found.exit_code == 0 else ():
        ref, obj, peeled = [*line.split("\0"), "", ""][:3]
        if ref in wanted:
            out[ref] = peeled or obj
    return out


def is_ancestor(root: Path, commit: str, of: str = "HEAD") -> bool:
    """Whether ``commit`` (a full id) is ``of`` or an ancestor of it (``git merge-base --is-ancestor``)."""
    return git(root, "merge-base", "--is-ancestor", "--end-of-options", commit, of).exit_code == 0


def _object_ids(root: Path, queries: list[str]) -> list[str | None]:
    """``git cat-file --batch-check`` over ``queries``: each object's id, or None when missing."""
    if not queries:
        return []
    out = git(root, "cat-file", "--batch-check=%(objectname) %(objecttype)",
               stdin="".join(q + "\n" for q in queries).encode()).text().splitlines()
    answers: list[str | None] = []
    for i in range(len(queries)):
        words = out[i].split() if i < len(out) else []
        answers.append(words[0] if len(words) == 2 and words[1] == "blob" else None)
    return answers


def file_at(root: Path, rev: str, path: str) -> bytes | None:
    """The bytes of ``path`` in commit ``rev`` (None when the commit or the file is not there)."""
    commit = resolve_commit(root, rev)
    return None if commit is None else _cat_file(root, [f"{commit}:{path}"])[0]


def changed_since(root: Path, rev: str, folders: Iterable[str]) -> tuple[str, frozenset[str]] | NoHistory:
    """(the commit ``rev`` names, every path under ``folders`` added, changed or deleted since it in the
    working tree, untracked files included: ``git diff --name-only`` and ``git ls-files --others``), its gits
    run one after another (:func:`changes_from`; ``catalog.history.changes_since`` runs them at once)."""
    commit = resolve_commit(root, rev)
    if commit is None:
        return no_commit(root, rev)
    folders = list(folders)
    return changes_from(root, commit, folders, git(root, *staged_since(commit, folders)), git(root, *DIRTY),
                        git(root, *untracked(folders)))


def no_commit(root: Path, rev: str) -> NoHistory:
    """Why ``rev`` names no commit here: no usable history, or no such commit."""
    return _no_history(Path(root)) or NoHistory(f"{rev!r} names no commit of this repository")


def staged_since(commit: str, folders: list[str]) -> tuple[str, ...]:
    """``git diff-index --cached``: the paths git's index holds changed since ``commit`` (no file read)."""
    return ("-c", "core.quotePath=false", "diff-index", "--cached", "--name-only", "--no-renames", "-z", "--relative",
            commit, "--", *folders)


def untracked(folders: list[str]) -> tuple[str, ...]:
    """``git ls-files --others``: the untracked files under ``folders`` (every folder listed)."""
    return ("-c", "core.quotePath=false", "ls-files", "-z", "--others", "--exclude-standard", "--", *folders)


def changes_from(root: Path, commit: str, folders: list[str], staged: Answer, working: Answer, others: Answer
                 ) -> tuple[str, frozenset[str]] | NoHistory:
    """:func:`changed_since` from its three answers: :func:`staged_since` (REV against git's index), the stat check
    (:data:`DIRTY`: git's index against the working tree) and :func:`untracked`. A path either of the first two
    names may have changed since REV; ``git diff REV`` over those paths alone says which did (the stat check also
    names a file touched and not changed), so the answer is exactly ``git diff REV``'s, without its look at every
    tracked file; over more than :data:`NAMED_PATHS_MAX` such paths, ``git diff REV`` looks at every file."""
    answers = staged, working, others
    failed = [a for a in answers if a.exit_code != 0]
    diff = None
    if not failed:
        maybe = sorted({p for a in answers[:2] for p in paths(a)})
        named = maybe if len(maybe) <= NAMED_PATHS_MAX else folders
        diff = git(root, "--literal-pathspecs", "-c", "core.quotePath=false", "diff", "--name-only",
                   "--no-renames", "-z", "--relative", commit, "--", *named) if maybe else None
        failed = [diff] if diff is not None and diff.exit_code != 0 else []
    if failed:
        return NoHistory(f"git diff failed: {failed[0].stderr.decode(errors='replace').strip()}")
    found = set(paths(others)) | (set(paths(diff)) if diff is not None else set())
    if folders:
        found = {p for p in found if any(p == f or p.startswith(f"{f}/") for f in folders)}
    return commit, frozenset(found)


NAMED_PATHS_MAX = 2_000
"""At most this many paths are named to ``git diff`` on its command line (:func:`changes_from`)."""


def paths(answer: Answer) -> list[str]:
    """The NUL-separated paths of a git answer, decoded as a folder listing decodes names."""
    return [p.decode(errors="surrogateescape") for p in answer.stdout.split(b"\0") if p]
