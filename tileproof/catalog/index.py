"""The verified-file index: what tileproof learned about each record and transcript, kept so the next
command does not learn it again. An optimisation, never a source of truth.

Two tables, in one SQLite database (``.tileproof-cache/index.sqlite`` under the tree's root; the
folder holds a ``.gitignore`` of ``*``, so git never shows or commits it):

``files``
    A file's identity as ``lstat`` reports it (device, inode, size, mtime and ctime in ns) → the
    sha256 and git blob id (sha1) of the bytes it held then, as ``git``'s own index does. A row is
    used only when every one of those stat fields is unchanged; a row is written only for a file
    whose mtime and ctime are :data:`RACY_NS` older than the moment it was read (an edit inside the
    same clock tick, which stat could not tell apart, is thereby never cached), and only when the
    ``fstat`` before and after reading agree.
``facts``
    What was derived from a file's content: keyed by its sha256, the code key (:func:`code_key`: the
    index schema and a digest of the tileproof package's own source, so any code change starts
    afresh) and, for trust outcomes, the digest of the runner registry they were judged against.
``summaries``
    One value per folder and kind, each newer one replacing it, kept under the code key and a scope
    as facts are: ``runs/``'s records' facts (``catalog.records.read_facts``), and the tree's history
    comparison (``catalog.history``: its scope a digest of what git's answers depend on). The first
    is what ``files`` and ``facts`` say of every file of the folder, joined and in one row, so a
    command that needs all of them reads one row, checks one digest and parses one JSON text instead
    of two rows per file. Its entries carry each file's stat data and are used only while the file's
    ``lstat`` is that one; an entry is made only of a file whose ``files`` row has that stat (settled,
    unchanged while read) and whose facts are this code's.

Every row carries a check digest over its fields and the schema version, keyed (BLAKE2b's MAC) with a
secret that never lies in a tree: :func:`key`, 32 random bytes made once per user under the cache home
(``$XDG_CACHE_HOME/tileproof/index.key``, else ``~/.cache/...``), mode 0600. A row whose check does not
match (a corrupted or hand-edited entry, or one made elsewhere: a committed index) is ignored and counted
(:attr:`Index.ignored`; commands print one line), and the file is read afresh (for a summary: each file is
looked up in ``files`` and ``facts``, and read when they do not know it). A database that cannot be opened
or read is not used at all (one line), and nothing is lost: deleting the folder changes no output, only
the time taken.

Why a key rather than re-verifying what a row says: a row of ``facts`` says more than a signature's
outcome (the audit's per-record issues, the history comparison, a file's digest), and a warm read is one
``lstat`` a record; re-verifying every signature alone would cost far more (docs/benchmarks.md, "The catalog")
and leave the other facts open. The keyed check costs
what the unkeyed one did, and nobody who cannot read the user's cache home can make a row this user's
tileproof accepts.

An index folder in the tree that is a link (or below one), holds a link or another non-regular file in
a database file's place, or that git tracks (:func:`open_index`'s ``tracked``) is refused in one line,
before anything is made or written there, and the command goes on without it.

Why SQLite (stdlib ``sqlite3``) in WAL mode rather than files of our own: concurrent commands (two
audits, a merge and a status) each read one consistent snapshot while another writes, writes are
transactions (a killed command leaves the previous state, never half a row), and every row loads
in one query. ``synchronous=NORMAL``: a power cut may lose the last transaction, which only costs a
re-read. ``TILEPROOF_INDEX=off`` turns the index off (a reviewer's from-scratch run);
``TILEPROOF_INDEX=<folder>`` keeps it elsewhere.

What it does not defend against: someone who can read the key (the user's own account) could equally
edit the installed tileproof. A reviewer who does not trust the machine's cache runs with
``TILEPROOF_INDEX=off``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import sqlite3
import stat
import struct
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from tileproof.records.cache_folder import DATABASE, FOLDER, Tracked, ignored_folder, refusal
from tileproof.records.safe_read import LIMITS, InputKind, stream
from tileproof.runner import git_history

SCHEMA = 3
"""The index's layout. A database of an older layout is started afresh (its tables dropped and made anew: it only
ever saved time); one of a newer layout, a newer tileproof's, is not used (one line). Layout 2 keeps ``files`` and
``facts`` as tables clustered by their keys (``WITHOUT ROWID``; facts by code, scope, kind, then content): one
B-tree each where layout 1 kept three for facts (fewer B-trees to write: docs/benchmarks.md). Layout 3
keys every row's check digest (:func:`key`)."""
ENV = "TILEPROOF_INDEX"
RACY_NS = 2_000_000_000
"""A file modified less than this long before it was read is not cached (git's "racy" entries)."""
READ_WAIT_MS = 2_000
"""How long a command waits to read the index while another holds a lock that keeps readers out (then it goes on
without the index, one line)."""
WRITE_WAIT_MS = 10_000
"""How long a command waits to write what it learned while another holds the write lock (then it writes nothing,
one line: the next command reads those files again)."""
KEY_FILE = "tileproof/index.key"
"""The key of every row's check digest, under the user's cache home (:func:`key_path`)."""
KEY_BYTES = 32


