"""Which runner keys the history of the registry vouches for, from a root the reviewer pins.

``evaluate`` reads nothing: it takes the commit graph and every version of ``lessons/runners.yaml`` along it
(``records.trust.trust_history``), the working tree's registry, the committed endorsements
(``records.trust.registry_change``) and the root (``Root``), and gives each key the kinds history trusts it with,
the findings (``registry-*``, ``trust-root-not-in-history``, ``history-rewritten``) and the ``TrustReport`` the
audit prints. As in TUF's root rotation, each version after the root is trusted only as far as the version before it
signed it. The rules (the root, the walk over parents, revocations and narrowings that stay, a policy that only
tightens): docs/threat-model.md, "How the registry's history is walked".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from tileproof.records.errors import RecordError, one_line
from tileproof.records.findings import Finding
from tileproof.records.trust import runner_keys as reg
from tileproof.records.trust.registry_change import SignedChange, digest
from tileproof.records.trust.runner_keys import REGISTRY, REGISTRY_KIND, RunnerRegistry, TreePolicy
from tileproof.records.trust.trust_history import TrustHistory
from tileproof.records.trust.trust_pin import PIN, TrustPin, parse_pin

WORKTREE = "working tree"
"""The node after HEAD: the registry as the working tree holds it (what records are verified against)."""

RootSource = Literal["--trust-root", "$TILEPROOF_TRUST_ROOT", ".ci/trust-root", "first key"]
"""Where the trust root came from: the command line or CI's environment (outside the tree), the tree's
own pin (a committer can move it; the audit lists each move), or none (the first registry with a key)."""

ChangeStatus = Literal["signed", "tightens-only", "text-only", "unsigned-grants-nothing", "unsigned", "root-reset",
                       "replayed"]
"""How a step of the registry was taken: endorsed; needing no endorsement (it only tightens, or is the same
content written differently); unendorsed, but granting nothing its commit does not trust otherwise (a merge
whose other parent trusts it, or a grant already refused earlier; a dropped revocation is ``registry-loosened``);
``unsigned`` and ``root-reset`` grant what nothing trusted (a finding at the commit that first grants it);
``replayed``: an endorsement matches, but it entered history before a change that took away a kind it grants
(a narrowing), so it grants none of that back (a finding, as ``unsigned``)."""

RULES: dict[str, str] = {
    "registry-change-unsigned": "a registry change grants a key or kind that no key the registry held before "
                                "signed (tileproof sign-registry); what it grants counts for nothing",
    "registry-root-reset": "a registry change grants keys while no key held before could sign it (every key "
                           "lost) and the trust root was not moved to it (docs/keys.md)",
    "registry-missing": "lessons/runners.yaml is gone from a tree whose history registered a key",
    "registry-emptied": "lessons/runners.yaml lists no key in a tree whose history registered one",
    "registry-loosened": "lessons/runners.yaml drops a revocation or dates it later than history shows",
    "registry-signature-invalid": "a file under lessons/registry-signatures/ is not an endorsement that verifies",
    "trust-root-not-in-history": "the pinned trust root (a commit, or a registry's bytes) is not in this history",
    "history-rewritten": "a commit audited before (--expect-ancestor) is not an ancestor of HEAD",
}
"""Rule id → what it catches (registered as audit rules by ``judge.audit.rules.trust_root``)."""


@dataclass(frozen=True)
class Root:
    """The trust root as given: a commit (resolved) or a registry's sha256, and where it came from."""

    source: RootSource
    given: str
    """As the reviewer or the pin file wrote it."""
    commit: str | None = None
    """The full commit id it names (None when it names none in this repository, or is a registry's bytes)."""
    registry_sha256: str | None = None
    """For a registry file: the sha256 of its bytes."""
    why: str = ""
    """The pin file's reason, when it came from one."""


@dataclass(frozen=True)
class Expect:
    """``--expect-ancestor REV``: REV as given and the commit it names (None: names none here)."""

    given: str
    commit: str | None


@dataclass(frozen=True)
class KeyFacts:
    """What history says about one key of the working tree's registry (``judge.trust.standing`` reads it)."""

    keyid: str
    owner: str
    trusted_kinds: frozenset[str]
    """The kinds the trust root's chain grants it now; empty: the key counts for nothing."""
    untrusted_why: str = ""
    """Why kinds it lists are not trusted (the commit whose unsigned change granted them)."""
    added: date | None = None
    """The latest ``added`` any version gives it (a record dated before counts for nothing)."""
    revoked_since: datetime | None = None
    """The earliest ``revoked_since`` any version gives it."""
    revoked_in: str | None = None
    """The first commit (or ``WORKTREE``) listing it revoked."""
    before_revocation: frozenset[str] = frozenset()
    """The commits that are ancestors of the revocation (of each commit that revoked it where no parent had:
    branches that revoked it apart, all of them): only a record first added in one of them can count."""


