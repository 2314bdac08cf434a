"""Registry changes and the trust root on disk: the endorsement's format (a generic DSSE/in-toto
reader takes it), ``tileproof sign-registry`` refusing what it cannot sign, malformed endorsement
files, duplicate YAML keys, and where the audit takes its trust root from."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from signing_keys import entry, registry_of, write_registry

from tileproof.__main__ import main
from tileproof.gather import trust_state
from tileproof.records.errors import RecordError, TileproofError
from tileproof.records.trust import registry_change, runner_keys, signing


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.invalid", "-c", "user.name=t",
                           "-c", "commit.gpgsign=false", *args], check=True, capture_output=True, text=True).stdout


def key_file(tmp_path: Path, name: str) -> tuple[Path, signing.Signer]:
    private = Ed25519PrivateKey.generate()
    path = tmp_path / f"{name}.pem"
    path.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    path.chmod(0o600)
    return path, signing.Signer(private)


@pytest.fixture
def repo(tmp_path):
    """A repository whose committed registry lists an admin key (may sign 'registry') and a runner key."""
    root = tmp_path / "repo"
    root.mkdir()
    admin_path, admin = key_file(tmp_path, "admin")
    runner_path, runner = key_file(tmp_path, "runner")
    write_registry(root, registry_of(entry(admin, owner="lead", may_sign=["claims", "registry"]),
                                     entry(runner, owner="h200", may_sign=["run"])))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "registry")
    return root, admin_path, admin, runner_path, runner


def test_sign_registry_writes_an_endorsement_a_generic_dsse_reader_verifies(repo, tmp_path, capsys):
    root, admin_path, admin, _rp, _r = repo
    before = (root / runner_keys.REGISTRY).read_bytes()
    _np, newcomer = key_file(tmp_path, "new")
    reg = runner_keys.load_registry(root)
    write_registry(root, registry_of(*reg.runners, entry(newcomer, owner="second h200", may_sign=["run"])))
    assert main(["sign-registry", "--root", str(root), "--key", str(admin_path)]) == 0
    out = capsys.readouterr().out
    (written,) = (root / registry_change.SIGNATURES).iterdir()
    assert str(written.relative_to(root)) in out
    env = json.loads(written.read_text())
    statement = json.loads(base64.b64decode(env["payload"]))
    assert env["payloadType"] == "application/vnd.in-toto+json"
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "urn:tileproof:registry-change:v1"
    after = (root / runner_keys.REGISTRY).read_bytes()
    assert statement["subject"] == [{"name": "lessons/runners.yaml",
                                     "digest": {"sha256": registry_change.digest(after)}}]
    assert statement["predicate"]["previous"]["digest"]["sha256"] == registry_change.digest(before)
    from nacl.signing import VerifyKey

    body = base64.b64decode(env["payload"])
    VerifyKey(signing.raw_public(admin.public)).verify(signing.pae(env["payloadType"], body),
                                                       base64.b64decode(env["signatures"][0]["sig"]))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a second runner, endorsed")
    state = trust_state.load(root).state
    assert state.findings == ()
    assert state.keys[newcomer.keyid].trusted_kinds == {"run"}
    assert main(["sign-registry", "--root", str(root), "--key", str(admin_path)]) == 2  # nothing changed since
    assert "nothing to endorse" in capsys.readouterr().err


@pytest.mark.parametrize("which, why", [("runner", "may sign run, not registry"), ("stranger", "is not listed")])
def test_sign_registry_refuses_a_key_that_cannot_endorse(repo, tmp_path, capsys, which, why):
    root, _ap, _a, runner_path, _r = repo
    key = runner_path if which == "runner" else key_file(tmp_path, "stranger")[0]
    (root / runner_keys.REGISTRY).write_text((root / runner_keys.REGISTRY).read_text() + "# edited\n")
    assert main(["sign-registry", "--root", str(root), "--key", str(key)]) == 2
    err = capsys.readouterr().err
    assert why in err
    assert "docs/keys.md" in err
    assert len(err.strip().splitlines()) == 1
    assert not (root / registry_change.SIGNATURES).exists()


def test_a_malformed_endorsement_file_is_a_finding(repo, capsys):
    root = repo[0]
    folder = root / registry_change.SIGNATURES
    folder.mkdir(parents=True)
    (folder / "x.json").write_text('{"payloadType": "application/vnd.in-toto+json", "payload": "e30=", '
                                   '"signatures": []}')
    (folder / "notes.txt").write_text("hello\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "junk")
    assert main(["audit", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "lessons/registry-signatures/x.json: registry-signature-invalid:" in out
    assert "lessons/registry-signatures/notes.txt: registry-signature-invalid:" in out


@pytest.mark.parametrize("text, field", [
    ("registry_version: 1\nrunners: []\nrunners: []\n", "runners"),
    ("registry_version: 1\nrunners:\n- owner: a\n  owner: b\n", "runners.0.owner"),
], ids=["top-level", "inside-an-entry"])
def test_a_key_written_twice_is_one_line(tmp_path, text, field):
    (tmp_path / "lessons").mkdir()
    (tmp_path / runner_keys.REGISTRY).write_text(text)
    with pytest.raises(RecordError) as e:
        runner_keys.load_registry(tmp_path)
    msg = str(e.value)
    assert msg.startswith(f"lessons/runners.yaml: {field}: written twice (line ")
    assert "\n" not in msg


def test_the_trust_root_comes_from_the_command_line_then_the_environment_then_the_trees_pin(repo, monkeypatch,
                                                                                         tmp_path):
    root = repo[0]
    head = git(root, "rev-parse", "HEAD").strip()
    monkeypatch.delenv("TILEPROOF_TRUST_ROOT", raising=False)
    assert trust_state.choose_root(root, None, trust_state.git_history.trust_history(root)) is None
    (root / ".ci").mkdir()
    (root / ".ci" / "trust-root").write_text(f"pin_version: 1\ncommit: '{head}'\nwhy: reviewed\n")
    graph = trust_state.git_history.trust_history(root)
    pinned = trust_state.choose_root(root, None, graph)
    assert (pinned.source, pinned.commit, pinned.why) == (".ci/trust-root", head, "reviewed")
    monkeypatch.setenv("TILEPROOF_TRUST_ROOT", head)
    assert trust_state.choose_root(root, None, graph).source == "$TILEPROOF_TRUST_ROOT"
    kept = tmp_path / "kept-runners.yaml"
    kept.write_bytes((root / runner_keys.REGISTRY).read_bytes())
    given = trust_state.choose_root(root, f"file:{kept}", graph)
    assert given.source == "--trust-root"
    assert given.registry_sha256 == registry_change.digest(kept.read_bytes())
    pin_file = tmp_path / "my-pin"
    pin_file.write_text(f"pin_version: 1\ncommit: '{head}'\nwhy: mine\n")
    assert trust_state.choose_root(root, f"file:{pin_file}", graph).commit == head
    bad = tmp_path / "bad-pin"
    bad.write_text("pin_version: 1\ncommit: HEAD\nwhy: x\n")
    with pytest.raises(RecordError, match="commit"):
        trust_state.choose_root(root, f"file:{bad}", graph)
    for name in ("HEAD", "main", head[:12], str(kept)):  # a ref, an abbreviation, a bare path: one line each
        monkeypatch.setenv("TILEPROOF_TRUST_ROOT", name)
        with pytest.raises(TileproofError, match=r"^\$TILEPROOF_TRUST_ROOT .*\(fix: (pass|for that file)"):
            trust_state.choose_root(root, None, graph)


def test_history_names_every_commit_that_added_an_endorsements_bytes(repo):
    """``git_history.trust_history``'s endorsements: a file under lessons/registry-signatures/ by the sha256 of
    its bytes → the commits that added them: on a side branch (and the merge that brought them, against the
    other parent), re-added after a deletion, and brought in by a merge that neither parent had (an evil merge)."""
    root = repo[0]
    folder = root / registry_change.SIGNATURES
    folder.mkdir(parents=True)
    (folder / "a.json").write_text("first\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a")
    first = git(root, "rev-parse", "HEAD").strip()
    trunk = git(root, "rev-parse", "--abbrev-ref", "HEAD").strip()
    git(root, "checkout", "-q", "-b", "side")
    (folder / "b.json").write_text("second\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "b, on a branch")
    side = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", trunk)
    git(root, "rm", "-q", str(folder / "a.json"))
    git(root, "commit", "-q", "-m", "a removed")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.json").write_text("first\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a again")
    again = git(root, "rev-parse", "HEAD").strip()
    git(root, "merge", "-q", "--no-ff", "--no-commit", "side")
    (folder / "c.json").write_text("third\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "merge side, and c")
    merge = git(root, "rev-parse", "HEAD").strip()
    found = trust_state.git_history.trust_history(root).endorsements
    sha = {name: registry_change.digest(text.encode()) for name, text in (("a", "first\n"), ("b", "second\n"),
                                                                           ("c", "third\n"))}
    assert found[sha["a"]] == {first, again}
    assert found[sha["b"]] == {side, merge}
    assert found[sha["c"]] == {merge}
