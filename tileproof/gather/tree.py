"""The publish decision's inputs, read from a repository tree in one place.

``Tree(root)`` loads every record under runs/ once, each examined once
(``store.examine``: its seal checked) and selected by type; for a lesson it
gathers today's digests (the programs, every source the program's records
attest, the snippets of the lesson's claims), the tolerance table, a reader for
evidence/ and today's claims file, and asks ``gate.decide``. ``status``,
``publish`` and ``audit`` all come through ``Tree.decide``; none gathers
anything itself. The audit, which has already validated and sealed every record,
builds its ``Tree`` from them (``Tree.of``) instead of reading runs/ again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from tileproof.claims import spec as claims_spec
from tileproof.gather import trust_state
from tileproof.judge import claim_verdicts, gate, release_matrix, releases
from tileproof.judge.claim_verdicts import NO_CLAIMS, ClaimsToday
from tileproof.records import lessons, lock, store, tolerances
from tileproof.records.errors import InputRefused
from tileproof.records.models import (
    ENTRY_RUN_VERSION,
    BenchRecord,
    ClaimsRecord,
    CompileRecord,
    LessonFront,
    RunRecord,
)
from tileproof.records.safe_read import read_evidence
from tileproof.records.store import Examined
from tileproof.runner import history


def inside(root: Path, rel: str, folder: str | None = None) -> Path | None:
    """``root/rel`` when ``rel`` is a plain relative path (under ``folder``), else None."""
    pp = PurePosixPath(rel)
    if pp.is_absolute() or ".." in pp.parts or (folder and pp.parts[:1] != (folder,)):
        return None
    return Path(root) / pp


def today_digests(root: Path, paths: Iterable[str]) -> dict[str, str | None]:
    """path → sha256 of the file today, None when it does not exist."""
    out: dict[str, str | None] = {}
    for rel in paths:
        path = inside(root, rel)
        out[rel] = store.sha256_file(path) if path is not None and path.is_file() else None
    return out


def evidence_reader(root: Path) -> gate.EvidenceReader:
    """A reader for files under evidence/ only, through ``safe_read.read_evidence``; None
    for a path elsewhere or a missing file; a link, FIFO or oversized file raises one line."""
    def read(rel: str) -> bytes | None:
        if inside(root, rel, store.EVIDENCE) is None:
            return None
        try:
            return read_evidence(root, rel)
        except InputRefused as e:
            if e.kind == "missing":
                return None
            raise
    return read


def load_table(root: Path) -> dict[str, gate.Bound]:
    """The tolerance table (kernels/tolerances.py) as check name → Bound; {} when absent."""
    if not (Path(root) / tolerances.TABLE_FILE).is_file():
        return {}
    return {name: gate.Bound(rtol, atol) for name, (rtol, atol) in tolerances.load_table(Path(root)).items()}


def tables_at(root: Path, runs: Iterable[RunRecord], today: dict[str, str | None]) -> dict[str, dict[str, gate.Bound]]:
    """For records before ``run_version`` 3 whose whole-file tolerance source changed since: the sha256 they attest
    → the table that version held, when a committed version with that digest is in git history
    (``runner.history.versions``; the header is matched by rendering each committed table). A
    digest not found there is left out, and the judge keeps the file whole-file dependent."""
    wanted = {(s.path, s.sha256) for r in runs if r.run_version < ENTRY_RUN_VERSION for s in r.sources
              if s.path in tolerances.TABLE_PATHS and today.get(s.path) != s.sha256}
    if not wanted:
        return {}
    found = history.versions(root, tolerances.TABLE_FILE.as_posix())
    if not isinstance(found, dict):
        return {}
    tables: dict[str, tolerances.Table] = {}
    for digest, data in found.items():
        try:
            tables[digest] = tolerances.parse_table(data.decode("utf-8"), tolerances.TABLE_FILE)
        except (tolerances.ToleranceTableError, UnicodeDecodeError):
            continue
    headers = {store.sha256_bytes(tolerances.render_cpp_header(t).encode()): t for t in tables.values()}
    out = {}
    for path, digest in wanted:
        table = (tables if path == tolerances.TABLE_FILE.as_posix() else headers).get(digest)
        if table is not None:
            out[digest] = {n: gate.Bound(rtol, atol) for n, (rtol, atol) in table.items()}
    return out


def claims_today(root: Path, lesson_id: str) -> ClaimsToday:
    """The lesson's claims file as it is today (``NO_CLAIMS`` when it has none); one line if unreadable."""
    root = Path(root)
    path = root / claims_spec.CLAIMS_DIR / f"{lesson_id}{claims_spec.SUFFIX}"
    if not path.is_file():
        return NO_CLAIMS
    shown = store.rel(root, path)
    loaded = claims_spec.load_file(path, shown)
    snippets = {}
    for c in loaded.spec.claims:
        names = [getattr(p.check, "snippet", None) or getattr(p.check, "program", None) for _r, p in c.probes()]
        snippets[c.id] = tuple(dict.fromkeys(store.rel(root, loaded.folder / n) for n in names if n))
    return ClaimsToday(shown, {c.id: c.asserted for c in loaded.spec.claims}, snippets)