@dataclass(frozen=True)
class RegistryChange:
    """One step of the registry from a parent to a commit, as the report lists it."""

    commit: str
    """The commit (or ``WORKTREE``) whose registry differs from its parent's."""
    parent: str
    what: tuple[str, ...]
    """One line per difference: key added, kinds widened or narrowed, revoked, removed, policy, text."""
    status: ChangeStatus
    signed_by: str | None = None
    """The keyid whose endorsement made it trusted."""

    def __str__(self) -> str:
        by = f" by {self.signed_by[:16]}…" if self.signed_by else ""
        return f"{_short(self.commit)} (from {_short(self.parent)}): {self.status}{by}: {'; '.join(self.what)}"


@dataclass(frozen=True)
class PinMove:
    """A commit that changed the tree's pin file (``.ci/trust-root``): a move when the commit it pins changed
    (or it appeared, went, or stopped reading), else a rewrite of the same pin (its comments or its why)."""

    commit: str
    before: str | None
    """The commit the pin named before (None: no pin before)."""
    after: str | None
    """The commit it names now (None: removed, or unreadable)."""
    why: str
    in_range: bool = True
    """Whether the commit is in the trust range (descends from the root); a move before it trusts nothing."""

    @property
    def moved(self) -> bool:
        """Whether the pinned commit changed; False for a file rewritten around the same pin."""
        return self.before is None or self.before != self.after

    def __str__(self) -> str:
        why = f" ({self.why})" if self.why else ""
        if not self.moved:
            return f"{_short(self.commit)}: {PIN.as_posix()}, same pin {_short(self.after)}{why}"
        return f"{_short(self.commit)}: {PIN.as_posix()} {_short(self.before) if self.before else 'absent'} -> " \
               f"{_short(self.after) if self.after else 'absent'}{why}"


@dataclass(frozen=True)
class TrustReport:
    """What the audit prints about the trust root: where it came from, the range checked, every change."""

    checked: bool
    """False without git history: nothing of this could be checked."""
    root: str
    """One line: the root and its source."""
    range: str
    """One line: the commits checked, e.g. ``a22ecf5..347efc1 (12 commits)``."""
    changes: tuple[RegistryChange, ...] = ()
    pin_moves: tuple[PinMove, ...] = ()
    expect: str = ""
    """One line about ``--expect-ancestor``, when given."""

    def lines(self) -> list[str]:
        """The report as printed lines, each through ``records.errors.one_line`` (an owner or a pin's
        reason is the registry's own text: a line break in it never splits a line)."""
        out = [f"trust root: {self.root}", f"trust range: {self.range}"]
        out += [f"expected ancestor: {self.expect}"] if self.expect else []
        out += [f"registry change {c}" for c in self.changes]
        out += [f"pin {'moved' if m.moved else 'rewritten'} in {m}" + ("" if m.in_range else
                                                                      ", outside the trust range")
                for m in self.pin_moves]
        return [one_line(line) for line in out]


@dataclass(frozen=True)
class TrustState:
    """What history says about trust, for every record's standing and for the audit."""

    keys: Mapping[str, KeyFacts]
    """keyid → facts, for each key of the working tree's registry."""
    policy: TreePolicy | None
    """``signed-only`` once any version listed a key or said so; else the working tree's own."""
    legacy: frozenset[str] | None
    """Commits before the first key (strict ancestors of the first commit whose registry lists one): an
    unsigned record first added there is from before signing. None without history (none can be told)."""
    history: bool
    """Whether git history was read (without it, nothing here comes from history)."""
    report: TrustReport
    findings: tuple[Finding, ...] = field(default_factory=tuple)


Grants = dict[str, frozenset[str]]
"""keyid → the kinds trusted for it."""

Lost = dict[tuple[str, str], frozenset[str]]
"""(keyid, kind) a change took away → the commits that took it (a narrowing; a merge of lines that each took it
names each): lost from there on until an endorsement that entered history after all of them grants it again."""


def _short(commit: str | None) -> str:
    return "none" if commit is None else commit if commit == WORKTREE else commit[:12]


def _grants(content: RunnerRegistry | None) -> Grants:
    return {} if content is None else {r.keyid: frozenset(r.may_sign) for r in content.runners}


