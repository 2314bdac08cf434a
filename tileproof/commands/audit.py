"""``python -m tileproof audit``: check every record, transcript and lesson.

The reading and the rules are ``gather.audit``'s and ``judge.audit.rules``'s; this prints the findings, each
draft lesson's summary and one last line, writes reports only where asked, and exits 1 on a finding or on a
history it could not check (unless ``--allow-no-history``). The options and the reports: docs/commands.md,
"Audit reports"; the history, the trust root and ``--expect-ancestor``: docs/threat-model.md, "Running the audit".
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from tileproof.commands import add_root
from tileproof.gather.audit import COMMITTED_REPORTS, REPORT_HTML, REPORT_MD, audit, paused_gc
from tileproof.judge.audit.result import AuditResult
from tileproof.records import store
from tileproof.records.errors import one_line
from tileproof.records.trust.trust_pin import PIN, PIN_ENV
from tileproof.report import junit, render, summary
from tileproof.report.causes import grouped, in_order
from tileproof.report.page import Audited, Links, check_link_base
from tileproof.runner.capture import git_state

OutputKind = Literal["md", "html", "junit", "json"]
RENDER: dict[OutputKind, Callable[[AuditResult, Links, Audited], str]] = {
    "md": render.render_markdown,
    "html": render.render_html,
    "junit": lambda result, _links, _audited: junit.junit_xml(result),
    "json": lambda result, _links, _audited: summary.summary_json(result),
}
"""Each output kind → its text, given the audit, where its file links point and the tree audited."""


def add_arguments(parser) -> None:
    add_root(parser)
    parser.add_argument("--md", type=Path, default=None, help="write the Markdown report here")
    parser.add_argument("--html", type=Path, default=None, help="write the HTML report here")
    parser.add_argument("--report-dir", type=Path, default=None,
                        help=f"write both reports into this folder ({REPORT_MD}, {REPORT_HTML})")
    parser.add_argument("--update-committed-report", action="store_true",
                        help=f"rewrite the committed evidence/{REPORT_MD} and evidence/{REPORT_HTML}")
    parser.add_argument("--junit", type=Path, default=None,
                        help="write JUnit XML here (a test case per lesson row, claim and audit rule)")
    parser.add_argument("--json", type=Path, default=None,
                        help="write a machine-readable summary here (schema/audit-summary.v1.schema.json)")
    parser.add_argument("--allow-no-history", action="store_true",
                        help="exit 0 on no findings even when git history could not be checked "
                             "(still printed as NOT CHECKED); for trees without history on purpose")
    parser.add_argument("--trust-root", default=None, metavar="COMMIT|file:PATH",
                        help="the trust root: the full id of a commit whose lessons/runners.yaml you trust, or "
                             "file:PATH, a pin or registry file you keep outside the tree (default: "
                             f"${PIN_ENV}, read the same way, else the tree's {PIN.as_posix()})")
    parser.add_argument("--expect-ancestor", default=None, metavar="COMMIT|file:PATH",
                        help="the full id of a head audited before (or file:PATH holding it): fail "
                             "(history-rewritten) unless it is an ancestor of HEAD")
    parser.add_argument("--since", default=None, metavar="COMMIT|file:PATH",
                        help="audit only the records and evidence added or changed since the commit (its full id, "
                             "or file:PATH holding it; an ancestor of HEAD), and the "
                             "lessons they touch (the whole tree's history and trust still checked); for CI on "
                             "every push; docs/records-and-staleness.md says exactly what it covers")
    parser.add_argument("--strict", action="store_true",
                        help="the reviewer's mode: every notice is a finding too (a plausibility signal only a "
                             "lesson's front matter settles, a move of the tree's pin in the trust range); CI uses it")
    parser.add_argument("--link-base", default=None, metavar="URL",
                        help="write the reports' file links as URL + the repo-relative path ({commit} in URL is the "
                             "audited commit's full id), e.g. https://github.com/OWNER/REPO/blob/{commit}/, so "
                             "a report moved or attached to a pull request keeps its links (default: relative to "
                             "the report's folder)")
    parser.add_argument("--no-write", action="store_true", help="write no report (the default; kept for scripts)")


def outputs(args) -> list[tuple[Path, OutputKind]]:
    """(path, kind) of each report asked for."""
    out: list[tuple[Path, OutputKind]] = []
    if args.no_write:
        return out
    if args.update_committed_report:
        folder = args.root / store.EVIDENCE
        out += [(folder / REPORT_MD, "md"), (folder / REPORT_HTML, "html")]
    if args.report_dir is not None:
        out += [(args.report_dir / REPORT_MD, "md"), (args.report_dir / REPORT_HTML, "html")]
    out += [(args.md, "md")] if args.md else []
    out += [(args.html, "html")] if args.html else []
    out += [(args.junit, "junit")] if args.junit else []
    out += [(args.json, "json")] if args.json else []
    return out


def write(result: AuditResult, wanted: list[tuple[Path, OutputKind]], args) -> None:
    """Each report asked for, saying first which commit was audited, clean or dirty (the committed reports, which
    the audit rewrites on purpose, left out), and when."""
    state = git_state(args.root, COMMITTED_REPORTS)
    audited = Audited(state.commit, state.dirty, datetime.now(timezone.utc))
    for path, kind in wanted:
        links = Links.of(args.root, path.parent, args.link_base, audited.commit)
        store.write_atomic(path, RENDER[kind](result, links, audited))


def run(args) -> int:
    wanted = outputs(args)
    if args.link_base is not None:
        check_link_base(args.link_base)  # bad input: one line and exit 2, before the audit's work
    with paused_gc():  # rendering 10,000 records' tables with the collector on costs it 3x
        result = audit(args.root, outputs=[p for p, _ in wanted], trust_root=args.trust_root,
                       expect_ancestor=args.expect_ancestor, since=args.since, strict=args.strict)
        if result.scope is not None:
            print(one_line(f"audit scope: {result.scope}"))
        causes = grouped(result.findings, result.lessons)
        for group in causes.groups:
            print(one_line(f"root cause: {group.cause}; {len(group.consequences)} findings below follow from it "
                           f"({group.counts() or 'none'})"))
        for f in in_order(causes):
            print(f)
        for f in result.notices if not result.strict else ():
            print(f"notice: {f}")
        for line in result.trust.lines() if result.trust is not None else ():
            print(line)
        if (unisolated := result.unisolated_line()) is not None:
            print(unisolated)
        for lesson in result.lessons:
            if lesson.status == "draft":
                print(lesson.summary())
        if wanted:
            write(result, wanted, args)
    for note in result.index_notes:
        print(note, file=sys.stderr)
    failed = bool(result.findings) or not (result.history_checked or args.allow_no_history)
    print(result.summary_line([p for p, _ in wanted]), file=sys.stderr if failed else sys.stdout)
    return 1 if failed else 0
