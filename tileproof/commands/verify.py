"""``tileproof verify``: every record's signature against the runner registry, and git history.

Prints one line per record that does not count under the trust policy
(``judge.trust.POLICY``, tightened by the registry and its history), the count of each
trust word, the trust root's findings and range (``gather.trust_state``, ``--trust-root``
as for the audit), and whether every file ever committed under runs/ and evidence/ is
still there unchanged. Exit 0 when every record counts, the trust root's checks find
nothing and history was checked clean; 1 otherwise (no history to check is not a pass).
The same functions back the audit's trust and history findings; this command shows them
on their own.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from tileproof.gather import trust_state
from tileproof.judge import trust
from tileproof.records import registry, store
from tileproof.runner import history


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: cwd)")
    parser.add_argument("--trust-root", default=None, metavar="COMMIT|FILE",
                        help="the trust root (as for tileproof audit)")


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    trusted = trust_state.load(root, args.trust_root)
    reg = trusted.registry
    paths = store.record_files(root)
    loaded = list(zip(paths, trusted.examine(store.read_record(p, reg) for p in paths), strict=True))
    policy = trust.effective(trusted.state.policy)
    bad = 0
    for path, x in loaded:
        for rule, reason in trust.issues(x.verification, policy, legacy=trusted.legacy(x.record)):
            print(f"{store.rel(root, path)}: {rule}: {reason}")
            bad += 1
    for file, rule, reason in trusted.state.findings:
        print(f"{file}: {rule}: {reason}")
        bad += 1
    words = Counter(x.trust for _, x in loaded)
    print(f"records: {len(loaded)}; " + ", ".join(f"{n} {w}" for w, n in sorted(words.items()))
          + f"; policy {policy}; {len(reg.runners)} runner keys in " + registry.REGISTRY.as_posix())
    for line in trusted.state.report.lines():
        print(line)
    report = history.check_repository(root)
    for finding in report.findings:
        print(finding)
    print(f"history: {report.status}: {report.reason}")
    return 0 if not bad and report.status == "checked" and not report.findings else 1