def _pairs(grants: Grants) -> set[tuple[str, str]]:
    return {(k, kind) for k, kinds in grants.items() for kind in kinds}


def _without(grants: Grants, pairs: Iterable[tuple[str, str]]) -> Grants:
    gone = set(pairs)
    if not gone:
        return grants
    out = {k: frozenset(kind for kind in kinds if (k, kind) not in gone) for k, kinds in grants.items()}
    return {k: v for k, v in out.items() if v}


def _words(pairs: Iterable[tuple[str, str]], owners: Mapping[str, str]) -> str:
    """``<keyid>… (<owner>): kind, kind; ...`` for the pairs, a key at a time."""
    pairs = set(pairs)
    return "; ".join(f"{k[:16]}… ({owners.get(k, '?')}): {', '.join(sorted(kind for kk, kind in pairs if kk == k))}"
                     for k in sorted({k for k, _ in pairs}))


def _meet(trusted: Grants, content: RunnerRegistry | None) -> Grants:
    """What stays trusted when a version is not endorsed: its grants that ``trusted`` already made."""
    out = {k: kinds & trusted.get(k, frozenset()) for k, kinds in _grants(content).items()}
    return {k: v for k, v in out.items() if v}


def _join(results: Iterable[Grants]) -> Grants:
    out: Grants = {}
    for g in results:
        for k, kinds in g.items():
            out[k] = out.get(k, frozenset()) | kinds
    return out


@dataclass(frozen=True)
class _Version:
    sha256: str | None
    content: RunnerRegistry | None
    """None when absent or unreadable (``problem`` says which)."""
    problem: str = ""

    @property
    def keyed(self) -> bool:
        """Lists a key or says signed-only; an unreadable version counts as keyed (fail closed)."""
        if self.content is None:
            return bool(self.problem)
        return bool(self.content.runners) or self.content.policy == "signed-only"


def _parse(sha: str | None, texts: Mapping[str, bytes], shown: str) -> _Version:
    if sha is None:
        return _Version(None, None)
    data = texts.get(sha)
    if data is None:
        return _Version(sha, None, "its bytes could not be read")
    try:
        return _Version(sha, reg.parse_registry(data.decode("utf-8"), shown))
    except (RecordError, UnicodeDecodeError) as e:
        return _Version(sha, None, str(e))


def _describe(before: _Version, after: _Version) -> tuple[list[str], bool]:
    """(the differences in words, whether every one only tightens)."""
    if after.content is None:
        return [f"{REGISTRY.as_posix()} {'removed' if not after.problem else 'unreadable: ' + after.problem}"], False
    old = {r.keyid: r for r in before.content.runners} if before.content else {}
    new = {r.keyid: r for r in after.content.runners}
    lines: list[str] = []
    tight = before.content is not None
    for k, r in new.items():
        o = old.get(k)
        if o is None:
            lines.append(f"key {k[:16]}… ({r.owner}) added, may sign {', '.join(r.may_sign)}")
            tight = False
            continue
        wider = sorted(set(r.may_sign) - set(o.may_sign))
        narrower = sorted(set(o.may_sign) - set(r.may_sign))
        if wider:
            lines.append(f"key {k[:16]}… ({r.owner}) may now also sign {', '.join(wider)}")
            tight = False
        if narrower:
            lines.append(f"key {k[:16]}… ({r.owner}) may no longer sign {', '.join(narrower)}")
        if r.revoked_since != o.revoked_since:
            if r.revoked_since is None:
                lines.append(f"key {k[:16]}… ({r.owner}) revocation removed")
                tight = False
            elif o.revoked_since is None or r.revoked_since < o.revoked_since:
                lines.append(f"key {k[:16]}… ({r.owner}) revoked since {r.revoked_since.isoformat()}")
            else:
                lines.append(f"key {k[:16]}… ({r.owner}) revocation moved later, to {r.revoked_since.isoformat()}")
                tight = False
        if (r.owner, r.public_key, r.added) != (o.owner, o.public_key, o.added):
            lines.append(f"key {k[:16]}… entry edited (owner, added)")
            tight = tight and r.added >= o.added and r.owner == o.owner
    lines += [f"key {k[:16]}… ({o.owner}) removed" for k, o in old.items() if k not in new]
    if before.content is not None and before.content.policy != after.content.policy:
        lines.append(f"policy {before.content.policy or 'unset'} -> {after.content.policy or 'unset'}")
        tight = tight and after.content.policy == "signed-only"
    return lines or ["comments or layout only (the same keys, kinds and revocations)"], tight


