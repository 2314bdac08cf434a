"""``tileproof keygen``: make a runner's ed25519 signing key, outside the repository.

Writes the private key (PEM, PKCS#8, mode 0600, never over an existing file) to
``--key``, else ``$TILEPROOF_SIGNING_KEY``, else ``~/.config/tileproof/signing-key.pem``,
and refuses any path inside the repository. Prints the public key, its keyid
and the entry to add to ``lessons/runners.yaml`` in a reviewed commit; records
are signed once ``TILEPROOF_SIGNING_KEY`` names the key.
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone
from pathlib import Path

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tileproof.records import registry, signing
from tileproof.records.errors import TileproofError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: cwd)")
    parser.add_argument("--key", type=Path, default=None,
                        help=f"private key file (default: ${signing.KEY_ENV}, else {signing.DEFAULT_KEY})")
    parser.add_argument("--owner", default=os.environ.get("USER", "runner"), help="who holds the key")
    parser.add_argument("--may-sign", default=",".join(registry.RUNNER_KINDS),
                        help="record kinds the key may sign, comma-separated (default: all)")


def run(args: argparse.Namespace) -> int:
    path = (args.key or Path(os.environ.get(signing.KEY_ENV) or signing.DEFAULT_KEY)).expanduser()
    signing.refuse_inside(path, args.root)
    private = Ed25519PrivateKey.generate()
    public = private.public_key()
    kinds = [k.strip() for k in args.may_sign.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(registry.RUNNER_KINDS))
    if unknown or not kinds:
        raise TileproofError(f"--may-sign: {', '.join(unknown) or 'nothing'} is not a record kind "
                             f"(fix: a comma-separated subset of {','.join(registry.RUNNER_KINDS)})")
    entry = registry.RunnerKey(
        owner=args.owner, keyid=signing.keyid_of(public), public_key=signing.raw_public(public).hex(),
        may_sign=kinds, added=datetime.now(timezone.utc).date(),
    )
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise TileproofError(f"{path}: already exists; a key is never overwritten "
                             f"(fix: choose another --key, or revoke the old key first)") from None
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    print(f"private key: {path} (mode 600; keep it off the repository)")
    print(f"public key:  {entry.public_key}")
    print(f"keyid:       {entry.keyid}")
    print(f"sign records with it: export {signing.KEY_ENV}={path}")
    print(f"add to {registry.REGISTRY.as_posix()} under runners: (a reviewed commit):")
    print(yaml.safe_dump([entry.model_dump(mode="json", exclude_none=True)], sort_keys=False).rstrip())
    return 0
