"""The trust inputs of a tree, read in one place: the registry, its history, its endorsements and the root.

``load(root, trust_root)`` reads the working tree's ``lessons/runners.yaml`` (a malformed
one, a key written twice included, is one line), the commit graph with every registry and
pin version along it (``runner.git_history.trust_history``), the endorsements under
``lessons/registry-signatures/``, the first commit of every record (``runner.git_history.read``)
and the trust root: ``--trust-root`` (the caller's ``trust_root``), else
``$TILEPROOF_TRUST_ROOT``, else the tree's own ``.ci/trust-root``, else none (trust on first
use). The first two, and ``--expect-ancestor``, are read by ``gather.given_commit``'s one rule: a
full commit id, or ``file:PATH`` outside the tree naming a pin file (``records.trust.trust_pin``) or a
registry file (its bytes name the root); anything else is refused in one line. It asks
``judge.trust.trust_root.evaluate`` and returns a ``Trusted``, whose ``examine`` gives every
record its standing through ``judge.trust.standing.standing``, the one decision ``status``,
``publish`` and the audit share, and whose ``issues`` says which records' signatures are
findings (the one judgement ``audit`` and ``verify`` print).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from tileproof.gather import given_commit
from tileproof.judge import trust
from tileproof.judge.trust import standing
from tileproof.judge.trust.trust_root import Expect, Root, RootSource, TrustState, evaluate, without_history
from tileproof.records import store
from tileproof.records.errors import RecordError, TileproofError
from tileproof.records.findings import Finding
from tileproof.records.history_check import GitHistory, NoHistory
from tileproof.records.safe_read import read_file
from tileproof.records.store import Examined
from tileproof.records.trust import registry_change, runner_keys
from tileproof.records.trust.runner_keys import RunnerRegistry
from tileproof.records.trust.trust_history import FirstCommit, TrustHistory
from tileproof.records.trust.trust_pin import PIN_ENV, TrustPin, load_pin, parse_pin
from tileproof.runner import git_history


@dataclass(frozen=True)
class Trusted:
    """A tree's trust state, and the facts each record's standing is judged by."""

    state: TrustState
    registry: RunnerRegistry
    """The working tree's registry (what signatures are verified against)."""
    first: Mapping[str, FirstCommit]
    """``runs/<name>.json`` → the commit that first added it."""
    now: datetime
    root: Root | None = None
    """The trust root in force (``choose_root``): where it came from, the commit it names."""

    def first_of(self, record) -> FirstCommit | None:
        """The commit that first added ``runs/<run id>.json``; None when not committed (or no history)."""
        return self.first.get(f"{store.RUNS}/{record.run_id}.json")

    def examine(self, items: Iterable[Examined]) -> list[Examined]:
        """Each record with its standing (``judge.trust.standing.standing``), first commit and the policy in force."""
        out = []
        for item in items:
            first = self.first_of(item.record)
            judged = standing.standing(item.verification, item.record, first, self.state.keys, self.now)
            out.append(Examined(item.record, item.seal, judged, self.state.policy, first))  # replace(), 5x faster
        return out

    def legacy(self, record) -> bool:
        """Whether an unsigned record is from before this tree signed (``judge.trust.standing.legacy``)."""
        return standing.legacy(self.first_of(record), self.state)

    def issues(self, item: Examined) -> list[tuple[str, str]]:
        """The (rule id, reason) pairs an examined record's signature is under the tree's policy
        (``judge.trust.issues``): none when it counts, nor for a legacy unsigned record (first committed
        in an ancestor of the tree's first keyed commit, or not committed at all). The one judgement
        ``audit`` and ``verify`` both print, so a pristine clone is clean for both."""
        return trust.issues(item.verification, trust.effective(self.state.policy), legacy=self.legacy(item.record))