def _pin_of(sha: str | None, texts: Mapping[str, bytes]) -> TrustPin | None:
    if sha is None or sha not in texts:
        return None
    try:
        return parse_pin(texts[sha].decode("utf-8"), PIN.as_posix())
    except (RecordError, UnicodeDecodeError):
        return None


def without_history(worktree: RunnerRegistry, reason: str, root: Root | None, expect: Expect | None) -> TrustState:
    """A tree without git history: the working tree's registry as it says, nothing of history checked."""
    keys = {r.keyid: KeyFacts(r.keyid, r.owner, frozenset(r.may_sign), added=r.added, revoked_since=r.revoked_since)
            for r in worktree.runners}
    findings: list[Finding] = []
    if expect is not None:
        findings.append(Finding("HEAD", "history-rewritten",
                                f"{expect.given} cannot be checked as an ancestor of HEAD: {reason}"))
    return TrustState(keys, worktree.in_force, None, False,
                      TrustReport(False, f"NOT CHECKED ({reason})" + (f"; {root.source} {root.given} not applied"
                                                                      if root else ""), "none"), tuple(findings))


def evaluate(history: TrustHistory, worktree: bytes | None, signatures: Sequence[SignedChange],
             root: Root | None = None, expect: Expect | None = None) -> TrustState:
    """The trust state of a tree with history (see the module docstring). ``worktree``: the bytes of the
    working tree's registry (None: absent)."""
    walk = _Walk.over(history, worktree, signatures)
    origin, root_line = _root_node(walk.nodes, walk.version, root, walk.findings)
    walk.start(origin)
    for n in walk.nodes:
        walk.visit(n, origin)
    keys = _key_facts(walk.nodes, walk.version, walk.state.get(WORKTREE) or {}, walk.untrusted,
                      walk.lost.get(WORKTREE, {}), walk.revoked, walk.descend)
    ever = any(walk.version(n).keyed for n in history.commits)
    wt = walk.version(WORKTREE)
    policy: TreePolicy | None = "signed-only" if ever or wt.keyed else (wt.content.in_force if wt.content else None)
    walk.findings += _loosened(ever, wt, walk.revoked)
    first_key = next((c for c in history.commits
                      if reg.registry_lists_keys(walk.texts.get(walk.shas[c] or "") if walk.shas[c] else None)), None)
    legacy = (frozenset(history.commits) if first_key is None else history.ancestors(first_key) - {first_key})
    in_range = [c for c in history.commits if c in walk.descend]
    span = (f"{_short(origin)}..{_short(history.head)} ({len(in_range)} commit{'s' * (len(in_range) != 1)}"
            f"{', and the working tree' if WORKTREE in walk.descend else ''})" if origin is not None
            else "nothing (no trust root)")
    report = TrustReport(True, root_line, span, tuple(walk.changes), _pin_moves(history, walk.descend),
                         _expectation(history, expect, walk.findings))
    return TrustState(keys, policy, legacy, True, report, tuple(walk.findings))


