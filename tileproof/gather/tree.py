"""The publish decision's inputs, read from a repository tree in one place.

``Tree.load(root)`` reads every record's facts under runs/ (the catalog: ``catalog.Catalog.facts``) and, in full,
only the records the lessons' verdicts can depend on (``judge.preselect``; ``Tree.chosen``), each examined
once (``store.examine``: its seal checked) and selected by type; for a lesson it
gathers today's digests (the programs, every source the program's records
attest, the snippets of the lesson's claims), the tolerance table (and, for
records that attest it as a whole file, the versions of it git history holds),
what the programs use, a reader for evidence/, today's claims file and the tree's
plausibility signals (``judge.plausibility``, computed once), and asks
``gate.decide``; ``Tree.verdict`` adds the decision on a published lesson's
cited records, the tree's history check, the trust root's findings and the
inputs refused by what they are (``gather.inputs``), all in one
``judge.verdict.LessonVerdict``. ``status``,
``publish`` and ``audit`` all come through ``Tree.verdict``; none gathers
anything itself. The audit, which has already validated and sealed every record,
builds its ``Tree`` from them (``Tree.of``) instead of reading runs/ again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath

from tileproof.catalog import Catalog
from tileproof.claims import spec as claims_spec
from tileproof.gather import inputs, trust_state
from tileproof.judge import gate, plausibility, preselect, release_matrix, releases, verdict
from tileproof.judge.audit.result import Issue
from tileproof.judge.claim_verdicts import NO_CLAIMS, ClaimsToday
from tileproof.judge.verdict import LessonVerdict
from tileproof.records import lessons, lock, parsers, store, tolerances
from tileproof.records.depends import ProgramUses
from tileproof.records.errors import InputRefused, TileproofError
from tileproof.records.findings import Finding
from tileproof.records.history_check import HistoryReport, NoHistory
from tileproof.records.history_check import check as check_history
from tileproof.records.models import (
    CompileRecord,
    LessonFront,
    RunRecord,
    Transcript,
    TranscriptRef,
)
from tileproof.records.safe_read import read_evidence
from tileproof.records.store import Examined
from tileproof.records.trust import runner_keys
from tileproof.runner import git_history
from tileproof.toolchain import uses


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


def smi_clocks(root: Path, transcripts: Iterable[Transcript | TranscriptRef | None]) -> dict[str, datetime | None]:
    """Transcript path → the clock on the first line of each nvidia-smi transcript records name
    (``plausibility.smi_transcript``: ``transcripts``, None for a record without one), read through ``safe_read``
    and kept only where its digest is its record's (None otherwise: refused, missing, changed, or without a clock
    line)."""
    out: dict[str, datetime | None] = {}
    read = evidence_reader(root)
    for t in transcripts:
        if t is None or t.path in out:
            continue
        try:
            data = read(t.path)
        except InputRefused:  # a link, FIFO or oversized file: the audit's input-* finding
            data = None
        trusted = data is not None and store.sha256_bytes(data) == t.sha256
        out[t.path] = parsers.smi_clock(data.decode("utf-8", "replace")) if trusted and data is not None else None
    return out


def load_bounds(root: Path) -> dict[str, gate.Bound]:
    """The tolerance table (kernels/tolerances.py) as check name → Bound; {} when absent."""
    if not (Path(root) / tolerances.TABLE_FILE).is_file():
        return {}
    return {name: gate.Bound(rtol, atol) for name, (rtol, atol) in tolerances.load_table(Path(root)).items()}


def tables_at(root: Path, records: Iterable[RunRecord | CompileRecord], today: dict[str, str | None],
              versions: Callable[[], dict[str, bytes] | NoHistory] | None = None) -> dict[str, dict[str, gate.Bound]]:
    """For records that attest the tolerance table as a whole file (``run_version`` < 3, ``compile_version``
    < 4) and whose table file changed since: the sha256 they attest → the table that version held, when a
    committed version with that digest is in git history (``runner.git_history.versions``; the header is matched
    by rendering each committed table). A digest not found there is left out, and the judge keeps the file
    whole-file dependent. ``versions``: what reads those committed versions (default: git, each call)."""
    wanted = {(s.path, s.sha256) for r in records if r.attests_table_whole for s in r.sources
              if s.path in tolerances.TABLE_PATHS and today.get(s.path) != s.sha256}
    if not wanted:
        return {}
    found = versions() if versions is not None else git_history.versions(root, tolerances.TABLE_FILE.as_posix())
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



def program_uses(root: Path, programs: Iterable[str], table: dict[str, gate.Bound],
                 also: Iterable[str] = ()) -> dict[str, ProgramUses]:
    """What each program (that exists today) uses: its files and the tolerance entries it names, among
    today's table and ``also`` (the names of the table versions older records attest)."""
    names = set(table) | set(also)
    return {p: uses.program_uses(root, Path(root) / p, names) for p in sorted(set(programs))
            if (Path(root) / p).is_file()}