StatKey = tuple[int, int, int, int, int]
"""(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)."""


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def settled(st: os.stat_result, now_ns: int) -> bool:
    """Whether a file with this stat may be cached: neither its content nor its inode changed recently."""
    return max(st.st_mtime_ns, st.st_ctime_ns) <= now_ns - RACY_NS


@lru_cache(maxsize=1)
def code_key() -> str:
    """The schema and a sha256 over the tileproof package's source files (path and bytes): facts made by
    other code are never used."""
    package = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(f"schema {SCHEMA}\n".encode())
    for path in sorted(package.rglob("*.py")):
        h.update(path.relative_to(package).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def key_path() -> Path:
    """Where this user's index key lives: ``$XDG_CACHE_HOME/tileproof/index.key``, else ``~/.cache/...``."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / KEY_FILE


@lru_cache(maxsize=4)
def _key_at(path: Path) -> bytes:
    """The key kept at ``path``, made there the first time (random, mode 0600, placed whole by a link, so two commands
    making it at once agree on one). Raises ``OSError`` or ``ValueError`` (its text the reason) for a key that cannot
    be made or read, or that is not a regular file of this user's, unreadable to others, of :data:`KEY_BYTES`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        draft = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(KEY_BYTES))
            with contextlib.suppress(FileExistsError):  # another command made it meanwhile: that one is the key
                os.link(draft, path)
        finally:
            os.unlink(draft)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise ValueError("not a regular file of this user's with mode 0600")
        data = f.read(KEY_BYTES + 1)
    if len(data) != KEY_BYTES:
        raise ValueError(f"holds {len(data)} bytes, not {KEY_BYTES}")
    return data


_KEY: list[bytes] = []
"""The key as :func:`load_key` last read it: every row's check asks for it, 100,000 times a command."""


def load_key() -> bytes:
    """This user's index key, read from its place now (:func:`key_path`; see the module docstring), and kept for
    :func:`key`: each opening of an index reads it (:func:`open_index`). Raises as :func:`_key_at`."""
    found = _key_at(key_path())
    _KEY[:] = [found]
    return found


def key() -> bytes:
    """The index key :func:`load_key` read last (read now when it read none)."""
    return _KEY[0] if _KEY else load_key()


def _check(*fields: Any) -> str:
    """A row's check digest: BLAKE2b keyed with :func:`key` over the schema and its fields (a torn or hand-edited
    row fails it, and so does one made with another key: a committed or copied index)."""
    return hashlib.blake2b("\x1f".join(map(str, (SCHEMA, *fields))).encode(), key=key(), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class Known:
    """A file's content as indexed: its size, sha256 and git blob id (sha1; empty when the file's size
    changed while it was read, so no id names what was read)."""

    size: int
    sha256: str
    blob: str


_STAT = struct.Struct("<QQQqq")
"""A ``files`` row's stat data, packed: device, inode and size unsigned, the two times signed (ns)."""
_HEX = frozenset("0123456789abcdef")


def _pack(key: StatKey, sha256: str, blob: str) -> bytes | None:
    """A ``files`` row as one bytes object: its stat data (:data:`_STAT`), then the sha256 and the blob id as bytes
    (32 and 20, or none when the blob id is empty). A quarter of the memory of the row's tuples and hex strings (the
    byte pass holds 400,000 of them); None for a row that does not pack (a digest that is not lowercase hex, a field
    out of range: no file tileproof hashed), which is then not used."""
    if not (isinstance(sha256, str) and isinstance(blob, str) and len(sha256) == 64 and len(blob) in (0, 40)
            and _HEX.issuperset(sha256) and _HEX.issuperset(blob)):
        return None
    try:
        return _STAT.pack(*key) + bytes.fromhex(sha256) + bytes.fromhex(blob)
    except (struct.error, TypeError):
        return None


def _unpack(row: bytes) -> tuple[StatKey, Known]:
    """A packed row's (stat data, content), as :func:`_pack` was given them."""
    key = _STAT.unpack_from(row)
    return key, Known(key[2], row[40:72].hex(), row[72:].hex())


def _packed_stat(st: os.stat_result) -> bytes | None:
    try:
        return _STAT.pack(*stat_key(st))
    except struct.error:
        return None


@dataclass
class Index:
    """An open index (or none: ``db`` None), with what it loaded and what is to be written."""

    where: Path | None
    db: sqlite3.Connection | None
    files: dict[str, bytes] = field(default_factory=dict)
    """Path → its ``files`` row, packed (:func:`_pack`)."""
    ignored: int = 0
    """Rows whose check digest did not match: ignored, their files read afresh."""
    problem: str | None = None
    """Why the index is not used (one line), when it is not."""
    _new_files: dict[str, bytes] = field(default_factory=dict)
    _new_facts: dict[tuple[str, str], str] = field(default_factory=dict)
    """The facts to write, keyed as :attr:`_facts` (each made by this code: :func:`code_key`), sharing its keys."""
    _facts: dict[tuple[str, str], str] = field(default_factory=dict)
    """(sha256, kind and scope) → the fact's JSON text, its check digest matched: parsed when asked for (:meth:`fact`),
    so a command holds 100,000 short texts, not the dicts and lists they parse into."""
    _facts_loaded: set[str] = field(default_factory=set)
    _files_loaded: bool = False
    _prefixes: tuple[str, ...] = ()
    """Folders (``runs/``) whose rows were loaded by :meth:`load_files` with a prefix."""
    _asked: set[str] = field(default_factory=set)
    """Paths whose ``files`` row was asked for by itself (:attr:`few`)."""
    _new_summaries: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    unsaved: bool = False
    """Set when a save failed (the write lock held past :data:`WRITE_WAIT_MS`, a full disk): nothing more is written
    by this command."""
    few: bool = False
    """Set by a reader of a few files (``audit --since``, :meth:`one_by_one`): their rows are read one by one,
    not all at once."""

    # -- files ---------------------------------------------------------------------------------
    def known(self, rel: str, st: os.stat_result) -> Known | None:
        """The indexed content of ``rel`` when its stat is the one indexed, else None (a reader of a few files,
        :attr:`few`, asks the database for each; the others load every row once)."""
        if not self._covers(rel):
            if self.few:
                if rel not in self._asked:
                    self._asked.add(rel)
                    self._load_rows("SELECT * FROM files WHERE path = ?", (rel,))
            else:
                self.load_files()
        hit = self.files.get(rel)
        if hit is None or hit[:_STAT.size] != _packed_stat(st):
            return None
        return _unpack(hit)[1]

    def learn(self, rel: str, st: os.stat_result, known: Known, now_ns: int) -> None:
        """Remember ``rel``'s content (``st``: its ``fstat`` before and after the read, equal), when settled."""
        if self.db is not None and settled(st, now_ns):
            if not self.few and not self._covers(rel):
                self.load_files()
            entry = _pack(stat_key(st), known.sha256, known.blob)
            if entry is not None and self.files.get(rel) != entry:
                self._new_files[rel] = entry
                self.files[rel] = entry

    # -- facts ---------------------------------------------------------------------------------
    def fact(self, sha256: str, kind: str, scope: str = "") -> dict[str, Any] | None:
        """The facts of ``kind`` derived from content ``sha256`` (under ``scope``: a registry digest for
        trust outcomes) by this code, or None. Parsed anew on each call (a fresh dict); an entry whose text is not a
        JSON object, its check digest matching, is ignored (counted in :attr:`ignored`) and dropped."""
        if self.db is None:
            return None
        key = (sha256, _kind_key(kind, scope))
        if self.few and scope not in self._facts_loaded:
            if key not in self._facts:
                self._load_facts(scope, (sha256, kind))
        elif scope not in self._facts_loaded:
            self._facts_loaded.add(scope)
            self._load_facts(scope)
        text = self._facts.get(key)
        if text is None:
            return None
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            parsed = None
        if not isinstance(parsed, dict):
            self.ignored += 1
            del self._facts[key]
            return None
        return parsed

    def have(self, kind: str, scope: str = "", among: Iterable[str] | None = None) -> set[str]:
        """The sha256 of every content with a fact of ``kind`` (under ``scope``) made by this code, read without
        their values (a writer that only adds what is missing; a row that fails its check when read is
        replaced then). ``among``: only these contents are asked about, each by its key (a writer of a few
        entries, ``audit --since``, which would otherwise read 100,000 keys to learn of 8)."""
        if self.db is None:
            return set()
        query, args = "SELECT sha256 FROM facts WHERE code = ? AND scope = ? AND kind = ?", (code_key(), scope, kind)
        try:
            if among is None:
                rows = self.db.execute(query, args).fetchall()
            else:
                rows = [row for sha in dict.fromkeys(among)
                        for row in self.db.execute(f"{query} AND sha256 = ?", (*args, sha)).fetchall()]
        except sqlite3.DatabaseError as e:
            self._fail(f"cannot be read ({e})")
            return set()
        return {sha for (sha,) in rows}

    def load_facts(self, scope: str = "") -> None:
        """Every fact of ``scope`` made by this code, in one query (a reader of a few files, :attr:`few`, that
        still looks up every record's facts)."""
        if self.db is not None and scope not in self._facts_loaded:
            self._facts_loaded.add(scope)
            self._load_facts(scope)

    def remember(self, sha256: str, kind: str, value: dict[str, Any], scope: str = "") -> None:
        if self.db is not None:
            key, text = (sha256, _kind_key(kind, scope)), json.dumps(value, sort_keys=True)
            if self._facts.get(key) != text:  # this code's text of an equal value is this text
                self._facts[key] = text
                self._new_facts[key] = text

    def entries(self, kind: str, scope: str, folder: str) -> Entries:
        """The facts of ``kind`` under ``scope`` made by this code of the contents the ``files`` rows of ``folder`` (a
        folder and its ``/``) hold, with those rows, one file at a time in the order of their paths
        (:class:`Entries`): a reader of 100,000 entries, each used once and in that order, holds one at a time and
        loads no ``files`` row. Empty when the index is not used, or for a reader of a few files (:attr:`few`: those
        ask :meth:`known` and :meth:`fact`)."""
        if self.db is None or self.few:
            return Entries(self, kind, scope, iter(()))
        try:
            rows = self.db.execute(
                "SELECT files.*, facts.value, facts.check_ FROM files JOIN facts ON facts.sha256 = files.sha256 WHERE "
                "files.path >= ? AND files.path < ? AND facts.code = ? AND facts.scope = ? AND facts.kind = ? ORDER BY "
                "files.path", (folder, folder[:-1] + "0", code_key(), scope, kind))
        except sqlite3.DatabaseError as e:
            self._fail(f"cannot be read ({e})")
            return Entries(self, kind, scope, iter(()))
        return Entries(self, kind, scope, rows)

    def add(self, sha256: str, kind: str, value: dict[str, Any], scope: str = "") -> None:
        """:meth:`remember` for a writer that never reads the value back: only its text is kept, until :meth:`save`."""
        if self.db is not None:
            self._new_facts[(sha256, _kind_key(kind, scope))] = json.dumps(value, sort_keys=True)

    @contextmanager
    def one_by_one(self) -> Iterator[None]:
        """Within it, rows not loaded already are asked for one by one (:attr:`few`): for a reader that looks up a
        few files or contents of a table whose other rows it does not need."""
        before, self.few = self.few, True
        try:
            yield
        finally:
            self.few = before

    # -- summaries -----------------------------------------------------------------------------
    def has_summary(self, folder: str, kind: str, scope: str = "") -> bool:
        """Whether a summary of ``kind`` of ``folder`` made by this code under ``scope`` is there (unread, unchecked:
        whether to make one)."""
        if self.db is None:
            return False
        try:
            return self.db.execute("SELECT 1 FROM summaries WHERE folder = ? AND kind = ? AND code = ? AND scope = ?",
                                   (folder, kind, code_key(), scope)).fetchone() is not None
        except sqlite3.DatabaseError as e:
            self._fail(f"cannot be read ({e})")
            return False

    def summary(self, folder: str, kind: str, scope: str = "") -> Any | None:
        """The summary of ``kind`` of ``folder`` (a folder and its ``/``) made by this code under ``scope``, as
        :meth:`summarise` was given it; None when there is none, or when its check digest does not match
        (counted in :attr:`ignored`)."""
        if self.db is None:
            return None
        code = code_key()
        try:
            rows = self.db.execute("SELECT value, check_ FROM summaries WHERE folder = ? AND kind = ? AND code = ? "
                                   "AND scope = ?", (folder, kind, code, scope)).fetchall()
        except sqlite3.DatabaseError as e:
            self._fail(f"cannot be read ({e})")
            return None
        for value, check in rows:
            try:
                if check == _check(folder, kind, scope, code, value):
                    return json.loads(value)
            except (TypeError, ValueError):
                pass
            self.ignored += 1
        return None

    def summarise(self, folder: str, kind: str, value: Any, scope: str = "") -> None:
        """Keep ``value`` (JSON) as the summary of ``kind`` of ``folder`` (replacing any other, of any scope or
        code), written by :meth:`save`."""
        if self.db is not None:
            self._new_summaries[(folder, kind)] = (scope, json.dumps(value, separators=(",", ":")))

    def load_files(self, prefix: str = "") -> None:
        """The ``files`` rows, loaded on first use (a command that reads only records never loads them); with a
        ``prefix`` (a folder and its ``/``), only the rows of the files under it."""
        if self._covers(prefix) or self.db is None:
            return
        if prefix:
            self._prefixes += (prefix,)  # "/" + 1 is "0": every path under the folder sorts between the two
            self._load_rows("SELECT * FROM files WHERE path >= ? AND path < ?", (prefix, prefix[:-1] + "0"))
            return
        self._files_loaded = True
        self._load_rows("SELECT * FROM files", (), skip=self._prefixes)  # those: loaded

    def _covers(self, rel: str) -> bool:
        return self._files_loaded or rel.startswith(self._prefixes)

    def _load_rows(self, query: str, args: tuple, skip: tuple[str, ...] = ()) -> None:
        if self.db is None:
            return
        try:  # row by row, not fetchall(): 400,000 rows at once are a transient 200 MiB
            for rel, *k, sha, blob, check in self.db.execute(query, args):
                if skip and rel.startswith(skip):
                    continue
                if check != _check(rel, *k, sha, blob):
                    self.ignored += 1
                    continue
                packed = _pack(tuple(k), sha, blob)
                if packed is not None:  # else: its file is read afresh
                    self.files[rel] = packed
        except sqlite3.DatabaseError as e:
            self._fail(f"cannot be read ({e})")

    def _load_facts(self, scope: str, one: tuple[str, str] | None = None) -> None:
        """The facts of ``scope`` made by this code: all of them, or ``one`` (sha256, kind)."""
        assert self.db is not None
        code = code_key()
        query = "SELECT sha256, kind, value, check_ FROM facts WHERE code = ? AND scope = ?"
        try:  # row by row, not fetchall() (see _load_rows)
            for sha, kind, value, check in self.db.execute(query + (" AND sha256 = ? AND kind = ?" if one else ""),
                                                           (code, scope, *(one or ()))):
                if not isinstance(value, str) or check != _check(sha, kind, scope, code, value):
                    self.ignored += 1
                    continue
                self._facts[(sha, _kind_key(kind, scope))] = value  # parsed when asked for (fact)
        except sqlite3.DatabaseError as e:
            self._fail(f"cannot be read ({e})")

    # -- writing -------------------------------------------------------------------------------
    def save(self) -> None:
        """Write what was learned, in one transaction (readers see the old index or the new one). The rows are
        made as SQLite takes them, not listed first (300,000 learned rows listed are a transient 100 MiB)."""
        if self.db is None or self.unsaved or not (self._new_files or self._new_facts or self._new_summaries):
            return

        def file_rows() -> Iterator[tuple]:
            for rel, packed in self._new_files.items():
                k, kn = _unpack(packed)
                yield (rel, *k, kn.sha256, kn.blob, _check(rel, *k, kn.sha256, kn.blob))

        code = code_key()

        def fact_rows() -> Iterator[tuple]:  # by kind and scope, then content: appended to the table, not scattered
            for sha, key in sorted(self._new_facts, key=lambda k: (k[1], k[0])):
                value = self._new_facts[(sha, key)]
                kind, scope = key.split("\0", 1)
                yield (sha, kind, scope, code, value, _check(sha, kind, scope, code, value))
        summary_rows = [(folder, kind, scope, code, value, _check(folder, kind, scope, code, value))
                        for (folder, kind), (scope, value) in self._new_summaries.items()]
        try:
            self.db.execute(f"PRAGMA busy_timeout = {WRITE_WAIT_MS}")
            with self.db:
                self.db.executemany("INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?,?,?)", file_rows())
                if self._new_facts:  # facts of other code are never used again: dropped, so the index stays its size
                    self.db.execute("DELETE FROM facts WHERE code != ?", (code,))
                self.db.executemany("INSERT OR REPLACE INTO facts VALUES (?,?,?,?,?,?)", fact_rows())
                self.db.executemany("INSERT OR REPLACE INTO summaries VALUES (?,?,?,?,?,?)", summary_rows)
        except sqlite3.DatabaseError as e:  # locked past WRITE_WAIT_MS, disk full, corrupted: nothing is lost
            why = (f"locked by another command for {WRITE_WAIT_MS // 1000} s" if "locked" in str(e) else str(e))
            self.problem = self.problem or f"{self.where}: not updated ({why}); what this command learned is not kept"
            self.unsaved = True  # the command's later saves are not tried (each would wait as long again)
            self._new_files.clear()
            self._new_facts.clear()
            self._new_summaries.clear()
            return
        finally:
            with contextlib.suppress(sqlite3.Error):
                if self.db is not None:
                    self.db.execute(f"PRAGMA busy_timeout = {READ_WAIT_MS}")
        self._new_files.clear()
        self._new_facts.clear()
        self._new_summaries.clear()

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def _fail(self, why: str) -> None:
        if "locked" in why:  # another command holds it: nothing to fix, only to wait for
            self.problem = (f"{self.where}: locked by another command for {READ_WAIT_MS // 1000} s; not used, "
                            "its files read afresh")
        else:
            self.problem = f"{self.where}: {why}; not used (fix: delete {self.where.parent if self.where else ''})"
        self.files.clear()
        self._facts.clear()
        self.close()

    def notes(self) -> list[str]:
        """One line each for what a command should say about the index (nothing when all was well)."""
        out = []
        if self.problem:
            out.append(f"index: {self.problem}")
        if self.ignored:
            out.append(f"index: {self.ignored} entries did not match their check digest (corrupted or edited); "
                       "ignored, their files read afresh")
        return out


def _kind_key(kind: str, scope: str) -> str:
    """The key of a fact's kind and scope in :attr:`Index._facts`: one string object for all its entries (interned),
    not one made per entry."""
    return sys.intern(f"{kind}\0{scope}")


_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, dev INTEGER, ino INTEGER, size INTEGER,
    mtime_ns INTEGER, ctime_ns INTEGER, sha256 TEXT, blob TEXT, check_ TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS facts (sha256 TEXT, kind TEXT, scope TEXT, code TEXT, value TEXT, check_ TEXT,
    PRIMARY KEY (code, scope, kind, sha256)) WITHOUT ROWID;
DROP INDEX IF EXISTS facts_of_code;  -- layout 1's, which a tileproof before layout 2 makes before it refuses this one
CREATE TABLE IF NOT EXISTS summaries (folder TEXT, kind TEXT, scope TEXT, code TEXT, value TEXT, check_ TEXT,
    PRIMARY KEY (folder, kind));
"""


class Entries:
    """Facts of one kind and scope, by the path of a file that held their content (:meth:`Index.entries`), asked for
    in the order of the paths (:meth:`take`)."""

    def __init__(self, index: Index, kind: str, scope: str, rows: Iterator[tuple]) -> None:
        self.index, self.kind, self.scope, self._rows = index, kind, scope, rows
        self._row: tuple | None = None

    def take(self, rel: str, st: os.stat_result) -> tuple[str, dict[str, Any]] | None:
        """The sha256 the file ``rel`` holds while its ``lstat`` is ``st`` (its ``files`` row, used as
        :meth:`Index.known` uses it) and the value kept for that content, parsed; None when there is none, or when a
        check digest does not match or the value does not parse (counted in :attr:`Index.ignored`). ``rel`` must
        come after every path asked before."""
        try:
            while self._row is None or self._row[0] < rel:
                self._row = next(self._rows)
        except (StopIteration, sqlite3.DatabaseError):
            self._rows = iter(())
            return None
        path, *k, sha, blob, row_check, value, check = self._row
        if path != rel:
            return None
        if row_check != _check(rel, *k, sha, blob) or check != _check(sha, self.kind, self.scope, code_key(), value):
            self.index.ignored += 1
            return None
        packed = _pack(tuple(k), sha, blob)
        if packed is None or packed[:_STAT.size] != _packed_stat(st):
            return None
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            self.index.ignored += 1
            return None
        return sha, parsed


def location(root: Path) -> Path | None:
    """Where the index of the tree at ``root`` lives; None when ``TILEPROOF_INDEX=off``."""
    chosen = os.environ.get(ENV, "")
    if chosen.lower() in ("off", "0", "no"):
        return None
    return (Path(chosen) if chosen else Path(root) / FOLDER) / DATABASE


def open_index(root: Path, tracked: Tracked | None = None) -> Index:
    """The tree's index, opened (and made, the first time); an index that cannot be used (:func:`refusal`, no key,
    a database that does not open or read) is an empty one with its ``problem`` said, and the command goes on
    without it. ``tracked``: asked whether git tracks anything under the folder (None: not asked)."""
    where = location(root)
    if where is None:
        return Index(None, None)
    refused = refusal(root, where.parent, tracked)
    if refused is not None:
        return Index(where, None, problem=refused)
    try:
        kept = key_path()
        load_key()
        if kept.resolve().is_relative_to(Path(root).resolve()):
            raise ValueError("it lies inside the tree, where anyone who commits could write it")
    except (OSError, ValueError, RuntimeError) as e:
        return Index(where, None, problem=f"its key ({e}): the index is not used (fix: set XDG_CACHE_HOME to a "
                                          "folder of your own, outside the tree)")
    try:
        ignored_folder(where.parent)
        db = sqlite3.connect(where, timeout=READ_WAIT_MS / 1000, isolation_level=None)
    except (OSError, sqlite3.Error) as e:
        return Index(where, None, problem=f"{where}: cannot be opened ({e}); not used")
    index = Index(where, db)
    deadline = time.monotonic() + READ_WAIT_MS / 1000
    while True:
        try:
            found = _set_up(db)
            break
        except sqlite3.OperationalError as e:
            # Two commands making the database at once: switching it to WAL and creating its tables take locks
            # that SQLite refuses at once, without waiting, where waiting could deadlock. Each step is idempotent:
            # try again shortly.
            if "locked" not in str(e) or time.monotonic() > deadline:
                index._fail(f"cannot be read ({e})")
                return index
            time.sleep(0.05)
        except sqlite3.DatabaseError as e:
            index._fail(f"cannot be read ({e})")
            return index
    if found is not None and found != str(SCHEMA):
        index._fail(f"has layout {found}; this tileproof writes {SCHEMA}")
    return index


def _older(found: str) -> bool:
    return found.isdigit() and int(found) < SCHEMA


def _set_up(db: sqlite3.Connection) -> str | None:
    """WAL mode, the tables and the schema row (each step a no-op when done already); the layout found, or
    None for a database this call made."""
    db.execute(f"PRAGMA busy_timeout = {READ_WAIT_MS}")
    if db.execute("PRAGMA journal_mode").fetchall()[0][0] != "wal":
        db.execute("PRAGMA journal_mode = WAL").fetchall()
    db.execute("PRAGMA synchronous = NORMAL")
    rows = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchall() if _has_meta(db) else []
    if rows and _older(rows[0][0]):  # fetchall: no statement left open, which would hold a read transaction
        db.execute("BEGIN IMMEDIATE")  # a cache of an older layout: made anew, in one transaction
        try:
            rows = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchall()
            if not _older(rows[0][0]):  # another command made it anew while this one waited: used as it is
                db.execute("COMMIT")
                return rows[0][0]
            for table in ("files", "facts", "summaries"):
                db.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in _TABLES.split(";"):
                db.execute(statement)
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA),))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return str(SCHEMA)
    db.executescript(_TABLES)
    if rows:
        return rows[0][0]
    db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
    return None


def _has_meta(db: sqlite3.Connection) -> bool:
    return bool(db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchall())


_SHARED: dict[tuple[int, Path | None], tuple[int | None, Index]] = {}


def shared(root: Path | str, tracked: Tracked | None) -> Index:
    """This process's open index of the tree at ``root`` (opened once, and again when its file was deleted or
    replaced meanwhile): every reader of one command shares what it learns, and each saves its part. ``tracked``:
    as :func:`open_index` asks it (:func:`opened` passes git's answer)."""
    where = location(Path(root))
    key = (os.getpid(), where)
    try:
        ino = os.stat(where).st_ino if where is not None else None
    except OSError:
        ino = None
    found = _SHARED.get(key)
    if found is not None and found[0] == ino and (ino is not None or found[1].db is None):
        return found[1]  # (one not used is not asked again: its refusal, said once, stands for the command)
    if found is not None:
        found[1].close()
    index = open_index(Path(root), tracked)
    try:
        ino = os.stat(where).st_ino if where is not None else None
    except OSError:
        ino = None
    _SHARED[key] = (ino, index)
    return index


def opened(root: Path | str) -> Index:
    """The index of the tree at ``root`` (:func:`shared`), not used when git tracks anything under its folder
    (``runner.git_history.tracked_under``): the one way every reader of the catalog opens it."""
    return shared(root, git_history.tracked_under)


def open_notes() -> list[str]:
    """The notes (:meth:`Index.notes`) of every index this process has open."""
    return [n for key, (_ino, index) in _SHARED.items() if key[0] == os.getpid() for n in index.notes()]


def release() -> None:
    """Close every index this process opened (the end of a command: the next one reads the database afresh)."""
    for key in [k for k in _SHARED if k[0] == os.getpid()]:
        _SHARED.pop(key)[1].close()


def hash_stream(size: int, chunks: Iterable[bytes]) -> tuple[Known, int]:
    """(the content's ``Known``, bytes seen) of a file of ``size`` bytes read in ``chunks``: sha256 and git's
    sha1 blob id in one pass."""
    sha, blob, seen = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size), 0
    for chunk in chunks:
        sha.update(chunk)
        blob.update(chunk)
        seen += len(chunk)
    return Known(seen, sha.hexdigest(), blob.hexdigest() if seen == size else ""), seen