@dataclass
class _Walk:
    """One walk of the registry's history from the root (``evaluate``): the graph and the registry's versions it
    reads, and, node by node in topological order, what each node trusts, what it lost and what it found."""

    history: TrustHistory
    texts: dict[str, bytes]
    """Registry digest → its bytes (the working tree's too)."""
    nodes: list[str]
    """Every commit, oldest first, then ``WORKTREE``."""
    parents: dict[str, tuple[str, ...]]
    shas: dict[str, str | None]
    """Node → the digest of its registry (None: none)."""
    by_change: dict[tuple[str, str], list[SignedChange]]
    """(previous digest, new digest) → the endorsements of that change."""
    parsed: dict[str | None, _Version] = field(default_factory=dict)
    later: dict[str, frozenset[str]] = field(default_factory=dict)
    late: dict[str, tuple[str, SignedChange, str]] = field(default_factory=dict)
    """node → (a key, its endorsement, the commit that revoked it) that verifies but came after the revocation."""
    descend: set[str] = field(default_factory=set)
    revoked: dict[str, _Revocation] = field(default_factory=dict)
    state: dict[str, Grants | None] = field(default_factory=dict)
    lost: dict[str, Lost] = field(default_factory=dict)
    untrusted: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    changes: list[RegistryChange] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @classmethod
    def over(cls, history: TrustHistory, worktree: bytes | None, signatures: Sequence[SignedChange]) -> _Walk:
        texts = dict(history.texts)
        wt_sha = None
        if worktree is not None:
            wt_sha = digest(worktree)
            texts[wt_sha] = worktree
        by_change: dict[tuple[str, str], list[SignedChange]] = {}
        for s in signatures:
            by_change.setdefault((s.statement.previous, s.statement.new), []).append(s)
        return cls(history, texts, [*history.commits, WORKTREE],
                   {**history.parents, WORKTREE: (history.head,) if history.head else ()},
                   {**history.registry, WORKTREE: wt_sha}, by_change)

    def start(self, origin: str | None) -> None:
        """From the root: the nodes that descend from it, and every key's revocation in history."""
        self.descend = _descendants(self.nodes, self.parents, origin)
        self.revoked = _revocations(self.nodes, self.parents, self.shas, self.version, self.history)

    def version(self, node: str) -> _Version:
        sha = self.shas.get(node)
        if sha not in self.parsed:
            self.parsed[sha] = _parse(sha, self.texts, f"{REGISTRY.as_posix()} at {_short(node)}")
        return self.parsed[sha]

    def after(self, commit: str) -> frozenset[str]:
        """``commit`` and every node descending from it (the working tree too), computed once per commit."""
        if commit not in self.later:
            self.later[commit] = (self.history.descendants(commit) | {WORKTREE} if commit != WORKTREE
                                  else frozenset({WORKTREE}))
        return self.later[commit]

    def added_in(self, change: SignedChange) -> frozenset[str]:
        """The commits that added the endorsement's bytes; the working tree alone when none did yet."""
        return self.history.endorsements.get(change.sha256) or frozenset({WORKTREE})

    def endorser(self, p: str, n: str, trusted: Grants) -> tuple[str, SignedChange] | None:
        """The key whose endorsement of the step p -> n verifies, and that endorsement, if any. A key revoked in
        history endorses only a step to an ancestor of its revocation, by an endorsement one of them added."""
        for change in self.by_change.get((self.shas.get(p) or "", self.shas.get(n) or ""), []):
            for k, public in _endorsers(self.version(p).content, trusted):
                if not change.signed_by(k, public):
                    continue
                rev = self.revoked.get(k)
                if rev is not None and (n not in rev.before or not self.added_in(change) & rev.before):
                    self.late.setdefault(n, (k, change, rev.commit))
                    continue
                return k, change
        return None

    def postdates(self, change: SignedChange, took: frozenset[str]) -> bool:
        """Whether every commit that added the endorsement descends from every commit in ``took``."""
        return all(c in self.after(t) for c in self.added_in(change) for t in took)

    def visit(self, n: str, origin: str | None) -> None:
        """What node ``n`` trusts, from its parents' trust and the steps from them (visited before it)."""
        if n not in self.descend:
            self.state[n] = None
            return
        if n == origin:
            self.state[n] = _grants(self.version(n).content)
            self.untrusted[n], self.lost[n] = set(), {}
            return
        ups = [p for p in self.parents.get(n, ()) if self.state.get(p) is not None]
        if len(ups) == 1 and len(self.parents.get(n, ())) == 1 and self.shas.get(ups[0]) == self.shas.get(n):
            p = ups[0]  # the same registry as its one parent (most commits): all of the parent's, unchanged
            self.state[n], self.lost[n], self.untrusted[n] = self.state[p], self.lost[p], self.untrusted[p]
            return
        lost_in = _lost_in([self.lost[p] for p in ups])
        # A pair a parent trusts although another parent lost it stays trusted only when that parent descends
        # from every commit that took it away (it was granted again there); else that parent predates the loss.
        cleared = {x for x, took in lost_in.items()
                   if any(x[1] in (self.state[q] or {}).get(x[0], ()) and all(q in self.after(t) for t in took)
                          for q in ups)}
        results, steps, could_sign = self._steps(n, ups, lost_in, cleared)
        granted = _pairs(_grants(self.version(n).content))
        now_lost = {x: took for x, took in lost_in.items() if x not in cleared}
        for p in ups:
            if self.shas.get(p) != self.shas.get(n):  # a parent's grants are its registry's: none lost unchanged
                for x in _pairs(self.state[p] or {}) - granted:
                    now_lost.setdefault(x, frozenset({n}))
        self.lost[n] = now_lost
        joined = self.state[n] = _without(_join(results), now_lost)
        self.untrusted[n] = granted - _pairs(joined)
        fresh = self.untrusted[n] - set().union(*(self.untrusted.get(p, set()) for p in self.parents.get(n, ())
                                                  if p in self.descend))
        self._note_changes(n, steps, bool(fresh), could_sign)
        if fresh:
            self.findings.append(_unendorsed(n, fresh, now_lost, could_sign, self.version(n).content,
                                             self.late.get(n)))

    def _steps(self, n: str, ups: list[str], lost_in: Lost, cleared: set[tuple[str, str]]
               ) -> tuple[list[Grants], list[tuple[str, ChangeStatus | None, str | None]], bool]:
        """Each parent's step to ``n``: what stays trusted across it, its status and endorser; whether any
        parent had a key that could sign. ``cleared`` gains the pairs an endorsement grants back in time."""
        results: list[Grants] = []
        could_sign = False
        steps: list[tuple[str, ChangeStatus | None, str | None]] = []
        for p in ups:
            trusted = self.state[p] or {}
            could_sign = could_sign or bool(_endorsers(self.version(p).content, trusted))
            got, status, by, change = _step(p, n, trusted, self.version, self.shas, self.endorser)
            if change is not None:  # endorsed: it grants back what was taken only if it entered history later
                back = {x for x in _pairs(got) if x in lost_in and x not in cleared}
                stale = {x for x in back if not self.postdates(change, lost_in[x])}
                if stale:
                    got, status = _without(got, stale), "replayed"
                cleared |= back - stale
            results.append(got)
            steps.append((p, status, by))
        return results, steps, could_sign

    def _note_changes(self, n: str, steps: list[tuple[str, ChangeStatus | None, str | None]], fresh: bool,
                      could_sign: bool) -> None:
        """The report's line for each step to ``n`` that changed the registry."""
        for p, status, by in steps:
            if status is None:
                continue
            what, _tight = _describe(self.version(p), self.version(n))
            if status == "unsigned" and fresh:
                status = "unsigned" if could_sign else "root-reset"
            elif status == "unsigned":
                status = "unsigned-grants-nothing"
            self.changes.append(RegistryChange(n, p, tuple(what), status, by))


