"""The tamper suite, continued: revocations and narrowings that a merge or a replay tried to dodge.

Each attack is built as a committer without a key builds it, on the signed tree of ``test_tamper``: real
commits, a side branch rooted before the change it dodges, commit dates set back (``GIT_AUTHOR_DATE``,
``GIT_COMMITTER_DATE``), a real merge (its conflict resolved by hand where git raises one), endorsements
written by ``tileproof sign-registry`` with real keys, records signed by them; then ``publish`` and
``audit`` through the command line. Each has a control that differs only in the order of the commits
(or in the endorsement being a new one), which passes.
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import test_tamper
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from test_tamper import (
    LATER,
    RUNNER,
    SOFTMAX,
    _pin,
    add_key,
    audit_cmd,
    cli,
    commit,
    fake_h200_softmax,
    git,
    head_of,
    publish_cmd,
)

from tileproof.records import lessons
from tileproof.records.trust import signing
from tileproof.records.trust.runner_keys import REGISTRY

signed_template, signed_tree = test_tamper.signed_template, test_tamper.signed_tree
"""The signed tree of the tamper suite (its fixtures, shared)."""

BACKDATED = LATER + timedelta(minutes=5)
"""The side branch's commit dates: before every commit of the main line (which are made now)."""


def key_file(folder: Path, name: str) -> tuple[Path, signing.Signer]:
    """A private key kept outside the repository (as keygen writes it), and its signer."""
    private = Ed25519PrivateKey.generate()
    path = folder / f"{name}.pem"
    path.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    path.chmod(0o600)
    return path, signing.Signer(private)


def commit_at(root: Path, when: datetime, message: str, *paths: str) -> None:
    """A commit whose author and committer dates are ``when`` (the committer's claim, set back)."""
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S+0000")
    env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    for args in (("add", *(paths or ("-A",))), ("commit", "-q", "-m", message)):
        subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.invalid", "-c", "user.name=t",
                        "-c", "commit.gpgsign=false", *args], check=True, capture_output=True, env=env)


def branch_of(root: Path) -> str:
    return subprocess.run(["git", "-C", str(root), "rev-parse", "--abbrev-ref", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def merge(root: Path, branch: str, registry: bytes | None = None) -> None:
    """``git merge --no-ff branch``; a conflict in the registry (both sides edited it) is resolved by taking
    every entry of both, the main line's where both have one (its revocation kept). ``registry``: the bytes the
    merge commits instead (a resolution a committer chose)."""
    done = subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.invalid", "-c", "user.name=t",
                           "-c", "commit.gpgsign=false", "merge", "--no-ff", "--no-commit", branch],
                          capture_output=True, text=True)
    if done.returncode != 0:
        ours, theirs = (yaml.safe_load(subprocess.run(["git", "-C", str(root), "show", f"{side}:{REGISTRY}"],
                                                      capture_output=True, text=True, check=True).stdout)
                        for side in ("HEAD", branch))
        known = {r["keyid"] for r in ours["runners"]}
        ours["runners"] += [r for r in theirs["runners"] if r["keyid"] not in known]
        (root / REGISTRY).write_text(yaml.safe_dump(ours, sort_keys=False))
    if registry is not None:
        (root / REGISTRY).write_bytes(registry)
    commit(root, f"merge {branch}")


def sign_registry(root: Path, key: Path, capsys) -> None:
    code, out = cli(capsys, "sign-registry", "--root", str(root), "--key", str(key))
    assert code == 0, out


