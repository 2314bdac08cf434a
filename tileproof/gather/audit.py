"""The audit's orchestration: read runs/, evidence/ and lessons/ once, apply every rule, decide every lesson.

``audit(root)`` checks each record (``gather.audit_read``: read and validated, or taken
from its verified entry while its bytes are those), lets ``audit_scan`` hash every evidence
file (in a second process when that pays off), applies the rules of
``judge.audit.rules`` (per-record checks through the registry, file-level rules
here) and asks the one publish decision (``gather.tree.Tree.decide``) for every
lesson, from the records as examined here: a record whose seal is broken never
counts, exactly as for ``status`` and ``publish``. It writes nothing.

It also reads git history once (``runner.git_history.read``): each record or
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

import contextlib
import dataclasses
import os
import stat
from collections.abc import Callable, Iterable, MutableMapping
from pathlib import Path, PurePosixPath

from pydantic import ValidationError

from tileproof.claims import spec as claims_spec
from tileproof.gather import audit_read, audit_scan, audit_since, indexed, trust_state
from tileproof.gather import inputs as gather_inputs
from tileproof.gather.audit_claims import claims_files_today
from tileproof.gather.audit_scan import helper as byte_helper
from tileproof.gather.audit_scan import paused_gc
from tileproof.gather.tree import Tree, smi_clocks
from tileproof.judge import plausibility, preselect, releases
from tileproof.judge.audit import audit_rules, rules
from tileproof.judge.audit.result import AuditResult, Issue, LessonAudit, RunTable
from tileproof.judge.audit.rules import commits, evidence, files, inputs, reviewer, sessions
from tileproof.judge.audit.rules import lessons as lesson_rules
from tileproof.judge.audit.rules import plausibility as plausibility_rules
from tileproof.judge.audit.rules.verdicts import report_transcript_issues
from tileproof.records import file_index, lessons, lock, store
from tileproof.records.errors import InputRefused, RecordError, TileproofError, encodable
from tileproof.records.findings import Finding
from tileproof.records.history_check import REGENERATED, GitHistory, NoHistory
from tileproof.records.history_check import check as check_history
from tileproof.records.models import LessonFront, PlausibilityNote, RunRecord, SessionRecord
from tileproof.records.store import Examined
from tileproof.records.trust import runner_keys
from tileproof.records.trust.runner_keys import UNSIGNED, RunnerRegistry
from tileproof.records.trust.trust_pin import PIN
from tileproof.runner import git_history
from tileproof.runner.forked import ForkedHelper

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
    The cyclic garbage collector is paused meanwhile: 10,000 records kept alive
    make each of its passes longer, which tripled the audit's time.
    """
    with paused_gc():
        listing = store.runs_listing(Path(root))  # one listing of runs/ for every reader of this audit
        names = listing.files
        runners, facts, scope, history = runner_keys.load_registry(Path(root)), None, None, None
        if since is not None:  # git finds what changed since REV, and reads the history, while every record's
            since_id = audit_since.since_commit(Path(root), since)  # facts are read (_since_tree)
            checked = git_history.stat_check(Path(root))  # one stat check for both
            scoped = audit_since.begin(Path(root), since_id, names, checked, shown=since)
            history = git_history.start(Path(root), checked)
            facts = indexed.read_facts(Path(root), runners, listing)
            scope = scoped()
        widened, asked = None, scope
        if scope is not None and not scope.ancestor:  # fail closed: the whole tree, and a finding (below)
            widened = (f"since {scope.rev} ({scope.commit[:12]}): not an ancestor of HEAD: the whole tree audited")
            scope = None
        elif scope is not None and scope.loose_evidence:  # fail closed: the whole tree (gather.audit_since)
            loose = encodable(scope.loose_evidence[0])
            widened = (f"since {scope.rev} ({scope.commit[:12]}): {loose} changed, directly under {store.EVIDENCE}/ "
                       "(any record may reference it): the whole tree audited")
            scope = None
        jobs = len(names) if scope is None else len(scope.names)
        if history is not None and jobs >= audit_scan.PARALLEL_MIN_RECORDS:
            read = history()  # its threads ended before the byte helper is forked
            history = lambda: read  # noqa: E731
        helper = byte_helper(jobs)
        try:
            result = _audit(Path(root), listing, outputs, helper, trust_root, expect_ancestor, scope, runners, facts,
                            history)
        finally:
            helper.close()
        if scope is None:  # a whole-tree audit, once what it kept of each record is freed
            _summarise(Path(root), runners)
        if widened is not None:
            result.scope = widened
        if asked is not None:
            _since_findings(asked, scope, result)
        if strict:
            result.findings = sorted(result.findings + result.notices)
        result.strict = strict
        return result