def _step(p, n, trusted: Grants, version, shas, endorser
          ) -> tuple[Grants, ChangeStatus | None, str | None, SignedChange | None]:
    """What stays trusted across the step from parent ``p`` to ``n``; its status (None: no change); the key and
    the endorsement that endorsed it, if one did."""
    before, after = version(p), version(n)
    if shas.get(p) == shas.get(n):
        return trusted, None, None, None
    if before.content is not None and after.content is not None and before.content == after.content:
        return trusted, "text-only", None, None
    found = endorser(p, n, trusted)
    if found is not None:
        return _grants(after.content), "signed", found[0], found[1]
    _lines, tight = _describe(before, after)
    return _meet(trusted, after.content), "tightens-only" if tight else "unsigned", None, None


def _lost_in(parents: Sequence[Lost]) -> Lost:
    """What any parent lost, with every commit that took it on any line (one parent's own map, when alone)."""
    if len(parents) == 1:
        return dict(parents[0])
    out: Lost = {}
    for one in parents:
        for x, took in one.items():
            out[x] = out.get(x, frozenset()) | took
    return out


def _unendorsed(n: str, fresh: set[tuple[str, str]], lost: Lost, could_sign: bool, content: RunnerRegistry | None,
                late: tuple[str, SignedChange, str] | None) -> Finding:
    """The finding at the commit that first grants ``fresh`` without an endorsement that counts (``late``: one
    that verifies, by a key revoked in a commit this change, or the endorsement's commit, is no ancestor of)."""
    owners = {r.keyid: r.owner for r in (content or reg.EMPTY).runners}
    back = {x for x in fresh if x in lost}
    new = fresh - back
    where = f"{REGISTRY.as_posix()}" + (" (working tree)" if n == WORKTREE else "")
    step = f"commit {_short(n)}" if n != WORKTREE else "the working tree's change"
    if not could_sign:
        return Finding(where, "registry-root-reset",
                       f"{step} grants {_words(fresh, owners)}, and no key held before it could sign it (a root "
                       f"reset); what it grants counts for nothing until a reviewer moves the trust root to it (fix: "
                       f"docs/keys.md, 'Every key lost')")
    said = [f"{step} grants {_words(new, owners)} with no endorsement by a key the registry held before"] if new else []
    if back:
        took = ", ".join(_short(c) for c in sorted({c for x in back for c in lost[x]}))
        said.append(f"{'it' if new else step} grants back {_words(back, owners)}, which commit {took} took away, "
                    f"with no endorsement that entered history after that (a kind a key lost stays lost: an older "
                    f"endorsement that matches again grants nothing back)")
    if late is not None:
        k, change, revoked_in = late
        said.append(f"the endorsement {change.path} by {k[:16]}… does not count: that key was revoked in commit "
                    f"{_short(revoked_in)}, and this change or the endorsement's commit is not an ancestor of it")
    fix = "tileproof sign-registry --key <a key with 'registry'>, committed beside the change" + (
        "; bytes endorsed before need new ones (a comment) for a new endorsement" if back else "")
    return Finding(where, "registry-change-unsigned",
                   f"{'; '.join(said)}; what it grants counts for nothing (fix: {fix})")


