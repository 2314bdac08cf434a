"""``tileproof verify``: every record's signature against the runner registry, and git history.

Prints one line per record whose signature is a finding under the trust policy
(``judge.trust.POLICY``), the count of each trust word, and whether every file
ever committed under runs/ and evidence/ is still there unchanged. Exit 0 when
no record's signature is a finding and history was checked clean; 1 otherwise (no
history to check is not a pass). Unsigned records first committed before the tree's
first key (legacy) or not committed yet count toward nothing and are no finding, as
in the audit: both ask ``gather.standing.trust_issues``, so a pristine clone passes
both. The same functions back the audit's trust and history findings; this command
shows them on their own.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from tileproof.gather.standing import trust_issues
from tileproof.judge import trust
from tileproof.records import registry, store
from tileproof.records.errors import one_line
from tileproof.runner import history


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: cwd)")


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    reg = registry.load_registry(root)
    loaded = [(store.rel(root, p), store.read_record(p, reg)) for p in store.record_files(root)]
    policy = trust.effective(reg.in_force)
    issues = trust_issues(root, {file: x.verification for file, x in loaded}, policy)
    bad = 0
    for file, found in issues.items():
        for rule, reason in found:
            print(one_line(f"{file}: {rule}: {reason}"))
            bad += 1
    words = Counter(x.trust for _, x in loaded)
    legacy = sum(1 for file, x in loaded if not trust.counts(x.trust, policy) and not issues[file])
    print(f"records: {len(loaded)}; " + ", ".join(f"{n} {w}" for w, n in sorted(words.items()))
          + (f" ({legacy} unsigned legacy or uncommitted: they count toward nothing, no finding)" if legacy else "")
          + f"; policy {policy}; {len(reg.runners)} runner keys in " + registry.REGISTRY.as_posix())
    report = history.check_repository(root)
    for finding in report.findings:
        print(finding)
    print(f"history: {report.status}: {report.reason}")
    return 0 if not bad and report.status == "checked" and not report.findings else 1
