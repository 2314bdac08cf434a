"""Which runner keys the history of the registry vouches for, from a root the reviewer pins.

``evaluate`` reads nothing: it takes the commit graph and every version of ``lessons/runners.yaml`` along it
(``records.trust_history``), the working tree's registry, the committed endorsements (``records.registry_change``)
and the root (``Root``), and gives each key the kinds history trusts it with, the findings (``registry-*``,
``trust-root-not-in-history``, ``history-rewritten``) and the ``TrustReport`` the audit prints. As in TUF's root
rotation, each version after the root is trusted only as far as the version before it signed it. The rules (the
root, the walk over parents, permanent revocations, a policy that only tightens):
docs/threat-model.md, "How the registry's history is walked".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from tileproof.records import runner_keys as reg
from tileproof.records.errors import RecordError, one_line
from tileproof.records.findings import Finding
from tileproof.records.registry_change import SignedChange, digest
from tileproof.records.runner_keys import REGISTRY, REGISTRY_KIND, RunnerRegistry, TreePolicy
from tileproof.records.trust_history import TrustHistory
from tileproof.records.trust_pin import PIN, TrustPin, parse_pin

WORKTREE = "working tree"
"""The node after HEAD: the registry as the working tree holds it (what records are verified against)."""

RootSource = Literal["--trust-root", "$TILEPROOF_TRUST_ROOT", ".ci/trust-root", "first key"]
"""Where the trust root came from: the command line or CI's environment (outside the tree), the tree's
own pin (a committer can move it; the audit lists each move), or none (the first registry with a key)."""

ChangeStatus = Literal["signed", "tightens-only", "text-only", "unsigned-grants-nothing", "unsigned", "root-reset"]
"""How a step of the registry was taken: endorsed; needing no endorsement (it only tightens, or is the same
content written differently); unendorsed, but granting nothing its commit does not trust otherwise (a merge
whose other parent trusts it, or a grant already refused earlier; a dropped revocation is ``registry-loosened``);
``unsigned`` and ``root-reset`` grant what nothing trusted (a finding at the commit that first grants it)."""

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
    """What history says about one key of the working tree's registry (``judge.standing`` reads it)."""

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
    after_revocation: frozenset[str] = frozenset()
    """That commit and every commit descending from it: a record first added there is refused."""


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


def _short(commit: str | None) -> str:
    return "none" if commit is None else commit if commit == WORKTREE else commit[:12]


def _grants(content: RunnerRegistry | None) -> Grants:
    return {} if content is None else {r.keyid: frozenset(r.may_sign) for r in content.runners}


def _pairs(grants: Grants) -> set[tuple[str, str]]:
    return {(k, kind) for k, kinds in grants.items() for kind in kinds}


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
    texts = dict(history.texts)
    wt_sha = None
    if worktree is not None:
        wt_sha = digest(worktree)
        texts[wt_sha] = worktree
    nodes = [*history.commits, WORKTREE]
    parents: dict[str, tuple[str, ...]] = {**history.parents, WORKTREE: (history.head,) if history.head else ()}
    shas = {**history.registry, WORKTREE: wt_sha}
    parsed: dict[str | None, _Version] = {}

    def version(node: str) -> _Version:
        sha = shas.get(node)
        if sha not in parsed:
            parsed[sha] = _parse(sha, texts, f"{REGISTRY.as_posix()} at {_short(node)}")
        return parsed[sha]

    findings: list[Finding] = []
    origin, root_line = _root_node(nodes, version, root, findings)
    descend = _descendants(nodes, parents, origin)
    revoked = _revocations(nodes, version, history)
    by_change: dict[tuple[str, str], list[SignedChange]] = {}
    for s in signatures:
        by_change.setdefault((s.statement.previous, s.statement.new), []).append(s)

    def endorser(p: str, n: str, trusted: Grants) -> str | None:
        """The key whose endorsement of the step p -> n verifies, if any."""
        candidates = _endorsers(version(p).content, p, trusted, revoked)
        for change in by_change.get((shas.get(p) or "", shas.get(n) or ""), []):
            for k, public in candidates:
                if change.signed_by(k, public):
                    return k
        return None

    state: dict[str, Grants | None] = {}
    untrusted: dict[str, set[tuple[str, str]]] = {}
    changes: list[RegistryChange] = []
    for n in nodes:
        if n not in descend:
            state[n] = None
            continue
        if n == origin:
            state[n] = _grants(version(n).content)
            untrusted[n] = set()
            continue
        results: list[Grants] = []
        could_sign = False
        steps: list[tuple[str, ChangeStatus | None, str | None]] = []
        for p in parents.get(n, ()):
            trusted = state.get(p)
            if trusted is None:
                continue
            could_sign = could_sign or bool(_endorsers(version(p).content, p, trusted, revoked))
            got, status, by = _step(p, n, trusted, version, shas, endorser)
            results.append(got)
            steps.append((p, status, by))
        joined = state[n] = _join(results)
        untrusted[n] = _pairs(_grants(version(n).content)) - _pairs(joined)
        fresh = untrusted[n] - set().union(*(untrusted.get(p, set()) for p in parents.get(n, ()) if p in descend))
        for p, status, by in steps:
            if status is None:
                continue
            what, _tight = _describe(version(p), version(n))
            if status == "unsigned" and fresh:
                status = "unsigned" if could_sign else "root-reset"
            elif status == "unsigned":
                status = "unsigned-grants-nothing"
            changes.append(RegistryChange(n, p, tuple(what), status, by))
        if fresh:
            owners = {r.keyid: r.owner for r in (version(n).content or reg.EMPTY).runners}
            granted_words = "; ".join(f"{k[:16]}… ({owners.get(k, '?')}): "
                                      f"{', '.join(sorted(kind for kk, kind in fresh if kk == k))}"
                                      for k in sorted({k for k, _ in fresh}))
            where = f"{REGISTRY.as_posix()}" + (" (working tree)" if n == WORKTREE else "")
            step = f"commit {_short(n)}" if n != WORKTREE else "the working tree's change"
            if could_sign:
                findings.append(Finding(where, "registry-change-unsigned",
                                        f"{step} grants {granted_words} with no endorsement by a key the "
                                        f"registry held before; what it grants counts for nothing (fix: tileproof "
                                        f"sign-registry --key <a key with 'registry'>, committed beside the change)"))
            else:
                findings.append(Finding(where, "registry-root-reset",
                                        f"{step} grants {granted_words}, and no key held before it could sign "
                                        f"it (a root reset); what it grants counts for nothing until a reviewer moves "
                                        f"the trust root to it (fix: docs/keys.md, 'Every key lost')"))

    keys = _key_facts(nodes, version, state.get(WORKTREE) or {}, untrusted, revoked, history, descend)
    ever = any(version(n).keyed for n in history.commits)
    wt = version(WORKTREE)
    policy: TreePolicy | None = "signed-only" if ever or wt.keyed else (wt.content.in_force if wt.content else None)
    findings += _loosened(ever, wt, revoked)
    first_key = next((c for c in history.commits
                      if reg.registry_lists_keys(texts.get(shas[c] or "") if shas[c] else None)), None)
    legacy = (frozenset(history.commits) if first_key is None else history.ancestors(first_key) - {first_key})
    in_range = [c for c in history.commits if c in descend]
    span = (f"{_short(origin)}..{_short(history.head)} ({len(in_range)} commit{'s' * (len(in_range) != 1)}"
            f"{', and the working tree' if WORKTREE in descend else ''})" if origin is not None
            else "nothing (no trust root)")
    report = TrustReport(True, root_line, span, tuple(changes), _pin_moves(history, descend),
                         _expectation(history, expect, findings))
    return TrustState(keys, policy, legacy, True, report, tuple(findings))