def _since_findings(asked: audit_since.Scope, scope: audit_since.Scope | None, result: AuditResult) -> None:
    """``--since REV``: not an ancestor of HEAD (the whole tree was audited), or nothing judged: each a finding."""
    found: list[Issue] = []
    if not asked.ancestor:
        found.append(reviewer.since_not_ancestor(asked.rev, asked.commit, asked.head))
    elif scope is not None and not scope.names and not result.lessons:
        found.append(reviewer.since_nothing(asked.rev, asked.commit, asked.at_head))
    result.findings = sorted(result.findings + [Finding("HEAD", rule_id, reason) for rule_id, reason in found])


def _audit(root: Path, listing: store.RunsListing, outputs: Iterable[Path], helper: ForkedHelper,
           trust_root: str | None, expect_ancestor: str | None, scope: audit_since.Scope | None,
           runners: RunnerRegistry, facts: list[tuple[str, Examined[preselect.Facts]]] | None,
           history: Callable[[], GitHistory | NoHistory] | None) -> AuditResult:
    """The audit under the registry ``runners`` (read once, before anything examined under it) of the records of
    ``listing`` (``store.runs_listing``: every record file, and the strays of runs/); ``facts``: every
    record's, for ``audit --since`` (read while git found its scope); ``history``: the history read begun
    (``git_history.start``), when the caller began it."""
    findings: list[Finding] = []
    add = findings.append
    flagged: set[str] = set()
    every_name = listing.files
    names = every_name if scope is None else list(scope.names)
    bytes_done = helper.submit(audit_scan.byte_pass, str(root), names, None if scope is None else scope.folders)
    if history is None:  # started after the fork: git reads the history while the records are validated
        history = git_history.start(root)
    transcripts = audit_read.Transcripts(root)
    ctx = audit_rules.Context(audit_read.NotYetKnown(), transcripts.query_rows, transcripts.freeze)
    table = RunTable()
    kept, raw_refs = audit_read.validate(root, names, add, runners, ctx, transcripts, table, few=scope is not None)
    ctx.known = {r.facts.run_id for r in kept}
    if scope is not None:  # records outside the scope are there, unchanged since REV (the history check says)
        ctx.known |= {n[:-5] for n in every_name}
    for read in kept:  # the kinds kept in full, now that every record was read
        if read.record is not None and not isinstance(read.record, RunRecord):
            audit_read.add_all(add, f"{store.RUNS}/{read.name}", audit_rules.run_checks(read.record, ctx))
    history_read = history()
    trusting = trust_state.load(root, trust_root, expect_ancestor, history_read, runners)
    index, scope_key = git_history.opened_index(root), indexed.registry_scope(runners)
    to_keep: list = []
    kept.sort(key=lambda r: (r.facts.created, r.facts.run_id))
    findings += sessions.session_findings((r.session for r in kept if r.session is not None),
                                          ((r.name, r.record) for r in kept if isinstance(r.record, SessionRecord)))

    seals, disk, diffs, refused, index_notes = bytes_done()
    refs_of = {r.name: r.refs for r in kept}
    if scope is not None:
        _outside_folders(root, refs_of, disk, refused)
    findings += [Finding(rel, rule_id, reason) for rel, (rule_id, reason) in refused.items()]
    findings += [Finding(f"{store.RUNS}/{name}", *inputs.stray_issue(name)) for name in listing.strays]
    examined: list[Examined[preselect.Facts]] = []
    for read in kept:
        name, file = read.name, f"{store.RUNS}/{read.name}"
        digest = seals.get(name)
        if digest != read.seal:
            flagged.add(name)
            rec = audit_read.again(root, read, runners)
            digest = store.seal_of(rec)
            for rule_id, reason in files.seal_issues(rec, seals.get(name) or "", digest):
                add(Finding(file, rule_id, reason))
        # The seal's verdict on the content (not its bytes), the signature's and the record's standing in
        # history (gather.trust_state, judge.trust.standing), as status and publish see them.
        verification = read.verification or UNSIGNED
        checked_once = Examined(read.facts, store.seal_status(read, digest), verification)
        plain = read.verification is None
        to_keep.append((read.sha256, checked_once, plain))  # what status, publish and --since read next time
        item, = trusting.examine([checked_once])
        audit_read.add_all(add, file, trusting.issues(item))
        examined.append(item)
        if read.report is not None:
            audit_read.add_all(add, file, report_transcript_issues(*read.report, diffs.get(name)))
        for where, t in read.refs:
            got = disk.get(t.path)
            if got is not None and got[1] == t.sha256 and got[0] == t.bytes:
                continue  # the common case; disk holds only normalised paths under evidence/
            if t.path in refused:  # a link or special file: already its own finding, never accepted
                flagged.add(name)
                continue
            for rule_id, reason in evidence.evidence_issues(f"{file} {where}", t, got):
                # Missing and digest findings name the evidence file; the reason names the record.
                add(Finding(t.path if rule_id != evidence.PATH else file, rule_id, reason))
                flagged.add(name)

    indexed.keep_missing(index, scope_key, to_keep)
    index.save()
    shown = {row.name for row in table.rows.values()}  # the report's newest of each place, read again in full
    newest = {read.name: read for read in kept if read.name in shown}
    table.resolve(lambda name: audit_read.again(root, newest[name], runners))
    evidence_files, evidence_bytes = _orphans(root, every_name, disk, refs_of, raw_refs, outputs, add)
    lesson_refused = _lesson_inputs(root, add)
    _claims_files(root, add)
    checked = check_history(history_read)
    kinds = set(preselect.EVIDENCE_KINDS)
    evidence_items = [(read, item) for read, item in zip(kept, examined, strict=True) if read.facts.kind in kinds]
    if scope is None:  # the verdicts from the records they can depend on, read again in full; the signals of every
        def again(wanted: set[str]) -> list[Examined]:  # record, from what each was seen as
            return [Examined(audit_read.again(root, read, runners), item.seal, item.verification, item.policy,
                             item.first) for read, item in evidence_items if read.facts.run_id in wanted]
        tree = Tree.chosen(root, [item for _read, item in evidence_items], again, trusting, checked,
                           refused | lesson_refused)
        seen = [Examined(read.seen, item.seal, item.verification, item.policy, item.first)
                for read, item in evidence_items]
        signals = plausibility.signals(seen, smi_clocks(root, (s.record.smi for s in seen)), lock.wheel_hashes(root))
    else:  # every record counts for the lessons re-judged: the rest chosen by their facts, through the index
        assert facts is not None
        full = [Examined(read.record, item.seal, item.verification, item.policy, item.first)
                for read, item in zip(kept, examined, strict=True)]
        tree = _since_tree(root, full, facts, trusting, checked, refused | lesson_refused)
        seen, signals = tree.records, tree.signals()
    in_scope = [read.record for read in kept]
    untouched: list = []  # the plausibility notes of the lessons --since does not re-judge still explain
    lesson_audits = _lessons(root, tree, findings, None if scope is None else (
        lambda front: scope.touches(front, in_scope)), untouched)
    notices: list[Finding] = []
    _plausibility(seen, signals, {read.facts.run_id: read.name for read in kept}, lesson_audits, add, untouched,
                  notices.append)
    notices += [Finding(PIN.as_posix(), rule_id, reason)
                for rule_id, reason in reviewer.pin_issues(trusting.state.report.pin_moves, trusting.root)]
    findings += trusting.state.findings
    findings += checked.findings
    if checked.status == "checked":
        _commit_claims(root, kept, add)
    findings.sort()
    flagged |= {f.file[len(store.RUNS) + 1:] for f in findings if f.file.startswith(f"{store.RUNS}/")}
    return AuditResult(root=root, findings=findings,
                       records=[r.record for r in kept if r.record is not None and not isinstance(r.record, RunRecord)],
                       lessons=lesson_audits, evidence_files=evidence_files, evidence_bytes=evidence_bytes,
                       record_files=len(names), bad_records={n[:-5] for n in flagged}, history=checked,
                       claims_files=claims_files_today(root), trust=trusting.state.report,
                       cuda_tile_lock=releases.lock_key(lock.cuda_tile_pin(root)),
                       index_notes=tuple(dict.fromkeys((*index_notes, *file_index.open_notes()))),
                       scope=None if scope is None else scope.line(len(lesson_audits)), runs=table,
                       validated=len(kept), notices=sorted(notices),
                       unisolated=tuple(read.facts.run_id for read in kept if read.unisolated))


