"""``tileproof verify``: every record's signature against the runner registry, and git history.

Prints one line per record whose signature is a finding under the trust policy
(``judge.trust.POLICY``, tightened by the registry and its history), the count of each
trust word, the trust root's findings and range (``gather.trust_state``, ``--trust-root``
as for the audit), and whether every file ever committed under runs/ and evidence/ is
still there unchanged. Exit 0 when no record's signature is a finding, the trust root's
checks find nothing and history was checked clean; 1 otherwise (no history to check is
not a pass). Unsigned records first committed before the tree's first key (legacy) or not
committed yet count toward nothing and are no finding, as in the audit: both ask
``Trusted.issues``, so a pristine clone passes both. The same functions back the audit's
trust and history findings (one history read, as there); this command shows them on their
own, every line through ``records.errors.one_line``.
"""

from __future__ import annotations

import argparse
from collections import Counter

from tileproof.commands import add_root
from tileproof.gather import trust_state
from tileproof.judge import trust
from tileproof.records import store
from tileproof.records.errors import one_line
from tileproof.records.history_check import check as check_history
from tileproof.records.trust import runner_keys
from tileproof.runner import git_history


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_root(parser)
    parser.add_argument("--trust-root", default=None, metavar="COMMIT|file:PATH",
                        help="the trust root (as for tileproof audit)")


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    history_read = git_history.read(root)
    trusted = trust_state.load(root, args.trust_root, history_read=history_read)
    reg = trusted.registry
    paths = store.record_files(root)
    loaded = list(zip((store.rel(root, p) for p in paths),
                      trusted.examine(store.read_record(p, reg) for p in paths), strict=True))
    policy = trust.effective(trusted.state.policy)
    issues = {file: trusted.issues(x) for file, x in loaded}
    bad = 0
    for file, found in issues.items():
        for rule, reason in found:
            print(one_line(f"{file}: {rule}: {reason}"))
            bad += 1
    for finding in trusted.state.findings:
        print(finding)
        bad += 1
    words = Counter(x.trust for _, x in loaded)
    legacy = sum(1 for file, x in loaded if not trust.counts(x.trust, policy) and not issues[file])
    print(f"records: {len(loaded)}; " + ", ".join(f"{n} {w}" for w, n in sorted(words.items()))
          + (f" ({legacy} unsigned legacy or uncommitted: they count toward nothing, no finding)" if legacy else "")
          + f"; policy {policy}; {len(reg.runners)} runner keys in " + runner_keys.REGISTRY.as_posix())
    for line in trusted.state.report.lines():
        print(line)
    report = check_history(history_read)
    for finding in report.findings:
        print(finding)
    print(one_line(f"history: {report.status}: {report.reason}"))
    return 0 if not bad and report.status == "checked" and not report.findings else 1