def load(root: Path, trust_root: str | None = None, expect_ancestor: str | None = None,
         history_read: GitHistory | NoHistory | None = None, runners: RunnerRegistry | None = None) -> Trusted:
    """The trust state of the tree at ``root`` (see the module docstring). ``history_read``: the first
    versions ``runner.git_history.read`` gave, when the caller has them already; ``runners``: the tree's
    registry (``lessons/runners.yaml``) as the caller read it, when it examined records under it already."""
    root = Path(root)
    runners = runners if runners is not None else runner_keys.load_registry(root)
    graph = git_history.trust_history(root)
    chosen = choose_root(root, trust_root, graph)
    expect = None
    if expect_ancestor is not None:
        expected = given_commit.commit_of(root, expect_ancestor, "--expect-ancestor")
        expect = Expect(expect_ancestor, expected.commit)
    now = datetime.now(timezone.utc)
    if isinstance(graph, NoHistory):
        return Trusted(without_history(runners, graph.reason, chosen, expect), runners, {}, now, chosen)
    signatures, unreadable = registry_change.load_changes(root)
    state = evaluate(graph, runner_keys.read_optional(root, runner_keys.REGISTRY), signatures, chosen, expect)
    bad = tuple(Finding(file, "registry-signature-invalid", f"{why} (an endorsement must verify; it is never edited)")
                for file, why in unreadable)
    state = dataclasses.replace(state, findings=state.findings + bad)
    return Trusted(state, runners, _first_commits(root, graph, history_read), now, chosen)


def choose_root(root: Path, given: str | None, graph: TrustHistory | NoHistory) -> Root | None:
    """The trust root: the caller's, CI's environment's, the tree's pin, or None (see the module docstring)."""
    source: Literal["--trust-root", "$TILEPROOF_TRUST_ROOT"]
    if given:
        source, value = "--trust-root", given
    elif os.environ.get(PIN_ENV):
        source, value = "$TILEPROOF_TRUST_ROOT", os.environ[PIN_ENV]
    else:
        pin = load_pin(root)
        if pin is None:
            return None
        return _commit_root(root, ".ci/trust-root", pin.commit, pin.why, graph)
    named = given_commit.resolve(root, value, source)
    if isinstance(named, given_commit.GivenFile):
        return _file_root(root, source, named.path, graph)
    return Root(source, value, commit=named.commit if not isinstance(graph, NoHistory) else None)


def _commit_root(root: Path, source: RootSource, rev: str, why: str, graph: TrustHistory | NoHistory) -> Root:
    """A pin's commit (its model holds a full id): looked up as an id alone (``gather.given_commit``); one of the
    commits ``graph`` read (every commit reachable from HEAD) is one without asking git again."""
    if isinstance(graph, NoHistory):
        commit = None
    else:
        commit = rev if rev in graph.parents else git_history.commit_by_id(root, rev)
    return Root(source, rev, commit=commit, why=why)


def _file_root(root: Path, source: RootSource, path: Path, graph: TrustHistory | NoHistory) -> Root:
    """A pin file (``pin_version``) or a registry file (``registry_version``) the reviewer keeps."""
    data = read_file(path, "lesson", str(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RecordError(path, "", "not UTF-8", "give a pin file, a registry file or a commit") from None
    if "registry_version" in text:
        runner_keys.parse_registry(text, str(path))  # a malformed one is one line, as the tree's is
        return Root(source, str(path), registry_sha256=registry_change.digest(data))
    pin: TrustPin = parse_pin(text, str(path))
    return _commit_root(root, source, pin.commit, pin.why, graph)


def _first_commits(root: Path, graph: TrustHistory, history_read: GitHistory | NoHistory | None
                   ) -> dict[str, FirstCommit]:
    found = history_read if history_read is not None else git_history.read(root)
    if not isinstance(found, GitHistory):
        raise TileproofError(f"{root}: git history could be read once and not again ({found.reason})")
    out = {}
    of_commit: dict[str, FirstCommit | None] = {}
    for path, commit in found.record_commits().items():
        if commit not in of_commit:
            of_commit[commit] = graph.first_commit(commit)
        first = of_commit[commit]
        if first is not None:
            out[path] = first
    return out