def _summarise(root: Path, runners: RunnerRegistry) -> None:
    """The index's summary of runs/ made afresh where it is missing (after a code change, or with the index
    deleted), so the next ``status`` or ``audit --since`` takes every record from it: ``indexed.read_facts``, from
    the entries this audit kept. A tree it refuses (a stray under runs/, a record that does not validate: both
    findings here) is left without one: the summary only saves time."""
    if git_history.opened_index(root).has_summary(indexed.FOLDER, indexed.KIND, indexed.registry_scope(runners)):
        return
    with contextlib.suppress(TileproofError):
        indexed.read_facts(root, runners)


def _since_tree(root: Path, examined: list, facts_read: list[tuple[str, Examined[preselect.Facts]]],
                trusting: trust_state.Trusted, checked, refused: dict[str, Issue]) -> Tree:
    """``audit --since``: a tree of the records in scope (``examined``, read in full here) and, of every other
    record, those the lessons' verdicts can depend on (``Tree.chosen``: chosen by their facts, ``facts_read``
    through the verified-file index, then read in full). The records in scope are always in it (their signals
    are judged)."""
    mine = {e.record.run_id for e in examined}
    found = [(name, e) for name, e in facts_read if e.record.run_id not in mine]
    rest = trusting.examine(e for _name, e in found)
    facts = [dataclasses.replace(e, record=preselect.facts_of(e.record)) for e in examined] + rest
    names = [name for name, _e in found]

    def read(wanted: set[str]) -> list:
        chosen = [name for name, e in zip(names, rest, strict=True) if e.record.run_id in wanted]
        return examined + trusting.examine(indexed.read_chosen(root, trusting.registry, chosen))
    return Tree.chosen(root, facts, read, trusting, checked, refused)