def _step(p, n, trusted: Grants, version, shas, endorser) -> tuple[Grants, ChangeStatus | None, str | None]:
    """What stays trusted across the step from parent ``p`` to ``n``; its status (None: no change)."""
    before, after = version(p), version(n)
    if shas.get(p) == shas.get(n):
        return trusted, None, None
    if before.content is not None and after.content is not None and before.content == after.content:
        return trusted, "text-only", None
    by = endorser(p, n, trusted)
    if by is not None:
        return _grants(after.content), "signed", by
    _lines, tight = _describe(before, after)
    return _meet(trusted, after.content), "tightens-only" if tight else "unsigned", None


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
    commit: str
    after: frozenset[str]


def _revocations(nodes: list[str], version, history: TrustHistory) -> dict[str, _Revocation]:
    """keyid → the first node listing it revoked, the earliest instant any version gives, the nodes after."""
    out: dict[str, _Revocation] = {}
    for n in nodes:
        content = version(n).content
        for r in content.runners if content else ():
            if r.revoked_since is None:
                continue
            found = out.get(r.keyid)
            if found is None:
                after = history.descendants(n) | {WORKTREE} if n != WORKTREE else frozenset({WORKTREE})
                out[r.keyid] = _Revocation(r.revoked_since, n, frozenset(after))
            elif r.revoked_since < found.since:
                out[r.keyid] = _Revocation(r.revoked_since, found.commit, found.after)
    return out


def _endorsers(before: RunnerRegistry | None, node: str, trusted: Grants,
               revoked: Mapping[str, _Revocation]) -> list[tuple[str, Ed25519PublicKey]]:
    """(keyid, public key) of every key that may endorse the next version after ``node``: trusted there with
    ``registry``, listed in its registry and not revoked there (by that version, or by history)."""
    out = []
    for k, kinds in sorted(trusted.items()):
        entry = before.keys.get(k) if before is not None else None
        found = revoked.get(k)
        if REGISTRY_KIND in kinds and entry is not None and entry[0].revoked_since is None and not (
                found is not None and node in found.after):
            out.append((k, entry[1]))
    return out


def _key_facts(nodes, version, trusted: Grants, untrusted, revoked, history: TrustHistory,
               descend) -> dict[str, KeyFacts]:
    wt = version(WORKTREE).content
    out: dict[str, KeyFacts] = {}
    for r in wt.runners if wt else ():
        listed = [c.keys[r.keyid][0] for n in nodes if (c := version(n).content) is not None and r.keyid in c.keys]
        added = max((e.added for e in listed), default=r.added)
        kinds = trusted.get(r.keyid, frozenset())
        why = ""
        if set(r.may_sign) - kinds:
            granted_in = next((n for n in nodes if n in descend and any(k == r.keyid for k, _ in untrusted.get(n, ()))),
                              None)
            why = (f"commit {_short(granted_in)} granted it without an endorsement by a key held before"
                   if granted_in else "no trust root's chain grants it")
        rev = revoked.get(r.keyid)
        out[r.keyid] = KeyFacts(r.keyid, r.owner, kinds, why, added,
                                rev.since if rev else None, rev.commit if rev else None,
                                rev.after if rev else frozenset())
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