def revoke(root: Path, keyid: str, since: datetime) -> None:
    raw = yaml.safe_load((root / REGISTRY).read_text())
    for r in raw["runners"]:
        if r["keyid"] == keyid:
            r["revoked_since"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    (root / REGISTRY).write_text(yaml.safe_dump(raw, sort_keys=False))
    commit(root, f"revoke key {keyid[:8]} (leaked)", str(REGISTRY))


def set_kinds(root: Path, keyid: str, kinds: list[str]) -> None:
    raw = yaml.safe_load((root / REGISTRY).read_text())
    for r in raw["runners"]:
        if r["keyid"] == keyid:
            r["may_sign"] = kinds
    (root / REGISTRY).write_text(yaml.safe_dump(raw, sort_keys=False))


def registry_key(root: Path, folder: Path) -> tuple[Path, signing.Signer]:
    """The lead's key with 'registry', made the trust root by docs/keys.md's root reset (pinned)."""
    pem, lead = key_file(folder, "lead")
    add_key(root, lead, may_sign=["compile", "claims", "registry"], owner="lead's CPU build key")
    commit(root, "runner registry: root reset, the lead's key", str(REGISTRY))
    _pin(root, head_of(root))
    commit(root, "move the trust root to the reset", ".ci")
    return pem, lead


def published(root: Path) -> bool:
    return lessons.load(root, SOFTMAX).front.status == "published"


@pytest.mark.parametrize("merged", ["after-the-revocation", "before-the-revocation"])
def test_cli_revoked_runner_key_records_on_a_branch_older_than_its_revocation(signed_tree, capsys, merged):
    """The H200 key leaked and is revoked in commit X. Its thief signs a passing run dated before
    ``revoked_since``, commits it on a branch rooted before X (commit dates set back before X's), and merges
    that branch after X: the record's first commit is not an ancestor of X, so it counts for nothing, whatever
    its dates. Control: the same branch merged before the revocation is history the revocation vouches for."""
    root, _ = signed_tree
    trunk = branch_of(root)
    git(root, "checkout", "-q", "-b", "side")
    path = fake_h200_softmax(root, RUNNER)  # dated LATER, an hour before revoked_since
    commit_at(root, BACKDATED, "H200 session 20251129T130000Z (softmax)")
    git(root, "checkout", "-q", trunk)
    if merged == "after-the-revocation":
        revoke(root, RUNNER.keyid, LATER + timedelta(hours=1))
        merge(root, "side")
    else:
        merge(root, "side")
        revoke(root, RUNNER.keyid, LATER + timedelta(hours=1))
    code, out = publish_cmd(root, SOFTMAX, capsys)
    if merged == "before-the-revocation":
        assert code == 0, out
        assert published(root)
        assert audit_cmd(root, capsys)[0] == 0
        return
    assert code == 1, out
    assert "signature revoked" in out, out
    assert not published(root)
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert f"runs/{path.name}: record-revoked-key:" in out, out
    assert "not an ancestor" in out, out
    assert "lessons/01-vector-add.md" not in out, "records committed before the revocation still count"


@pytest.mark.parametrize("merged", ["after-the-revocation", "before-the-revocation"])
def test_cli_revoked_registry_key_endorses_on_a_branch_older_than_its_revocation(signed_tree, capsys, tmp_path,
                                                                                  merged):
    """The lead's registry key K leaked and is revoked in commit X. On a branch rooted before X, with commit
    dates set back, the thief adds their own key K3 endorsed by K (``sign-registry``: K was not revoked there)
    and signs a fake H200 run with K3; the branch is merged after X (the registry's conflict resolved). The
    endorsement's change is not an ancestor of X: K3 counts for nothing. Control: merged before X."""
    root, _ = signed_tree
    lead_pem, lead = registry_key(root, tmp_path)
    trunk = branch_of(root)
    git(root, "checkout", "-q", "-b", "side")
    thief = key_file(tmp_path, "k3")[1]
    add_key(root, thief, owner="an H200 runner of mine")
    sign_registry(root, lead_pem, capsys)
    commit_at(root, BACKDATED, "runner registry: one more H200 runner, endorsed", "lessons")
    path = fake_h200_softmax(root, thief, board="H200-second")  # its own machine
    commit_at(root, BACKDATED + timedelta(minutes=5), "H200 session 20251129T130000Z (softmax)")
    git(root, "checkout", "-q", trunk)
    if merged == "after-the-revocation":
        revoke(root, lead.keyid, LATER)
        merge(root, "side")
    else:
        merge(root, "side")
        revoke(root, lead.keyid, LATER)
    code, out = publish_cmd(root, SOFTMAX, capsys)
    if merged == "before-the-revocation":
        assert code == 0, out
        assert published(root)
        assert audit_cmd(root, capsys)[0] == 0
        return
    assert code == 1, out
    assert not published(root)
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert "lessons/runners.yaml: registry-change-unsigned:" in out, out
    assert thief.keyid[:16] in out, out
    assert f"runs/{path.name}: record-unendorsed-key:" in out, out


@pytest.mark.parametrize("how", ["old-endorsement-replayed", "old-branch-merged", "control-new-endorsement"])
def test_cli_a_narrowed_key_gets_its_kinds_back(signed_tree, capsys, tmp_path, how):
    """V0 -> V1 grants K2 ``run, session, registry`` (endorsed by the lead); V2 narrows K2 to ``run`` (a
    tightening: no endorsement). K2's holder wants ``registry`` back, to endorse a key of their own: by
    committing V0's bytes then V1's (the V0 -> V1 endorsement matches again), or by merging a branch rooted at
    V1 and keeping V1 as the merge's registry. A narrowing is permanent: neither grants anything back, so the
    key K2 endorses counts for nothing. Control: the lead endorses the same grant anew after V2."""
    root, _ = signed_tree
    lead_pem, lead = registry_key(root, tmp_path)
    v0 = (root / REGISTRY).read_bytes()
    k2_pem, k2 = key_file(tmp_path, "k2")
    add_key(root, k2, may_sign=["run", "session", "registry"], owner="second lead key")
    sign_registry(root, lead_pem, capsys)
    commit(root, "runner registry: a second key with registry, endorsed", "lessons")
    v1 = (root / REGISTRY).read_bytes()
    trunk = branch_of(root)
    git(root, "branch", "old")
    set_kinds(root, k2.keyid, ["run"])
    commit(root, "runner registry: K2 may sign runs only", str(REGISTRY))
    if how == "old-endorsement-replayed":
        (root / REGISTRY).write_bytes(v0)
        commit(root, "runner registry: tidy", str(REGISTRY))
        (root / REGISTRY).write_bytes(v1)
        commit(root, "runner registry: as before", str(REGISTRY))
    elif how == "old-branch-merged":
        git(root, "checkout", "-q", "old")
        (root / "NOTES.md").write_text("notes\n")
        commit_at(root, BACKDATED, "notes", "NOTES.md")
        git(root, "checkout", "-q", trunk)
        merge(root, "old", registry=v1)
    else:
        (root / REGISTRY).write_bytes(v1)
        sign_registry(root, lead_pem, capsys)
        commit(root, "runner registry: K2 may sign sessions and the registry again, endorsed", "lessons")
    mine = key_file(tmp_path, "k4")[1]
    add_key(root, mine, owner="an H200 runner of mine")
    sign_registry(root, k2_pem, capsys)
    commit(root, "runner registry: one more H200 runner, endorsed by K2", "lessons")
    path = fake_h200_softmax(root, mine, board="H200-second")
    commit(root, "H200 session 20251129T130000Z (softmax)")
    code, out = publish_cmd(root, SOFTMAX, capsys)
    if how == "control-new-endorsement":
        assert code == 0, out
        assert published(root)
        code, out = audit_cmd(root, capsys)
        assert code == 0, out
        assert f"signed by {lead.keyid[:16]}" in out and f"signed by {k2.keyid[:16]}" in out, out
        return
    assert code == 1, out
    assert not published(root)
    code, out = audit_cmd(root, capsys)
    assert code == 1, out
    assert "lessons/runners.yaml: registry-change-unsigned:" in out, out
    assert f"runs/{path.name}: record-unendorsed-key:" in out, out
    assert "took away" in out, out