def _outside_folders(root: Path, refs_of, disk: MutableMapping[str, tuple[int, str]],
                     refused: dict[str, Issue]) -> None:
    """``audit --since``: the transcripts in-scope records reference outside the folders the byte pass read,
    hashed here into ``disk`` (streamed), or ``refused``; a missing one is left to the evidence rules."""
    unindexed = file_index.Index(None, None)  # no stat from a walk vouches for these: read every one
    for refs in refs_of.values():
        for _where, t in refs:
            if t.path in disk or t.path in refused or not evidence.evidence_path_ok(t.path):
                continue
            try:
                known = file_index.content(root, t.path, "evidence", unindexed)
            except InputRefused as e:
                if e.kind != "missing":
                    refused[t.path] = inputs.refused_issue(e)
                continue
            disk[t.path] = (known.size, known.sha256)


def _plausibility(items: list[Examined], flagged: dict[str, tuple[plausibility.Signal, ...]], names: dict[str, str],
                  lesson_audits: list[LessonAudit], add, more_notes: Iterable[tuple[str, PlausibilityNote]] = (),
                  notice=None) -> None:
    """Each audited record's (``names``: run id → file name) plausibility signals (``flagged``, over ``items``: the
    records, or what they were seen as) that no lesson explains and no second runner key settles
    (``judge.audit.rules.plausibility``), to ``add``; those a lesson's note alone settles, to ``notice``
    (``judge.audit.rules.reviewer``); ``more_notes``: (lesson file, note) of the lessons not judged here."""
    located = [(la.file, n) for la in lesson_audits for n in la.notes] + list(more_notes)
    notes = [n for _file, n in located]
    for item in items:
        if item.record.run_id in flagged and item.record.run_id in names:  # names: the records audited
            file = f"{store.RUNS}/{names[item.record.run_id]}"
            for rule_id, reason in plausibility_rules.plausibility_issues(item, items, flagged, notes):
                add(Finding(file, rule_id, reason))
            for rule_id, reason in reviewer.explained_issues(item, items, flagged, located) if notice else ():
                notice(Finding(file, rule_id, reason))


