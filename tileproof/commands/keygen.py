"""``tileproof keygen``: make a runner's ed25519 signing key, outside the repository.

Writes the private key (PEM, PKCS#8, mode 0600, never over an existing file) to
``--key``, else ``$TILEPROOF_SIGNING_KEY``, else ``~/.config/tileproof/signing-key.pem``,
and refuses any path inside the repository. Prints the public key, its keyid,
the entry to add to ``lessons/runners.yaml`` and the next steps (docs/keys.md): endorse
the change with a key the registry already trusts (``tileproof sign-registry``), or,
when every such key is lost, the root reset and the pin move. Records are signed once
``TILEPROOF_SIGNING_KEY`` names the key.
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone
from pathlib import Path

import yaml

from tileproof.commands import add_root
from tileproof.records.errors import TileproofError
from tileproof.records.trust import registry_change, runner_keys, signing
from tileproof.records.trust.trust_pin import PIN


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_root(parser)
    parser.add_argument("--key", type=Path, default=None,
                        help=f"private key file (default: ${signing.KEY_ENV}, else {signing.DEFAULT_KEY})")
    parser.add_argument("--owner", default=os.environ.get("USER", "runner"), help="who holds the key")
    parser.add_argument("--may-sign", default=",".join(runner_keys.RUNNER_KINDS),
                        help="what the key may sign, comma-separated: record kinds, and 'registry' for a key that "
                             "may endorse the next registry change (default: every record kind)")


def run(args: argparse.Namespace) -> int:
    path = (args.key or Path(os.environ.get(signing.KEY_ENV) or signing.DEFAULT_KEY)).expanduser()
    signing.refuse_inside(path, args.root)
    kinds = [k.strip() for k in args.may_sign.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(runner_keys.SIGN_KINDS))
    if unknown or not kinds:
        raise TileproofError(f"--may-sign: {', '.join(unknown) or 'nothing'} is not a record kind nor registry "
                             f"(fix: a comma-separated subset of {','.join(runner_keys.SIGN_KINDS)})")
    public = signing.make_key(path).public_key()
    entry = runner_keys.RunnerKey(
        owner=args.owner, keyid=signing.keyid_of(public), public_key=signing.raw_public(public).hex(),
        may_sign=kinds, added=datetime.now(timezone.utc).date(),
    )
    print(f"private key: {path} (mode 600; keep it off the repository)")
    print(f"public key:  {entry.public_key}")
    print(f"keyid:       {entry.keyid}")
    print(f"sign records with it: export {signing.KEY_ENV}={path}")
    print(f"add to {runner_keys.REGISTRY.as_posix()} under runners: (a reviewed commit):")
    print(yaml.safe_dump([entry.model_dump(mode="json", exclude_none=True)], sort_keys=False).rstrip())
    for line in next_steps(path):
        print(f"# {line}")  # YAML comments: the entry above can be copied with them
    return 0


def next_steps(path: Path) -> list[str]:
    """What to do after keygen (docs/keys.md has the whole procedure)."""
    reg, sigs, pin = runner_keys.REGISTRY.as_posix(), registry_change.SIGNATURES.as_posix(), PIN.as_posix()
    return [
        "next steps (docs/keys.md):",
        f"  1. append the entry above to {reg}; set revoked_since on every key whose machine is gone",
        f"  2. a key the committed registry lists with '{runner_keys.REGISTRY_KIND}' is at hand: tileproof "
        f"sign-registry --key THAT_KEY, then commit {reg} and the file it writes under {sigs}/ in one commit",
        f"  3. no such key is held any more (a root reset): commit {reg} alone, review it, then write that "
        f"commit's id and why into {pin} and commit that (the audit reports the move; reviewers who pin "
        f"their own root move theirs)",
        f"  4. export {signing.KEY_ENV}={path}; nox -s audit (0 findings: the new key counts)",
    ]