def _root_node(nodes: list[str], version, root: Root | None, findings: list[Finding]) -> tuple[str | None, str]:
    """The node whose registry is the root, and the report's line about it."""
    if root is None:
        first = next((n for n in nodes if version(n).keyed), None)
        return first, (f"the first registry that lists a key, commit {_short(first)} (no pin: trust on first use; "
                       f"pin one with --trust-root)" if first else "none (no registry has listed a key)")
    if root.registry_sha256 is not None:
        node = next((n for n in nodes if version(n).sha256 == root.registry_sha256), None)
        what = f"the registry with sha256 {root.registry_sha256[:16]}… ({root.given})"
    else:
        node = root.commit if root.commit in nodes else None
        what = f"commit {_short(root.commit)}" if root.commit else f"commit {root.given}"
        what += f" ({root.given})" if root.commit and root.given not in (root.commit, _short(root.commit)) else ""
    where = f"from {root.source}" + (f": {root.why}" if root.why else "")
    if node is None:
        findings.append(Finding(PIN.as_posix() if root.source == ".ci/trust-root" else REGISTRY.as_posix(),
                                "trust-root-not-in-history",
                                f"{what}, {where}, is not in this history (rewritten, another repository, or a "
                                f"typo); no key counts (fix: pin a commit of this history: docs/keys.md)"))
        return None, f"{what}, {where}: NOT IN THIS HISTORY"
    first = f", first in commit {_short(node)}" if root.registry_sha256 is not None else ""
    return node, f"{what}{first}, {where}"


def _descendants(nodes: list[str], parents: Mapping[str, tuple[str, ...]], origin: str | None) -> set[str]:
    if origin is None:
        return set()
    out = {origin}
    for n in nodes:  # parents first: one pass suffices
        if any(p in out for p in parents.get(n, ())):
            out.add(n)
    return out


@dataclass(frozen=True)
class _Revocation:
    since: datetime
    """The earliest ``revoked_since`` any version gives."""
    commit: str
    """The first node (topological order) listing it revoked."""
    before: frozenset[str]
    """The strict ancestors of every node that lists it revoked while no parent does (usually one: the commit
    that revoked it)."""


def _revocations(nodes: list[str], parents: Mapping[str, tuple[str, ...]], shas: Mapping[str, str | None], version,
                 history: TrustHistory) -> dict[str, _Revocation]:
    """keyid → its revocation (``_Revocation``). The commits before it are one ancestor walk per commit that
    revoked it (``TrustHistory.ancestors``), whatever the number of records judged by them."""
    here: dict[str | None, dict[str, datetime]] = {}  # registry sha256 → the keys revoked there, since when
    since: dict[str, datetime] = {}
    first: dict[str, str] = {}
    origins: dict[str, list[str]] = {}
    for n in nodes:
        sha = shas.get(n)
        if sha not in here:
            content = version(n).content
            here[sha] = {r.keyid: r.revoked_since for r in content.runners if r.revoked_since is not None} \
                if content else {}
        above = parents.get(n, ())
        changed = not above or any(shas.get(p) != sha for p in above)  # else every parent revoked the same
        for k, when in here[sha].items():
            first.setdefault(k, n)
            since[k] = min(when, since.get(k, when))
            if changed and not any(k in here.get(shas.get(p), {}) for p in above):
                origins.setdefault(k, []).append(n)
    walked: dict[str, frozenset[str]] = {}

    def strictly_before(o: str) -> frozenset[str]:  # one walk per commit (keys revoked together share it)
        if o not in walked:
            walked[o] = frozenset(history.commits) if o == WORKTREE else history.ancestors(o) - {o}
        return walked[o]
    return {k: _Revocation(since[k], first[k], frozenset.intersection(*(strictly_before(o) for o in origins[k])))
            for k in first}


