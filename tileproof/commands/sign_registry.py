"""``tileproof sign-registry``: endorse the working tree's runner registry with a key the committed one trusts.

The previous registry is ``lessons/runners.yaml`` as ``--base`` (default HEAD) holds it; the
new one is the working tree's. The key (``--key``, else ``$TILEPROOF_SIGNING_KEY``) must be
listed there with ``registry`` among its ``may_sign`` and not revoked. Writes, once,
``lessons/registry-signatures/<new>-<previous>.json`` (``records.trust.registry_change``): commit it
in the same commit as the registry change. When no such key is held any more (every key
lost), nothing can sign: that is a root reset, and docs/keys.md says how to move the trust
root instead. Exit 0 written, 2 refused.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tileproof.commands import add_root
from tileproof.records import store
from tileproof.records.errors import TileproofError
from tileproof.records.safe_read import read_bytes
from tileproof.records.trust import registry_change, runner_keys, signing
from tileproof.runner import git_history

RESET = "every key that could sign is lost: that is a root reset (docs/keys.md, 'Every key lost')"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_root(parser)
    parser.add_argument("--key", type=Path, default=None,
                        help=f"the private key that endorses the change (default: ${signing.KEY_ENV})")
    parser.add_argument("--base", default="HEAD", help="the commit whose registry the change follows (default: HEAD)")


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    key = args.key or (Path(os.environ[signing.KEY_ENV]) if os.environ.get(signing.KEY_ENV) else None)
    if key is None:
        raise TileproofError(f"no key: give --key PATH or set {signing.KEY_ENV} (a key the registry at "
                             f"{args.base} lists with 'registry'; if none is held any more, {RESET})")
    signer = signing.load_signer(key, root)
    shown = runner_keys.REGISTRY.as_posix()
    before = git_history.file_at(root, args.base, shown)
    if before is None:
        raise TileproofError(f"{args.base}: has no {shown} (or is not a commit here); the first registry is "
                             f"trusted as it is, or through a pinned trust root (docs/keys.md)")
    previous = runner_keys.parse_registry(before.decode("utf-8"), f"{shown} at {args.base}")
    after = read_bytes(root, runner_keys.REGISTRY, "lesson")
    runner_keys.parse_registry(after.decode("utf-8"), shown)  # a malformed one is one line here, not later
    if after == before:
        raise TileproofError(f"{shown} is the same as at {args.base}: nothing to endorse")
    entry = previous.keys.get(signer.keyid)
    if entry is None or runner_keys.REGISTRY_KIND not in entry[0].may_sign or entry[0].revoked_since is not None:
        why = ("is not listed" if entry is None else "is revoked" if entry[0].revoked_since is not None
               else f"may sign {', '.join(entry[0].may_sign)}, not {runner_keys.REGISTRY_KIND}")
        raise TileproofError(f"key {signer.keyid[:16]}… {why} in {shown} at {args.base}, so it cannot endorse "
                             f"the change (fix: a key listed there with may_sign: [..., {runner_keys.REGISTRY_KIND}]; "
                             f"if {RESET})")
    statement = registry_change.statement_for(before, after)
    path = root / registry_change.file_for(statement)
    store.write_once(path, (signing.envelope_of(statement, signer).model_dump_json(indent=2) + "\n").encode())
    print(f"sign-registry: {store.rel(root, path)} endorses {shown} (sha256 {statement.new[:16]}…) following "
          f"{args.base}'s (sha256 {statement.previous[:16]}…), signed by {signer.keyid[:16]}… ({entry[0].owner}); "
          f"commit it together with {shown}")
    return 0