def _kept(chunks: Iterable[bytes], into: list[bytes]) -> Iterator[bytes]:
    for chunk in chunks:
        into.append(chunk)
        yield chunk


def now_ns() -> int:
    return time.time_ns()


def content(root: Path | str, rel: str, kind: InputKind, index: Index, st: os.stat_result | None = None,
            now: int | None = None, read: list[bytes] | None = None) -> Known:
    """The size, sha256 and blob id of the regular file ``rel``, from the index when ``st`` (its ``lstat``
    from a walk that vouches for the folders above it: ``records.walk.walk``) is the one indexed and within its
    kind's cap; else read through ``safe_read.stream`` (every refusal its ``InputRefused`` line), hashed as
    it streams, and learned when the file did not change while it was read. ``read``: where given, the chunks read
    are appended to it, the bytes the digest is of (none when the index answered)."""
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_size <= LIMITS[kind]:
        hit = index.known(rel, st)
        if hit is not None:
            return hit
    with stream(root, rel, kind) as (size, chunks):
        known, seen = hash_stream(size, chunks if read is None else _kept(chunks, read))
    if seen == size and st is not None:
        try:
            after = os.lstat(os.path.join(root, rel))
        except OSError:
            return known
        if stat_key(after) == stat_key(st):
            index.learn(rel, st, known, now if now is not None else now_ns())
    return known