def _commit_claims(root: Path, kept: list[audit_read.Kept], add) -> None:
    """Each record's ``git.commit`` checked against history (``judge.audit.rules.commits``)."""
    found = git_history.at_commits(root, *commits.wanted(read.claim for read in kept))
    if isinstance(found, NoHistory):
        return
    for read in kept:
        audit_read.add_all(add, f"{store.RUNS}/{read.name}", commits.commit_issues(read.claim, found))


def _orphans(root: Path, names, disk, refs_of, raw_refs, outputs, add) -> tuple[int, int]:
    """Counts the evidence files (reports being written and keep files aside) and reports orphans."""
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
    for rule_id, file, reason in evidence.orphan_issues(orphans, referenced, {n[:-5] for n in names}):
        add(Finding(file, rule_id, reason))
    return count, size_sum


def lesson_files(root: Path) -> list[Path]:
    folder = root / LESSONS
    return sorted(folder.glob("*.md")) if folder.is_dir() else []


def _lesson_inputs(root: Path, add) -> dict[str, Issue]:
    """Every entry under lessons/ that is neither a folder nor a regular file (``gather.inputs``),
    each a finding, and returned (the Tree's refused inputs, with evidence/'s); lesson and claims
    files are read by their loaders below."""
    found = gather_inputs.lesson_inputs(root)
    for rel, (rule_id, reason) in found.items():
        add(Finding(rel, rule_id, reason))
    return found


def _claims_files(root: Path, add) -> None:
    """Every claims file under lessons/claims/, loaded: a refused one is its ``input-*`` finding,
    one that does not parse or validate is ``claims-file``."""
    for path in claims_spec.claims_files(root):
        shown = store.rel(root, path)
        if not stat.S_ISREG(os.lstat(path).st_mode):
            continue  # not a regular file: _lesson_inputs reports it
        try:
            claims_spec.load_file(path, shown)
        except InputRefused as e:
            add(Finding(shown, *inputs.refused_issue(e)))
        except RecordError as e:
            add(Finding(shown, inputs.CLAIMS, inputs.reason_of(e)))


def _lessons(root: Path, tree: Tree, findings: list[Finding], touched: Callable[[LessonFront], bool] | None = None,
             untouched_notes: list | None = None) -> list[LessonAudit]:
    """Each lesson's findings and audit; ``touched``: which lessons to judge (``audit --since``), default all;
    the plausibility notes of the others go to ``untouched_notes``, as (lesson file, note)."""
    add = findings.append
    out = []
    for path in lesson_files(root):
        file = f"{LESSONS}/{path.name}"
        if not stat.S_ISREG(os.lstat(path).st_mode) and any(f.file == file for f in findings):
            continue  # a link or special file: _lesson_inputs reported it
        try:
            lesson = lessons.load_path(path)
            front = lesson.front
        except InputRefused as e:
            add(Finding(file, *inputs.refused_issue(e)))
            continue
        except (RecordError, ValidationError, ValueError) as e:
            add(Finding(file, lesson_rules.FRONT, str(e).splitlines()[0]))
            continue
        if touched is not None and not touched(front):
            if untouched_notes is not None:
                untouched_notes += [(file, n) for n in front.plausibility]
            continue
        try:
            judged = tree.verdict(lesson)
        except TileproofError as e:
            # An input the decision needs (the claims file, a transcript) is refused or broken: that
            # file's finding says why; a published lesson that cannot be decided is a finding too.
            reported = getattr(e, "path", None) in {f.file for f in findings}
            if front.status == "published" or not reported:
                add(Finding(file, inputs.UNDECIDED, f"{front.status}, but its publish decision cannot be made: {e}"))
            continue
        for rule_id, reason in judged.findings():
            add(Finding(file, rule_id, reason))
        out.append(LessonAudit(id=front.id, file=file, title=front.title, status=front.status,
                               programs=[p.path for p in front.programs], decision=judged.decision,
                               releases=tree.releases(front), notes=tuple(front.plausibility)))
    return out