def _endorsers(before: RunnerRegistry | None, trusted: Grants) -> list[tuple[str, Ed25519PublicKey]]:
    """(keyid, public key) of every key that may endorse the version after the registry ``before``: trusted there
    with ``registry``, listed in it and not revoked there (a key revoked elsewhere in history endorses only what
    is an ancestor of that revocation: ``evaluate``'s ``endorser``)."""
    out = []
    for k, kinds in sorted(trusted.items()):
        entry = before.keys.get(k) if before is not None else None
        if REGISTRY_KIND in kinds and entry is not None and entry[0].revoked_since is None:
            out.append((k, entry[1]))
    return out


def _key_facts(nodes, version, trusted: Grants, untrusted, lost: Lost, revoked, descend) -> dict[str, KeyFacts]:
    wt = version(WORKTREE).content
    out: dict[str, KeyFacts] = {}
    for r in wt.runners if wt else ():
        listed = [c.keys[r.keyid][0] for n in nodes if (c := version(n).content) is not None and r.keyid in c.keys]
        added = max((e.added for e in listed), default=r.added)
        kinds = trusted.get(r.keyid, frozenset())
        why = ""
        missing = set(r.may_sign) - kinds
        taken = {kind: cs for (k, kind), cs in lost.items() if k == r.keyid and kind in missing}
        if taken:
            took = sorted(frozenset().union(*taken.values()))
            why = (f"commit {', '.join(_short(c) for c in took)} took {', '.join(sorted(taken))} away, and no "
                   f"endorsement that entered history after that grants it again")
        elif missing:
            granted_in = next((n for n in nodes if n in descend and any(k == r.keyid for k, _ in untrusted.get(n, ()))),
                              None)
            why = (f"commit {_short(granted_in)} granted it without an endorsement by a key held before"
                   if granted_in else "no trust root's chain grants it")
        rev = revoked.get(r.keyid)
        out[r.keyid] = KeyFacts(r.keyid, r.owner, kinds, why, added,
                                rev.since if rev else None, rev.commit if rev else None,
                                rev.before if rev else frozenset())
    return out


def _loosened(ever: bool, wt: _Version, revoked: Mapping[str, _Revocation]) -> list[Finding]:
    where = REGISTRY.as_posix()
    if not ever:
        return []
    if wt.sha256 is None:
        return [Finding(where, "registry-missing", "is gone, and git history shows it listed runner keys: only signed "
                                                   "records count here, and none can be verified (fix: git checkout "
                                                   f"HEAD -- {where}, or restore it from the last commit that had it)")]
    if wt.content is None:
        return []  # unreadable: loading it fails with its own one line
    if not wt.content.runners:
        return [Finding(where, "registry-emptied", "lists no key, and git history shows it listed some: only signed "
                                                   "records count here, and none can be verified (fix: restore the "
                                                   "entries; never delete one, revoke it)")]
    out = []
    for k, rev in sorted(revoked.items()):
        entry = wt.content.keys.get(k)
        if entry is not None and (entry[0].revoked_since is None or entry[0].revoked_since > rev.since):
            out.append(Finding(where, "registry-loosened",
                               f"key {k[:16]}… ({entry[0].owner}) was revoked since {rev.since.isoformat()} in commit "
                               f"{_short(rev.commit)}; a revocation is permanent whatever this file says now (fix: "
                               f"revoked_since: '{rev.since.isoformat()}')"))
    return out


def _pin_moves(history: TrustHistory, descend: set[str]) -> tuple[PinMove, ...]:
    out = []
    for c in history.commits:
        now = history.pin.get(c)
        parents = history.parents.get(c, ())
        if now in ({history.pin.get(p) for p in parents} or {None}):
            continue
        old = history.pin.get(parents[0]) if parents else None  # the first parent: the branch it was moved on
        pin_now, pin_old = _pin_of(now, history.texts), _pin_of(old, history.texts)
        out.append(PinMove(c, pin_old.commit if pin_old else None, pin_now.commit if pin_now else None,
                           pin_now.why if pin_now else ("removed" if now is None else "unreadable"), c in descend))
    return tuple(out)


def _expectation(history: TrustHistory, expect: Expect | None, findings: list[Finding]) -> str:
    if expect is None:
        return ""
    if expect.commit is not None and expect.commit in history.position:
        return f"{expect.given} ({_short(expect.commit)}) is an ancestor of HEAD ({_short(history.head)})"
    what = "names no commit of this repository" if expect.commit is None else \
        f"({_short(expect.commit)}) is not an ancestor of HEAD ({_short(history.head)})"
    findings.append(Finding("HEAD", "history-rewritten",
                            f"{expect.given} {what}: history was rewritten since that audit, or this is another branch "
                            f"(fix: audit the branch that contains it; never rewrite published history)"))
    return f"{expect.given} {what}"