@dataclass
class Tree:
    """A repository's records, examined once, and the readers for everything else the decision needs."""

    root: Path
    records: list[Examined] = field(default_factory=list)
    """Run, bench, claims and compile records (other kinds are not evidence for a lesson)."""
    _table: dict[str, gate.Bound] | None = None
    trust: trust_state.Trusted | None = None
    """The trust state the records were judged under (``gather.trust_state``); None for a tree built over
    records examined elsewhere."""

    @classmethod
    def load(cls, root: Path, trust_root: str | None = None) -> Tree:
        """Every record under runs/, each with its seal checked, its signature verified against
        ``lessons/runners.yaml`` and its standing judged from history against the trust root
        (``gather.trust_state``; the first record that fails validation raises one line)."""
        trusted = trust_state.load(Path(root), trust_root)
        tree = cls.of(root, trusted.examine(store.read_records(Path(root), trusted.registry)))
        tree.trust = trusted
        return tree

    @classmethod
    def of(cls, root: Path, examined: Iterable[Examined]) -> Tree:
        """A tree over records already loaded and examined."""
        kinds = (RunRecord, BenchRecord, ClaimsRecord, CompileRecord)
        return cls(Path(root), [e for e in examined if isinstance(e.record, kinds)])

    def table(self) -> dict[str, gate.Bound]:
        if self._table is None:
            self._table = load_table(self.root)
        return self._table

    def decide(self, lesson: lessons.Lesson | LessonFront) -> gate.Decision:
        """The one publish decision for ``lesson``, with every input gathered here (the cuda-tile releases it
        was verified on from ``release_matrix``)."""
        front, runs, others, today = self._inputs(lesson)
        read = evidence_reader(self.root)
        decision = gate.decide(front, runs + others, today, self.table(), read)
        return replace(decision, cuda_tile_verified=release_matrix.verified(front, runs, today, self.table(), read))

    def releases(self, lesson: lessons.Lesson | LessonFront) -> release_matrix.LessonReleases:
        """The lesson's Python programs x the cuda-tile releases their run records were made with."""
        front, runs, _others, today = self._inputs(lesson)
        return release_matrix.lesson_releases(front, runs, today, self.table(), evidence_reader(self.root))

    def _inputs(self, lesson: lessons.Lesson | LessonFront) -> tuple[LessonFront, list, list, gate.Today]:
        """The lesson's front matter, its programs' run records, the other records and today's inputs."""
        front = lesson.front if isinstance(lesson, lessons.Lesson) else lesson
        programs = {row.program for row in front.results}
        runs = [e for e in store.of_kind(self.records, RunRecord) if e.record.program in programs]
        claims = claims_today(self.root, front.id)
        paths = programs | {s.path for e in runs for s in e.record.sources}
        paths |= {p for ps in claims.snippets.values() for p in ps}
        if front.res_usage is not None:  # the compile records' sources: res_usage.attested_beside compares them
            paths |= {s.path for e in store.of_kind(self.records, CompileRecord) for s in e.record.sources}
        others = [e for e in self.records if not isinstance(e.record, RunRecord)]
        digests = today_digests(self.root, sorted(paths))
        today = gate.Today(digests, claims, tables_at(self.root, [e.record for e in runs], digests),
                           releases.lock_key(lock.cuda_tile_pin(self.root)))
        return front, runs, others, today


def refuted_claims(root: Path, document: str, tree: Tree | None = None) -> list:
    """``claim_verdicts.refuted`` for one document, with its inputs read from ``root`` (the lesson
    decision asks the same through ``Tree.decide``)."""
    tree = tree or Tree.load(root)
    claims = claims_today(root, document)
    today = today_digests(root, sorted({p for ps in claims.snippets.values() for p in ps}))
    return claim_verdicts.refuted(document, tree.records, claims, today)