def _every_front(root: Path) -> list[LessonFront] | None:
    """The front matter of every lesson under lessons/, or None when one does not load (its command says why)."""
    try:
        return [lesson.front for lesson in lessons.load_all(root)]
    except (TileproofError, ValueError):
        return None


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
    _history: HistoryReport | None = None
    _versions: dict[str, bytes] | NoHistory | None = None
    _signals: dict[str, tuple[plausibility.Signal, ...]] | None = None
    _refused: dict[str, Issue] | None = None
    notes: tuple[str, ...] = ()
    """What the catalog had to say while the tree was read (an index ignored or not used): said aside, it changes no
    verdict."""

    def signals(self) -> dict[str, tuple[plausibility.Signal, ...]]:
        """The tree's plausibility signals by run id (``judge.plausibility.signals``), read once."""
        if self._signals is None:
            smi = (plausibility.smi_transcript(e.record) for e in self.records)
            self._signals = plausibility.signals(self.records, smi_clocks(self.root, smi), lock.wheel_hashes(self.root))
        return self._signals

    def refused(self) -> dict[str, Issue]:
        """Every input under evidence/ and lessons/ refused by what it is (``gather.inputs.refused``), read once."""
        if self._refused is None:
            self._refused = inputs.refused(self.root)
        return self._refused

    @classmethod
    def load(cls, root: Path, trust_root: str | None = None, every: bool = False) -> Tree:
        """The records under runs/ the lessons' verdicts can depend on (``judge.preselect``; ``every``: all of
        them), each with its seal checked, its signature verified against ``lessons/runners.yaml`` and its
        standing judged from history against the trust root (``gather.trust_state``; the first record that fails
        validation raises one line), read through the tree's catalog (``catalog.Catalog``): every record's
        facts, then the chosen records in full."""
        root = Path(root)
        registry = runner_keys.load_registry(root)
        with Catalog.open(root, registry) as cat:
            tree = cls._load(cat, trust_root, every)
            tree.notes = cat.notes()
        return tree

    @classmethod
    def _load(cls, cat: Catalog, trust_root: str | None, every: bool) -> Tree:
        """:meth:`load` from the tree's catalog. Three reads that need nothing of one another run at once: the
        refused-inputs walk (pure file-system work) in the runner's forked process, forked first, before any thread
        starts; git's reads of the history; and here, the records' facts."""
        root = cat.root
        helper = cat.background()
        try:
            refused = helper.submit(inputs.refused, root)
            history = cat.history()  # read once: the records' first commits and the history check
            records = cat.records() if every else None
            found = cat.facts() if not every else []
            history_read = history()
            trusted = trust_state.load(root, trust_root, history_read=history_read, runners=cat.registry)
            checked = check_history(history_read)
            if records is not None:
                return cls.of(root, trusted.examine(records), trusted, checked, refused())
            names = [name for name, _e in found]
            facts = trusted.examine(e for _name, e in found)

            def read(wanted: set[str]) -> list[Examined]:
                chosen = [name for name, e in zip(names, facts, strict=True) if e.record.run_id in wanted]
                return trusted.examine(cat.records(chosen))
            return cls.chosen(root, facts, read, trusted, checked, refused())
        finally:
            helper.close()

    @classmethod
    def chosen(cls, root: Path, facts: list[Examined[preselect.Facts]], read: Callable[[set[str]], list[Examined]],
               trust: trust_state.Trusted | None = None, checked: HistoryReport | None = None,
               refused: dict[str, Issue] | None = None) -> Tree:
        """A tree over the records the verdicts of every lesson under lessons/ can depend on
        (``judge.preselect.needed``), chosen from every record's ``facts`` (examined, their standing judged) and
        read in full by ``read`` (run ids → their examined records, in the order of ``facts``); every record when
        a lesson does not load. A plausibility signal another runner key's record may settle has those records
        read too (``preselect.agreeing``), until none is left."""
        fronts = _every_front(root)
        wanted = {e.record.run_id for e in facts} if fronts is None else preselect.needed(facts, fronts)
        while True:
            tree = cls.of(root, read(wanted), trust, checked, refused)
            more = preselect.agreeing(preselect.flagged_unsettled(tree.records, tree.signals()), facts) - wanted
            if not more:
                return tree
            wanted |= more

    def choose(self) -> Tree:
        """This tree over only the records the lessons' verdicts can depend on (:meth:`chosen`): its verdicts are
        the ones over every record, judged from a handful."""
        # Examined(...) rather than dataclasses.replace, 3x slower at 100,000 records
        facts = [Examined(preselect.facts_of(e.record), e.seal, e.verification, e.policy, e.first)
                 for e in self.records]
        by_id = [(e.record.run_id, e) for e in self.records]
        return Tree.chosen(self.root, facts, lambda wanted: [e for i, e in by_id if i in wanted], self.trust,
                           self._history, self._refused)

    @classmethod
    def of(cls, root: Path, examined: Iterable[Examined], trust: trust_state.Trusted | None = None,
           checked: HistoryReport | None = None, refused: dict[str, Issue] | None = None) -> Tree:
        """A tree over records already loaded and examined (under ``trust``, with the history check
        ``checked`` and the refused inputs ``refused`` when the caller already has them)."""
        kinds = tuple(preselect.EVIDENCE_KINDS.values())
        return cls(Path(root), [e for e in examined if isinstance(e.record, kinds)], trust=trust, _history=checked,
                   _refused=refused)

    def table(self) -> dict[str, gate.Bound]:
        if self._table is None:
            self._table = load_bounds(self.root)
        return self._table

    def table_versions(self) -> dict[str, bytes] | NoHistory:
        """Every committed version of the tolerance table (``runner.git_history.versions``), read once."""
        if self._versions is None:
            self._versions = git_history.versions(self.root, tolerances.TABLE_FILE.as_posix())
        return self._versions

    def history(self) -> HistoryReport:
        """The git-history check of the tree (``runner.git_history.check_repository``), read once."""
        if self._history is None:
            self._history = git_history.check_repository(self.root)
        return self._history

    def decide(self, lesson: lessons.Lesson | LessonFront, cited: lessons.Cited | None = None) -> gate.Decision:
        """The one publish decision for ``lesson``, with every input gathered here: from the newest
        evidence, or (``cited``) from the records a published lesson cites; the cuda-tile releases it was
        verified on the same way (``release_matrix.verified`` / ``cited_verified``)."""
        front, runs, others, today = self._inputs(lesson)
        read, signals = evidence_reader(self.root), self.signals()
        if cited is not None:
            decision = gate.decide_cited(front, cited, runs + others, today, self.table(), read, signals)
            stated = release_matrix.cited_verified(front, runs, today, self.table(), read)
        else:
            decision = gate.decide(front, runs + others, today, self.table(), read, signals)
            stated = release_matrix.verified(front, runs, today, self.table(), read)
        return gate.with_verified(decision, stated, runs + others, signals, front)

    def releases(self, lesson: lessons.Lesson | LessonFront) -> release_matrix.LessonReleases:
        """The lesson's Python programs x the cuda-tile releases their run records were made with."""
        front, runs, _others, today = self._inputs(lesson)
        return release_matrix.lesson_releases(front, runs, today, self.table(), evidence_reader(self.root))

    def _inputs(self, lesson: lessons.Lesson | LessonFront) -> tuple[LessonFront, list, list, gate.Today]:
        """The lesson's front matter, its programs' run records, the other records and today's inputs."""
        front = lesson.front if isinstance(lesson, lessons.Lesson) else lesson
        programs = {row.program for row in front.results}
        runs = [e for e in store.of_kind(self.records, RunRecord) if e.record.program in programs]
        compiles = [e.record for e in store.of_kind(self.records, CompileRecord)] if front.res_usage else []
        claims = claims_today(self.root, front.id)
        paths = programs | {s.path for e in runs for s in e.record.sources}
        paths |= {p for ps in claims.snippets.values() for p in ps}
        paths |= {s.path for r in compiles for s in r.sources}  # the compile-derived table's inputs
        others = [e for e in self.records if not isinstance(e.record, RunRecord)]
        digests = today_digests(self.root, sorted(paths))
        older = tables_at(self.root, [*(e.record for e in runs), *compiles], digests, self.table_versions)
        used = program_uses(self.root, [front.res_usage.program] if front.res_usage else [], self.table(),
                            {n for t in older.values() for n in t})
        today = gate.Today(digests, claims, older, used, releases.lock_key(lock.cuda_tile_pin(self.root)))
        return front, runs, others, today

    def verdict(self, lesson: lessons.Lesson) -> LessonVerdict:
        """The lesson's one verdict: the decision on the newest evidence, for a published lesson also the
        decision on the records it cites and their re-derivation, the tree's history check, the trust
        root's findings and the refused inputs."""
        fresh = self.decide(lesson)
        cited = self.decide(lesson, lessons.cited(lesson)) if lesson.front.status == "published" else None
        distrust = tuple(self.trust.state.findings) if self.trust is not None else ()
        refused = tuple(Finding(file, rule, reason) for file, (rule, reason) in sorted(self.refused().items()))
        return verdict.judge(lesson, fresh, cited, self.history(), distrust, refused)

