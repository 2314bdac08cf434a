"""judge.trust.trust_root as a pure function: commit graphs and registry versions built here, no git.

Each case is a small history: the registry's versions along it, the endorsements committed
beside them, the root the reviewer pins; the assertions are the findings, the keys' trusted
kinds, the revocations history keeps and the changes the report lists.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
import yaml
from signing_keys import entry, new_signer

from tileproof.judge.trust import trust_root
from tileproof.judge.trust.trust_root import Expect, Root
from tileproof.records.trust import registry_change, signing
from tileproof.records.trust.registry_change import SignedChange, digest
from tileproof.records.trust.trust_history import TrustHistory

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
ADMIN, RUNNER, THIEF = new_signer(), new_signer(), new_signer()


def registry_text(*entries, policy: str | None = "signed-only", comment: str = "") -> bytes:
    raw: dict = {"registry_version": 1}
    if policy:
        raw["policy"] = policy
    raw["runners"] = [e.model_dump(mode="json", exclude_none=True) for e in entries]
    return (comment + yaml.safe_dump(raw, sort_keys=False)).encode()


def admin(**kw):
    return entry(ADMIN, owner="lead", may_sign=["compile", "claims", "registry"], **kw)


def runner(**kw):
    return entry(RUNNER, owner="h200", may_sign=["run", "session"], **kw)


def thief(**kw):
    return entry(THIEF, owner="thief", may_sign=["run", "session"], **kw)


def history(versions: list[bytes | None], parents: dict[int, tuple[int, ...]] | None = None,
            pins: dict[int, bytes] | None = None, added: dict[int, list[SignedChange]] | None = None) -> TrustHistory:
    """Commits c0..cN (a chain unless ``parents`` says otherwise), the registry of commit i = versions[i];
    ``added``: commit i → the endorsements it added (an endorsement no commit added is the working tree's)."""
    commits = tuple(c(i) for i in range(len(versions)))
    links = {i: (i - 1,) if i else () for i in range(len(versions))} | (parents or {})
    shas = [digest(v) if v is not None else None for v in versions]
    pin_bytes = pins or {}
    pin_shas = {i: digest(b) for i, b in pin_bytes.items()}
    return TrustHistory(commits=commits, parents={commits[i]: tuple(commits[p] for p in links[i]) for i in links},
                        times={c: T0 + timedelta(minutes=i) for i, c in enumerate(commits)},
                        registry={c: shas[i] for i, c in enumerate(commits)},
                        pin={c: pin_shas.get(i) for i, c in enumerate(commits)},
                        texts={**{s: v for s, v in zip(shas, versions, strict=True) if s and v},
                               **{pin_shas[i]: b for i, b in pin_bytes.items()}},
                        endorsements=_added_in(added or {}))


def _added_in(added: dict[int, list[SignedChange]]) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for i, changes in added.items():
        for change in changes:
            out[change.sha256] = out.get(change.sha256, frozenset()) | {c(i)}
    return out


def endorse(previous: bytes, new: bytes, *signers: signing.Signer) -> SignedChange:
    statement = registry_change.statement_for(previous, new)
    env = signing.envelope_of(statement, signers[0])
    for s in signers[1:]:
        env = env.model_copy(update={"signatures": [*env.signatures, *signing.envelope_of(statement, s).signatures]})
    return SignedChange(registry_change.file_for(statement).as_posix(), statement, env,
                        digest(env.model_dump_json().encode()))


def rules(state) -> list[str]:
    return sorted(f.rule for f in state.findings)


def c(i: int) -> str:
    """Commit i's id (distinct in its first 12 digits, as the report shows them)."""
    return f"{i + 1:02x}" * 20


GENESIS = registry_text(admin(), runner())
PLUS_THIEF = registry_text(admin(), runner(), thief())


def test_without_a_pin_the_first_keyed_registry_is_the_root_and_an_unsigned_addition_is_a_finding():
    h = history([registry_text(policy=None), GENESIS, PLUS_THIEF])
    state = trust_root.evaluate(h, PLUS_THIEF, [])
    assert rules(state) == ["registry-change-unsigned"]
    assert f"commit {c(2)[:12]}" in state.findings[0].reason
    assert THIEF.keyid[:16] in state.findings[0].reason
    assert state.keys[THIEF.keyid].trusted_kinds == frozenset()
    assert ("commit " + c(2)[:12] in \
        state.keys[THIEF.keyid].untrusted_why)
    assert state.keys[RUNNER.keyid].trusted_kinds == {"run", "session"}
    assert state.report.root.startswith(f"the first registry that lists a key, commit {c(1)[:12]}")
    assert [ch.status for ch in state.report.changes] == ["unsigned"]


def test_an_endorsed_addition_is_trusted_and_listed_as_signed():
    h = history([GENESIS, PLUS_THIEF])
    state = trust_root.evaluate(h, PLUS_THIEF, [endorse(GENESIS, PLUS_THIEF, ADMIN)])
    assert rules(state) == []
    assert state.keys[THIEF.keyid].trusted_kinds == {"run", "session"}
    (change,) = state.report.changes
    assert change.status == "signed"
    assert change.signed_by == ADMIN.keyid
    assert "added" in change.what[0]


@pytest.mark.parametrize("case", ["replayed-onto-another-version", "key-without-registry", "revoked-signer",
                                  "signer-granted-unsigned", "wrong-key"])
def test_an_endorsement_that_does_not_count(case):
    """Each is not a key the previous trusted registry held with 'registry', or not this step."""
    versions = [GENESIS, PLUS_THIEF]
    sig = endorse(GENESIS, PLUS_THIEF, ADMIN)
    if case == "replayed-onto-another-version":
        other = registry_text(admin(), runner(), policy=None)
        versions = [GENESIS, other, PLUS_THIEF]  # the endorsement names GENESIS as previous, not `other`
    elif case == "key-without-registry":
        sig = endorse(GENESIS, PLUS_THIEF, RUNNER)
    elif case == "revoked-signer":
        revoked = registry_text(admin(revoked_since=T0), runner())
        after = registry_text(admin(revoked_since=T0), runner(), thief())
        versions, sig = [GENESIS, revoked, after], endorse(revoked, after, ADMIN)
    elif case == "signer-granted-unsigned":
        widened = registry_text(admin(), entry(RUNNER, owner="h200", may_sign=["run", "session", "registry"]))
        after = registry_text(admin(), entry(RUNNER, owner="h200", may_sign=["run", "session", "registry"]), thief())
        versions, sig = [GENESIS, widened, after], endorse(widened, after, RUNNER)
    else:
        sig = endorse(GENESIS, PLUS_THIEF, THIEF)
    state = trust_root.evaluate(history(versions), versions[-1], [sig])
    assert set(rules(state)) & {"registry-change-unsigned", "registry-root-reset"}  # reset: no signer was left
    assert state.keys[THIEF.keyid].trusted_kinds == frozenset()


def test_with_no_key_able_to_sign_an_addition_is_a_root_reset():
    only_runner = registry_text(runner())
    fresh = registry_text(runner(revoked_since=T0), admin())
    state = trust_root.evaluate(history([only_runner, fresh]), fresh, [])
    assert rules(state) == ["registry-root-reset"]
    assert "docs/keys.md" in state.findings[0].reason
    assert state.keys[ADMIN.keyid].trusted_kinds == frozenset()


def test_a_root_reset_is_accepted_by_pinning_its_commit():
    only_runner = registry_text(runner())
    fresh = registry_text(runner(revoked_since=T0), admin())
    h = history([only_runner, fresh, fresh])
    state = trust_root.evaluate(h, fresh, [], Root(".ci/trust-root", c(1), commit=c(1), why="reset"))
    assert rules(state) == []
    assert state.keys[ADMIN.keyid].trusted_kinds == {"compile", "claims", "registry"}
    assert state.report.range.startswith(f"{c(1)[:12]}..{c(2)[:12]} (2 commits")
    assert "from .ci/trust-root: reset" in state.report.root


@pytest.mark.parametrize("change, rule", [
    ("revocation", None), ("fewer-kinds", None), ("comment", None), ("key-removed", None),
    ("wider-kinds", "registry-change-unsigned"), ("revocation-dropped", "registry-loosened")])
def test_what_needs_an_endorsement(change, rule):
    """Tightening (a revocation, fewer kinds, a removed key) and text-only edits need none; a widening and
    a dropped revocation are findings."""
    base = GENESIS
    after = {
        "revocation": registry_text(admin(), runner(revoked_since=T0)),
        "fewer-kinds": registry_text(admin(), entry(RUNNER, owner="h200", may_sign=["run"])),
        "comment": registry_text(admin(), runner(), comment="# a comment\n"),
        "key-removed": registry_text(admin()),
        "wider-kinds": registry_text(admin(), entry(RUNNER, owner="h200", may_sign=["run", "session", "bench"])),
        "revocation-dropped": GENESIS,
    }[change]
    versions = [base, after]
    if change == "revocation-dropped":
        versions = [base, registry_text(admin(), runner(revoked_since=T0)), after]
    state = trust_root.evaluate(history(versions), versions[-1], [])
    assert rules(state) == ([rule] if rule else [])
    if change == "comment":
        assert [ch.status for ch in state.report.changes] == ["text-only"]
    if change == "wider-kinds":
        assert state.keys[RUNNER.keyid].trusted_kinds == {"run", "session"}


def test_revocations_are_permanent_from_the_first_commit_that_lists_them():
    revoked = registry_text(admin(), runner(revoked_since=T0 + timedelta(hours=2)))
    earlier = registry_text(admin(), runner(revoked_since=T0))
    h = history([GENESIS, revoked, GENESIS, earlier])  # revoked, dropped (loosened), revoked again earlier
    state = trust_root.evaluate(h, earlier, [])
    facts = state.keys[RUNNER.keyid]
    assert facts.revoked_in == c(1)
    assert facts.revoked_since == T0
    assert facts.before_revocation == {c(0)}


def test_a_merge_of_an_old_branch_is_not_a_change_and_a_merged_self_addition_still_is():
    """c0 genesis; c1 main adds a key, endorsed; c2 an old branch from c0 adds the thief's key unendorsed;
    c3 merges both: the thief's grant is a finding at c2, once, and the endorsed key stays trusted."""
    second = entry(new_signer(), owner="second", may_sign=["run"])
    main = registry_text(admin(), runner(), second)
    branch = PLUS_THIEF
    merged = registry_text(admin(), runner(), second, thief())
    h = history([GENESIS, main, branch, merged], parents={2: (0,), 3: (1, 2)})
    state = trust_root.evaluate(h, merged, [endorse(GENESIS, main, ADMIN)])
    assert rules(state) == ["registry-change-unsigned"]
    assert f"commit {c(2)[:12]}" in state.findings[0].reason
    assert state.keys[second.keyid].trusted_kinds == {"run"}
    assert not state.keys[THIEF.keyid].trusted_kinds
    clean = trust_root.evaluate(history([GENESIS, main, GENESIS, main], parents={2: (0,), 3: (1, 2)}), main,
                                [endorse(GENESIS, main, ADMIN)])
    assert rules(clean) == []
    assert clean.keys[second.keyid].trusted_kinds == {"run"}


@pytest.mark.parametrize("worktree, rule", [(None, "registry-missing"),
                                            (registry_text(policy=None), "registry-emptied"),
                                            (registry_text(), "registry-emptied")])
def test_the_policy_only_tightens(worktree, rule):
    state = trust_root.evaluate(history([registry_text(policy=None), GENESIS]), worktree, [])
    assert rule in rules(state)
    assert state.policy == "signed-only"


def test_a_tree_that_never_listed_a_key_keeps_the_codes_default():
    empty = registry_text(policy=None)
    state = trust_root.evaluate(history([empty, empty]), empty, [])
    assert rules(state) == []
    assert state.policy is None
    assert state.legacy == {c(0), c(1)}


def test_legacy_commits_are_the_strict_ancestors_of_the_first_keyed_commit():
    empty = registry_text(policy=None)
    h = history([empty, empty, GENESIS, GENESIS, empty], parents={4: (1,)})  # c4: a branch from before the key
    state = trust_root.evaluate(h, GENESIS, [])
    assert state.legacy == {c(0), c(1)}


@pytest.mark.parametrize("root", [Root("--trust-root", "f" * 40, commit=None),
                                  Root("--trust-root", "kept.yaml", registry_sha256="0" * 64)])
def test_a_root_not_in_this_history_trusts_nothing(root):
    state = trust_root.evaluate(history([GENESIS, GENESIS]), GENESIS, [], root)
    assert "trust-root-not-in-history" in rules(state)
    assert all(not k.trusted_kinds for k in state.keys.values())
    assert "NOT IN THIS HISTORY" in state.report.root


def test_a_registry_file_root_is_the_first_commit_with_those_bytes():
    h = history([GENESIS, PLUS_THIEF, PLUS_THIEF])
    kept = Root("--trust-root", "kept.yaml", registry_sha256=digest(PLUS_THIEF))
    state = trust_root.evaluate(h, PLUS_THIEF, [], kept)
    assert rules(state) == []
    assert f"first in commit {c(1)[:12]}" in state.report.root


@pytest.mark.parametrize("expect, ok", [(Expect("v1", c(1)), True), (Expect("gone", "e" * 40), False),
                                        (Expect("typo", None), False)])
def test_expect_ancestor(expect, ok):
    state = trust_root.evaluate(history([GENESIS, GENESIS, GENESIS]), GENESIS, [], expect=expect)
    assert rules(state) == ([] if ok else ["history-rewritten"])
    assert ("is an ancestor of HEAD" in state.report.expect) == ok


def test_every_pin_move_is_listed():
    pin = b"pin_version: 1\ncommit: '" + c(0).encode() + b"'\nwhy: first\n"
    moved = b"pin_version: 1\ncommit: '" + c(1).encode() + b"'\nwhy: reset\n"
    state = trust_root.evaluate(history([GENESIS, GENESIS, GENESIS], pins={1: pin, 2: moved}), GENESIS, [])
    assert [str(m) for m in state.report.pin_moves] == [
        f"{c(1)[:12]}: .ci/trust-root absent -> {c(0)[:12]} (first)",
        f"{c(2)[:12]}: .ci/trust-root {c(0)[:12]} -> {c(1)[:12]} (reset)"]


def test_a_pin_file_rewritten_around_the_same_pin_is_no_move():
    """A commit that only rewrites the pin file's comments is listed as a rewrite of the same pin, never as
    a move from X to X; a later real move is still a move."""
    pin = b"pin_version: 1\ncommit: '" + c(0).encode() + b"'\nwhy: first\n"
    tidied = b"# the pin, reviewed\n" + pin
    moved = b"pin_version: 1\ncommit: '" + c(1).encode() + b"'\nwhy: reset\n"
    state = trust_root.evaluate(history([GENESIS] * 4, pins={1: pin, 2: tidied, 3: moved}), GENESIS, [])
    assert [m.moved for m in state.report.pin_moves] == [True, False, True]
    lines = [line for line in state.report.lines() if line.startswith("pin ")]
    assert lines == [f"pin moved in {c(1)[:12]}: .ci/trust-root absent -> {c(0)[:12]} (first)",
                     f"pin rewritten in {c(2)[:12]}: .ci/trust-root, same pin {c(0)[:12]} (first)",
                     f"pin moved in {c(3)[:12]}: .ci/trust-root {c(0)[:12]} -> {c(1)[:12]} (reset)"]


def test_an_uncommitted_registry_change_is_judged_as_the_working_tree():
    state = trust_root.evaluate(history([GENESIS]), PLUS_THIEF, [])
    assert rules(state) == ["registry-change-unsigned"]
    assert "(working tree)" in state.findings[0].file


def test_without_history_nothing_of_history_is_checked():
    from tileproof.records.trust.runner_keys import parse_registry

    reg = parse_registry(GENESIS.decode(), "r")
    state = trust_root.without_history(reg, "not a git checkout", None, Expect("x", None))
    assert state.history is False
    assert state.legacy is None
    assert rules(state) == ["history-rewritten"]
    assert state.keys[RUNNER.keyid].added == date(2025, 1, 1)
    assert "NOT CHECKED" in state.report.root


# --- revocation by ancestry, and narrowings that stay: the graph shapes a merge or a replay takes ---------

SECOND = new_signer()
"""A second key with 'registry' (K2 of the narrowing cases)."""


def second(kinds=("run", "session", "registry")):
    return entry(SECOND, owner="second lead key", may_sign=list(kinds))


def test_a_revocation_counts_back_only_to_the_ancestors_of_each_commit_that_revoked_it():
    """c1 revokes on the main line, c2 (from c0) revokes on a branch, c3 merges them: only c0, an ancestor of
    both, is before the revocation; c1, c2 and the merge are not, whatever their dates."""
    revoked = registry_text(admin(), runner(revoked_since=T0))
    state = trust_root.evaluate(history([GENESIS, revoked, revoked, revoked], parents={2: (0,), 3: (1, 2)}),
                                revoked, [])
    facts = state.keys[RUNNER.keyid]
    assert facts.revoked_in == c(1)
    assert facts.before_revocation == {c(0)}


def test_a_revoked_keys_endorsement_on_a_branch_older_than_its_revocation_counts_for_nothing():
    """c1 revokes the admin key; c2, on a branch from c0, adds the thief's key endorsed by the admin key (added
    there, where the key was not revoked yet); c3 merges both. c2 is not an ancestor of c1: a finding at c2."""
    revoked = registry_text(admin(revoked_since=T0), runner())
    merged = registry_text(admin(revoked_since=T0), runner(), thief())
    sig = endorse(GENESIS, PLUS_THIEF, ADMIN)
    h = history([GENESIS, revoked, PLUS_THIEF, merged], parents={2: (0,), 3: (1, 2)}, added={2: [sig]})
    state = trust_root.evaluate(h, merged, [sig])
    assert rules(state) == ["registry-change-unsigned"]
    assert f"commit {c(2)[:12]} grants" in state.findings[0].reason
    assert f"revoked in commit {c(1)[:12]}" in state.findings[0].reason
    assert state.keys[THIEF.keyid].trusted_kinds == frozenset()
    before = trust_root.evaluate(history([GENESIS, PLUS_THIEF, merged], added={1: [sig]}), merged, [sig])
    assert rules(before) == []  # endorsed before the revocation, in an ancestor of it: it stands
    assert before.keys[THIEF.keyid].trusted_kinds == {"run", "session"}


def test_an_endorsement_a_revoked_key_signed_after_its_revocation_counts_for_nothing():
    """c1 adds the thief's key unendorsed (a finding); c2 revokes the admin key; an endorsement of c1's change by
    the admin key committed only after that (c3) does not make c1's grant count. Added in c1: it does."""
    revoked = registry_text(admin(revoked_since=T0), runner(), thief())
    sig = endorse(GENESIS, PLUS_THIEF, ADMIN)
    late = trust_root.evaluate(history([GENESIS, PLUS_THIEF, revoked, revoked], added={3: [sig]}), revoked, [sig])
    assert rules(late) == ["registry-change-unsigned"]
    assert late.keys[THIEF.keyid].trusted_kinds == frozenset()
    beside = trust_root.evaluate(history([GENESIS, PLUS_THIEF, revoked, revoked], added={1: [sig]}), revoked, [sig])
    assert rules(beside) == []


V0 = GENESIS
V1 = registry_text(admin(), runner(), second())
V2 = registry_text(admin(), runner(), second(["run"]))


def test_an_old_endorsement_replayed_after_a_narrowing_grants_nothing_back():
    """V0 -> V1 (endorsed, added in c1), V2 narrows K2 to run, V3 = V0's bytes (K2 removed), V4 = V1's bytes:
    the V0 -> V1 endorsement matches again, and grants nothing back."""
    sig = endorse(V0, V1, ADMIN)
    state = trust_root.evaluate(history([V0, V1, V2, V0, V1], added={1: [sig]}), V1, [sig])
    assert rules(state) == ["registry-change-unsigned"]
    assert f"commit {c(4)[:12]} grants back" in state.findings[0].reason
    assert f"which commit {c(2)[:12]}, {c(3)[:12]} took away" in state.findings[0].reason
    assert state.keys[SECOND.keyid].trusted_kinds == frozenset()
    assert "took" in state.keys[SECOND.keyid].untrusted_why
    assert [ch.status for ch in state.report.changes] == ["signed", "tightens-only", "tightens-only", "replayed"]


def test_a_branch_older_than_a_narrowing_merged_after_it_grants_nothing_back():
    """c2 narrows K2; c3, a branch from c1 (where K2 had every kind), merges into c2 keeping V1's bytes: the
    merge's side parent trusts K2 with all its kinds, but it predates the narrowing."""
    sig = endorse(V0, V1, ADMIN)
    state = trust_root.evaluate(history([V0, V1, V2, V1, V1], parents={3: (1,), 4: (2, 3)}, added={1: [sig]}),
                                V1, [sig])
    assert rules(state) == ["registry-change-unsigned"]
    assert f"commit {c(4)[:12]} grants back" in state.findings[0].reason
    assert state.keys[SECOND.keyid].trusted_kinds == {"run"}
    kept = trust_root.evaluate(history([V0, V1, V2, V1, V2], parents={3: (1,), 4: (2, 3)}, added={1: [sig]}),
                               V2, [sig])
    assert rules(kept) == []  # the merge keeps the narrowing: nothing to say
    assert kept.keys[SECOND.keyid].trusted_kinds == {"run"}


def test_an_endorsement_added_after_a_narrowing_grants_it_back_and_a_merge_keeps_that():
    """c3 grants K2's kinds back with a new endorsement (V2 -> V1, added in c3); c4, a branch from c2 (the
    narrowing) with V2 reworded, merges with c3: c3 descends from the narrowing, so what it grants stands."""
    sig, again = endorse(V0, V1, ADMIN), endorse(V2, V1, ADMIN)
    reworded = b"# reworded\n" + V2
    h = history([V0, V1, V2, V1, reworded, V1], parents={4: (2,), 5: (3, 4)}, added={1: [sig], 3: [again]})
    state = trust_root.evaluate(h, V1, [sig, again])
    assert rules(state) == []
    assert state.keys[SECOND.keyid].trusted_kinds == {"run", "session", "registry"}
    uncommitted = trust_root.evaluate(history([V0, V1, V2], added={1: [sig]}), V1, [sig, again])
    assert rules(uncommitted) == []  # an endorsement in the working tree is added after every commit
