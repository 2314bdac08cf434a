"""The audit in three phases: read runs/, evidence/ and lessons/ once, check every rule, decide every lesson.

``audit(root)`` reads through the tree's catalog (``catalog.Catalog``): each record checked
(``gather.audit_read``: read and validated, or taken from its verified entry while its bytes are
those), every evidence file hashed by the byte pass (in a second process when that pays off); then it
applies the rules of
``judge.audit.rules`` (per-record checks through the registry, file-level rules
here) and asks the one publish decision (``gather.tree.Tree.decide``) for every
lesson, from the records as examined here: a record whose seal is broken never
counts, exactly as for ``status`` and ``publish``. It writes nothing.

It also reads git history once (the catalog's, ``catalog.history``): each record or
transcript once committed and now missing or changed is a finding
(``judge.audit.rules.history``); a tree without history is reported as not
checked (``AuditResult.history``), never as passed. The trust root and the
registry's history (``gather.trust_state``: signed registry changes, revocations,
each record's standing by the commit that first added it) give their findings and the
report's trust section (``AuditResult.trust``). Each lesson's findings are its one
verdict's (``Tree.verdict``, which ``status`` and ``publish`` print too): a published
lesson is judged on, and re-derived from, the records it cites.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pydantic import ValidationError

from tileproof.catalog import ByteFacts, Catalog
from tileproof.claims import spec as claims_spec
from tileproof.gather import audit_read, audit_since, trust_state
from tileproof.gather import inputs as gather_inputs
from tileproof.gather.audit_claims import claims_files_today
from tileproof.gather.audit_scan import paused_gc
from tileproof.gather.tree import Tree, smi_clocks
from tileproof.judge import plausibility, preselect, releases
from tileproof.judge.audit import audit_rules, rules
from tileproof.judge.audit.result import AuditResult, Issue, LessonAudit, RunTable
from tileproof.judge.audit.rules import commits, evidence, files, inputs, reviewer, sessions
from tileproof.judge.audit.rules import lessons as lesson_rules
from tileproof.judge.audit.rules import plausibility as plausibility_rules
from tileproof.judge.audit.rules.verdicts import report_transcript_issues
from tileproof.records import lessons, lock, store
from tileproof.records.errors import InputRefused, RecordError, TileproofError
from tileproof.records.findings import Finding
from tileproof.records.history_check import REGENERATED, GitHistory, HistoryReport, NoHistory
from tileproof.records.history_check import check as check_history
from tileproof.records.models import LessonFront, PlausibilityNote, RunRecord, SessionRecord
from tileproof.records.store import Examined
from tileproof.records.trust import runner_keys
from tileproof.records.trust.runner_keys import UNSIGNED
from tileproof.records.trust.trust_pin import PIN
from tileproof.runner import git_history

RULES = rules.load()
LESSONS = "lessons"
REPORT_MD = next(PurePosixPath(p).name for p in sorted(REGENERATED) if p.endswith(".md"))
REPORT_HTML = next(PurePosixPath(p).name for p in sorted(REGENERATED) if p.endswith(".html"))
COMMITTED_REPORTS = (f"{store.EVIDENCE}/{REPORT_MD}", f"{store.EVIDENCE}/{REPORT_HTML}")
"""The committed reports (rewritten only by ``audit --update-committed-report``): never orphans and
exempt from the history check, both from one list, ``records.history_check.REGENERATED``."""
KEEP_FILES = frozenset({".gitkeep"})
"""Names in evidence/ that are never orphans."""

def audit(root: Path, outputs: Iterable[Path] = (), trust_root: str | None = None,
          expect_ancestor: str | None = None, since: str | None = None, strict: bool = False) -> AuditResult:
    """Read runs/, evidence/ and lessons/ under ``root`` and apply every rule.

    ``outputs``: report files being written (skipped by the orphan rule). ``trust_root`` and
    ``expect_ancestor``: what the reviewer pins (``gather.trust_state``; ``--trust-root``,
    ``--expect-ancestor``). ``since``: audit only what changed since that commit, and the lessons it
    touches (``gather.audit_since``; ``--since``): its full id, or ``file:PATH`` holding one
    (``gather.given_commit``); not an ancestor of HEAD, the whole tree is audited and that is a finding, as is
    an audit that judged no record and no lesson. ``strict``: every notice (``judge.audit.rules.reviewer``:
    what rests on a committer's word) is a finding too (``--strict``, the reviewer's mode).

    Three phases with data between them: read (:func:`_read`: the catalog's facts, every record validated and its
    per-record rules applied as it is read, the byte pass, the history), check (:func:`_check`: the file-level
    rules over what was read, each returning its findings) and decide (:func:`_decide`: each lesson's one verdict,
    the plausibility, trust and history findings). The cyclic garbage collector is paused meanwhile (many records
    kept alive make each of its passes long).
    """
    root = Path(root)
    with paused_gc():
        listing = store.runs_listing(root)  # one listing of runs/ for every reader of this audit
        with Catalog.open(root, runner_keys.load_registry(root)) as cat:
            reach = audit_since.reach(cat, since, listing)
            result = _phases(cat, listing, reach, Pins(trust_root, expect_ancestor), outputs)
            if reach.scope is None:  # a whole-tree audit, once what the phases kept of each record is freed
                cat.summarise()
        result.scope = reach.widened or result.scope
        result.findings = sorted(result.findings + reach.findings(len(result.lessons)))
        if strict:
            result.findings = sorted(result.findings + result.notices)
        result.strict = strict
        return result


def _phases(cat: Catalog, listing: store.RunsListing, reach: audit_since.Reach, pins: Pins,
            outputs: Iterable[Path]) -> AuditResult:
    """Read, check, decide: the data between the phases is freed when this returns."""
    read = _read(cat, listing, reach, pins)
    checked = _check(cat, read, listing, reach.names(listing.files), outputs)
    return _decide(cat, read, checked, reach)


@dataclass(frozen=True)
class Pins:
    """What the reviewer pins (``--trust-root``, ``--expect-ancestor``)."""

    trust_root: str | None = None
    expect_ancestor: str | None = None


@dataclass
class Read:
    """The read phase's data: every record kept (``audit_read.Kept``, sorted by creation), the evidence paths of
    those that did not validate, the per-record findings, the report's table, the byte pass's facts
    (``catalog.ByteFacts``), the history read and the trust state judged from it."""

    kept: list[audit_read.Kept]
    raw_refs: set[str]
    findings: list[Finding]
    table: RunTable
    bytes: ByteFacts
    history: GitHistory | NoHistory
    trusting: trust_state.Trusted

    @property
    def refused(self) -> dict[str, Issue]:
        """The evidence the byte pass refused, by path."""
        return self.bytes[3]


def _read(cat: Catalog, listing: store.RunsListing, reach: audit_since.Reach, pins: Pins) -> Read:
    """The read phase: the byte pass in the runner's forked helper (forked first, before any thread starts, unless
    the history read begun for ``--since`` must end first), git's history, and every record in scope validated here
    meanwhile, its per-record rules applied as it is read (what is kept of it is not the whole record)."""
    names = reach.names(listing.files)
    history = reach.history
    if history is not None and len(names) >= Catalog.parallel_min():
        done = history()  # its threads ended before the byte helper is forked
        history = lambda: done  # noqa: E731
    helper = cat.background(len(names))
    try:
        bytes_done = cat.evidence(helper, names, reach.folders())
        history = history or cat.history()  # started after the fork: git reads while the records are validated
        kept, raw_refs, findings, table = _validated(cat, names, listing, reach.scope is not None)
        history_read = history()
        trusting = trust_state.load(cat.root, pins.trust_root, pins.expect_ancestor, history_read, cat.registry)
        kept.sort(key=lambda r: (r.facts.created, r.facts.run_id))
        findings += sessions.session_findings((r.session for r in kept if r.session is not None),
                                              ((r.name, r.record) for r in kept if isinstance(r.record, SessionRecord)))
        found = bytes_done()
    finally:
        helper.close()
    if reach.scope is not None:
        _outside_folders(cat, {r.name: r.refs for r in kept}, found[1], found[3])
    return Read(kept, raw_refs, findings, table, found, history_read, trusting)


def _validated(cat: Catalog, names: list[str], listing: store.RunsListing, few: bool
               ) -> tuple[list[audit_read.Kept], set[str], list[Finding], RunTable]:
    """Every record of ``names`` validated (``audit_read.validate``), then the rules of the kinds kept in full, which
    may ask which run ids validated: (kept, evidence paths of the records that did not validate, findings, the
    report's table)."""
    transcripts = audit_read.Transcripts(cat.root)
    ctx = audit_rules.Context(audit_read.NotYetKnown(), transcripts.query_rows, transcripts.freeze)
    checking = audit_read.Checking(cat.root, cat.registry, ctx, transcripts, RunTable())
    kept, raw_refs, findings = audit_read.validate(checking, names, cat.audited(few))
    ctx.known = {r.facts.run_id for r in kept}
    if few:  # records outside the scope are there, unchanged since REV (the history check says)
        ctx.known |= {n[:-5] for n in listing.files}
    for read in kept:  # the kinds kept in full, now that every record was read
        if read.record is not None and not isinstance(read.record, RunRecord):
            findings += audit_read.found_in(f"{store.RUNS}/{read.name}", audit_rules.run_checks(read.record, ctx))
    return kept, raw_refs, findings, checking.table


@dataclass
class Checked:
    """The check phase's data: its findings, each record examined (seal, signature, standing), the record files
    flagged, the evidence counted (files, bytes), every input refused by what it is (evidence/'s and lessons/')
    and how many record files were audited."""

    findings: list[Finding]
    examined: list[Examined[preselect.Facts]]
    flagged: set[str]
    evidence: tuple[int, int]
    refused: dict[str, Issue]
    record_files: int


def _check(cat: Catalog, read: Read, listing: store.RunsListing, names: list[str], outputs: Iterable[Path]
           ) -> Checked:
    """The check phase: the file-level rules over what was read (refused inputs, strays, each record's seal,
    signature and evidence, orphans, lessons' inputs, claims files), each giving its findings; what was learned of
    each record kept in the catalog for the next reader."""
    root = cat.root
    _seals, disk, _diffs, refused, _notes = read.bytes
    findings = [Finding(rel, rule_id, reason) for rel, (rule_id, reason) in refused.items()]
    findings += [Finding(f"{store.RUNS}/{name}", *inputs.stray_issue(name)) for name in listing.strays]
    examined: list[Examined[preselect.Facts]] = []
    flagged: set[str] = set()
    to_keep: list = []
    for kept in read.kept:
        item, plain, found = _record_checked(cat, read, kept, flagged)
        to_keep.append((kept.sha256, item[0], plain))  # what status, publish and --since read next time
        examined.append(item[1])
        findings += found
    cat.keep(to_keep)
    shown = {row.name for row in read.table.rows.values()}  # the report's newest of each place, read again in full
    newest = {kept.name: kept for kept in read.kept if kept.name in shown}
    read.table.resolve(lambda name: audit_read.again(root, newest[name], cat.registry))
    refs_of = {r.name: r.refs for r in read.kept}
    counted, orphans = _orphans(root, listing.files, disk, (refs_of, read.raw_refs), outputs)
    lesson_refused = gather_inputs.lesson_inputs(root)
    findings += orphans + [Finding(rel, rule_id, reason) for rel, (rule_id, reason) in lesson_refused.items()]
    findings += _claims_files(root)
    return Checked(findings, examined, flagged, counted, refused | lesson_refused, len(names))


def _record_checked(cat: Catalog, read: Read, kept: audit_read.Kept, flagged: set[str]
                    ) -> tuple[tuple[Examined, Examined[preselect.Facts]], bool, list[Finding]]:
    """One record's file-level rules: its seal (against the byte pass's, from its raw JSON), its signature and
    standing (``gather.trust_state``, as status and publish see them), its check report and its evidence; its name
    to ``flagged`` when one of them fails. Returns (what was checked once, examined under the trust state), whether
    it is plain (no envelope), and its findings."""
    seals, disk, diffs, refused, _notes = read.bytes
    name, file = kept.name, f"{store.RUNS}/{kept.name}"
    findings: list[Finding] = []
    digest = seals.get(name)
    if digest != kept.seal:
        flagged.add(name)
        rec = audit_read.again(cat.root, kept, cat.registry)
        digest = store.seal_of(rec)
        findings += [Finding(file, rule_id, reason) for rule_id, reason in files.seal_issues(rec, seals.get(name) or "",
                                                                                             digest)]
    checked_once = Examined(kept.facts, store.seal_status(kept, digest), kept.verification or UNSIGNED)
    item, = read.trusting.examine([checked_once])
    findings += audit_read.found_in(file, read.trusting.issues(item))
    if kept.report is not None:
        findings += audit_read.found_in(file, report_transcript_issues(*kept.report, diffs.get(name)))
    for where, t in kept.refs:
        got = disk.get(t.path)
        if got is not None and got[1] == t.sha256 and got[0] == t.bytes:
            continue  # the common case; disk holds only normalised paths under evidence/
        if t.path in refused:  # a link or special file: already its own finding, never accepted
            flagged.add(name)
            continue
        issues = list(evidence.evidence_issues(f"{file} {where}", t, got))
        if issues:
            flagged.add(name)
        # Missing and digest findings name the evidence file; the reason names the record.
        findings += [Finding(t.path if rule_id != evidence.PATH else file, rule_id, reason)
                     for rule_id, reason in issues]
    return (checked_once, item), kept.verification is None, findings


def _decide(cat: Catalog, read: Read, checked: Checked, reach: audit_since.Reach) -> AuditResult:
    """The decide phase: each lesson's one verdict (``Tree.verdict``, from the records its verdicts can depend on),
    the plausibility signals no lesson explains, the trust root's and the history check's findings, the commits
    records name; with the read and check phases' findings, the result."""
    root, kept = cat.root, read.kept
    history = check_history(read.history)
    tree, seen, signals = _tree(cat, read, checked, reach, history)
    findings = read.findings + checked.findings
    untouched: list = []  # the plausibility notes of the lessons --since does not re-judge still explain
    lesson_audits, found = _lessons(root, tree, {f.file for f in findings}, reach.touches([r.record for r in kept]),
                                    untouched)
    findings += found
    names = {r.facts.run_id: r.name for r in kept}
    doubts, notices = _plausibility(seen, signals, names, lesson_audits, untouched)
    notices += [Finding(PIN.as_posix(), rule_id, reason)
                for rule_id, reason in reviewer.pin_issues(read.trusting.state.report.pin_moves, read.trusting.root)]
    findings += [*doubts, *read.trusting.state.findings, *history.findings]
    if history.status == "checked":
        findings += _commit_claims(root, kept)
    findings.sort()
    runs = f"{store.RUNS}/"
    flagged = checked.flagged | {f.file[len(runs):] for f in findings if f.file.startswith(runs)}
    scope = reach.scope
    return AuditResult(root=root, findings=findings,
                       records=[r.record for r in kept if r.record is not None and not isinstance(r.record, RunRecord)],
                       lessons=lesson_audits, evidence_files=checked.evidence[0], evidence_bytes=checked.evidence[1],
                       record_files=checked.record_files,
                       bad_records={n[:-5] for n in flagged}, history=history,
                       claims_files=claims_files_today(root), trust=read.trusting.state.report,
                       cuda_tile_lock=releases.lock_key(lock.cuda_tile_pin(root)),
                       index_notes=tuple(dict.fromkeys((*read.bytes[4], *cat.notes()))),
                       scope=None if scope is None else scope.line(len(lesson_audits)), runs=read.table,
                       validated=len(kept), notices=sorted(notices),
                       unisolated=tuple(r.facts.run_id for r in kept if r.unisolated))


def _tree(cat: Catalog, read: Read, checked: Checked, reach: audit_since.Reach, history: HistoryReport
          ) -> tuple[Tree, list[Examined], dict[str, tuple[plausibility.Signal, ...]]]:
    """The tree the lessons are judged on, the records whose signals are judged (or what they were seen as) and
    their signals. A whole-tree audit: the verdicts from the records they can depend on, read again in full; the
    signals of every record, from what each was seen as. ``--since``: every record counts for the lessons
    re-judged, the rest chosen by their facts, through the catalog."""
    root, kinds = cat.root, set(preselect.EVIDENCE_KINDS)
    refused = checked.refused
    if reach.scope is None:
        evidence_items = [(r, item) for r, item in zip(read.kept, checked.examined, strict=True)
                          if r.facts.kind in kinds]

        def again(wanted: set[str]) -> list[Examined]:
            return [Examined(audit_read.again(root, r, cat.registry), item.seal, item.verification, item.policy,
                             item.first) for r, item in evidence_items if r.facts.run_id in wanted]
        tree = Tree.chosen(root, [item for _r, item in evidence_items], again, read.trusting, history, refused)
        seen = [Examined(r.seen, item.seal, item.verification, item.policy, item.first) for r, item in evidence_items]
        return tree, seen, plausibility.signals(seen, smi_clocks(root, (s.record.smi for s in seen)),
                                                lock.wheel_hashes(root))
    assert reach.facts is not None
    full = [Examined(r.record, item.seal, item.verification, item.policy, item.first)
            for r, item in zip(read.kept, checked.examined, strict=True)]
    tree = _since_tree(cat, full, reach.facts, read.trusting, history, refused)
    return tree, tree.records, tree.signals()


def _since_tree(cat: Catalog, examined: list, facts_read: list[tuple[str, Examined[preselect.Facts]]],
                trusting: trust_state.Trusted, checked, refused: dict[str, Issue]) -> Tree:
    """``audit --since``: a tree of the records in scope (``examined``, read in full here) and, of every other
    record, those the lessons' verdicts can depend on (``Tree.chosen``: chosen by their facts, ``facts_read``
    through the catalog, then read in full). The records in scope are always in it (their signals
    are judged)."""
    mine = {e.record.run_id for e in examined}
    found = [(name, e) for name, e in facts_read if e.record.run_id not in mine]
    rest = trusting.examine(e for _name, e in found)
    facts = [dataclasses.replace(e, record=preselect.facts_of(e.record)) for e in examined] + rest
    names = [name for name, _e in found]

    def read(wanted: set[str]) -> list:
        chosen = [name for name, e in zip(names, rest, strict=True) if e.record.run_id in wanted]
        return examined + trusting.examine(cat.records(chosen))
    return Tree.chosen(cat.root, facts, read, trusting, checked, refused)


def _outside_folders(cat: Catalog, refs_of, disk: MutableMapping[str, tuple[int, str]],
                     refused: dict[str, Issue]) -> None:
    """``audit --since``: the transcripts in-scope records reference outside the folders the byte pass read,
    hashed here into ``disk`` (streamed), or ``refused``; a missing one is left to the evidence rules."""
    for refs in refs_of.values():
        for _where, t in refs:
            if t.path in disk or t.path in refused or not evidence.evidence_path_ok(t.path):
                continue
            try:
                disk[t.path] = cat.unindexed_digest(t.path)  # no stat from a walk vouches for these: read every one
            except InputRefused as e:
                if e.kind != "missing":
                    refused[t.path] = inputs.refused_issue(e)


def _plausibility(items: list[Examined], flagged: dict[str, tuple[plausibility.Signal, ...]], names: dict[str, str],
                  lesson_audits: list[LessonAudit], more_notes: Iterable[tuple[str, PlausibilityNote]] = ()
                  ) -> tuple[list[Finding], list[Finding]]:
    """Each audited record's (``names``: run id → file name) plausibility signals (``flagged``, over ``items``: the
    records, or what they were seen as) that no lesson explains and no second runner key settles
    (``judge.audit.rules.plausibility``): findings; those a lesson's note alone settles
    (``judge.audit.rules.reviewer``): notices. ``more_notes``: (lesson file, note) of the lessons not judged here."""
    located = [(la.file, n) for la in lesson_audits for n in la.notes] + list(more_notes)
    notes = [n for _file, n in located]
    findings: list[Finding] = []
    notices: list[Finding] = []
    for item in items:
        if item.record.run_id in flagged and item.record.run_id in names:  # names: the records audited
            file = f"{store.RUNS}/{names[item.record.run_id]}"
            findings += audit_read.found_in(file, plausibility_rules.plausibility_issues(item, items, flagged, notes))
            notices += audit_read.found_in(file, reviewer.explained_issues(item, items, flagged, located))
    return findings, notices


def _commit_claims(root: Path, kept: list[audit_read.Kept]) -> list[Finding]:
    """Each record's ``git.commit`` checked against history (``judge.audit.rules.commits``)."""
    found = git_history.at_commits(root, *commits.wanted(read.claim for read in kept))
    if isinstance(found, NoHistory):
        return []
    return [f for read in kept for f in audit_read.found_in(f"{store.RUNS}/{read.name}",
                                                             commits.commit_issues(read.claim, found))]


def _orphans(root: Path, names: list[str], disk: MutableMapping[str, tuple[int, str]],
             refs: tuple[dict[str, list], set[str]], outputs: Iterable[Path]) -> tuple[tuple[int, int], list[Finding]]:
    """The evidence files counted (files, bytes; reports being written and keep files aside), and the orphans'
    findings. ``refs``: the references of each record kept, and the evidence paths of those that did not
    validate."""
    refs_of, raw_refs = refs
    referenced = {t.path for refs in refs_of.values() for _, t in refs} | raw_refs
    skip = set(COMMITTED_REPORTS) | {store.rel(root, Path(p)) for p in outputs}
    count = size_sum = 0
    orphans: list[str] = []
    for rel, (size, _sha) in disk.items():
        if rel in skip or rel.rsplit("/", 1)[-1] in KEEP_FILES:
            continue
        count += 1
        size_sum += size
        if rel not in referenced:
            orphans.append(rel)
    found = [Finding(file, rule_id, reason)
             for rule_id, file, reason in evidence.orphan_issues(orphans, referenced, {n[:-5] for n in names})]
    return (count, size_sum), found


def lesson_files(root: Path) -> list[Path]:
    folder = root / LESSONS
    return sorted(folder.glob("*.md")) if folder.is_dir() else []


def _claims_files(root: Path) -> list[Finding]:
    """Every claims file under lessons/claims/, loaded: a refused one is its ``input-*`` finding,
    one that does not parse or validate is ``claims-file``."""
    found: list[Finding] = []
    for path in claims_spec.claims_files(root):
        shown = store.rel(root, path)
        if not stat.S_ISREG(os.lstat(path).st_mode):
            continue  # not a regular file: the lessons' inputs report it (gather.inputs.lesson_inputs)
        try:
            claims_spec.load_file(path, shown)
        except InputRefused as e:
            found.append(Finding(shown, *inputs.refused_issue(e)))
        except RecordError as e:
            found.append(Finding(shown, inputs.CLAIMS, inputs.reason_of(e)))
    return found


def _lessons(root: Path, tree: Tree, reported: set[str], touched: Callable[[LessonFront], bool] | None = None,
             untouched_notes: list | None = None) -> tuple[list[LessonAudit], list[Finding]]:
    """Each lesson's audit and findings; ``reported``: the files findings name already; ``touched``: which lessons
    to judge (``audit --since``), default all; the plausibility notes of the others go to ``untouched_notes``, as
    (lesson file, note)."""
    out: list[LessonAudit] = []
    findings: list[Finding] = []
    for path in lesson_files(root):
        file = f"{LESSONS}/{path.name}"
        if not stat.S_ISREG(os.lstat(path).st_mode) and file in reported:
            continue  # a link or special file: the lessons' inputs reported it
        front = _front(path, file, findings)
        if front is None:
            continue
        if touched is not None and not touched(front.front):
            if untouched_notes is not None:
                untouched_notes += [(file, n) for n in front.front.plausibility]
            continue
        judged = _judged(tree, front, file, reported, findings)
        if judged is not None:
            out.append(judged)
    return out, findings


def _front(path: Path, file: str, findings: list[Finding]) -> lessons.Lesson | None:
    """The lesson at ``path``, or None with its finding (refused, or its front matter does not load)."""
    try:
        return lessons.load_path(path)
    except InputRefused as e:
        findings.append(Finding(file, *inputs.refused_issue(e)))
    except (RecordError, ValidationError, ValueError) as e:
        findings.append(Finding(file, lesson_rules.FRONT, str(e).splitlines()[0]))
    return None


def _judged(tree: Tree, lesson: lessons.Lesson, file: str, reported: set[str], findings: list[Finding]
            ) -> LessonAudit | None:
    """The lesson's audit from its one verdict, its findings to ``findings``; None when its decision cannot be made
    (an input it needs is refused or broken: that file's finding says why; a published lesson that cannot be
    decided is a finding too)."""
    front = lesson.front
    try:
        judged = tree.verdict(lesson)
    except TileproofError as e:
        if front.status == "published" or getattr(e, "path", None) not in reported:
            findings.append(Finding(file, inputs.UNDECIDED,
                                    f"{front.status}, but its publish decision cannot be made: {e}"))
        return None
    findings += audit_read.found_in(file, judged.findings())
    return LessonAudit(id=front.id, file=file, title=front.title, status=front.status,
                       programs=[p.path for p in front.programs], decision=judged.decision,
                       releases=tree.releases(front), notes=tuple(front.plausibility))
