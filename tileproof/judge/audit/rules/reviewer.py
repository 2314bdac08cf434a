"""What rests on a committer's word, and what a reviewer's ``--since`` audited.

Two kinds of line, both pure decisions over what the audit read:

- **Notices** (``audit --strict`` makes each a finding; without it, each is a line of the printed audit and a
  section of both reports): a plausibility signal settled only by a lesson's front matter (``plausibility:``,
  text any committer writes), and a move of the tree's pin (``.ci/trust-root``) inside the trust range, unless
  the pin was moved to the very commit the reviewer's own root names (``--trust-root``,
  ``$TILEPROOF_TRUST_ROOT``): a root the tree gives itself is a committer's word, and so is each move of it.
- **The scope of ``audit --since REV``**: REV not an ancestor of HEAD (what changed since it is not what was added
  since it: the whole tree is audited instead), and an audit that judged no record and no lesson (REV at HEAD's
  tree: a tag moved to HEAD after a hand-published lesson): each is a finding, so that an audit of nothing never
  reads as a pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tileproof.judge import plausibility
from tileproof.judge.audit.audit_rules import rule
from tileproof.judge.audit.result import Issue
from tileproof.judge.trust.trust_root import PinMove, Root
from tileproof.records.models import PlausibilityNote
from tileproof.records.store import Examined
from tileproof.records.trust.trust_pin import PIN

EXPLAINED = rule("plausibility-explained", "a plausibility signal settled only by a lesson's front matter "
                                           "(plausibility:, a committer's words); a finding under --strict, a "
                                           "notice otherwise")
PIN_MOVED = rule("trust-pin-moved", f"a commit in the trust range moved the tree's pin ({PIN.as_posix()}), "
                                    "other than to the commit the reviewer's own root names; a finding under "
                                    "--strict, a notice otherwise")
SINCE_NOT_ANCESTOR = rule("since-not-ancestor", "audit --since REV where REV is not an ancestor of HEAD (history "
                                                "rewritten, or another branch): the whole tree is audited instead")
SINCE_NOTHING = rule("since-judged-nothing", "audit --since REV that judged no record and no lesson (nothing "
                                             "changed since REV): an audit of nothing is no pass")

OUTSIDE_ROOTS = frozenset({"--trust-root", "$TILEPROOF_TRUST_ROOT"})
"""Where a root the reviewer holds comes from (outside the tree)."""


def explained_issues(item: Examined, items: Iterable[Examined], flagged: Mapping[str, tuple[plausibility.Signal, ...]],
                     notes: Iterable[tuple[str, PlausibilityNote]]) -> list[Issue]:
    """(rule id, reason) for each of the record's signals that a lesson's note (``notes``: (lesson file, note))
    settles and no agreeing record of another runner key does: one per note that explains it."""
    mine = flagged.get(item.record.run_id, ())
    if not mine or plausibility.corroborated(item, items, flagged):
        return []
    notes = list(notes)
    return [(EXPLAINED, f"{s.kind} {s.subject}: settled only by {file}'s front matter, which says: {note.explanation} "
                        f"(a committer's words: check them, or run it again under a second registered runner key)")
            for s in mine for file, note in notes if plausibility.explained(s, [note])]


def pin_issues(moves: Iterable[PinMove], root: Root | None) -> list[Issue]:
    """(rule id, reason) for each move of the tree's pin in the trust range, but a move to the commit the reviewer's
    own root names."""
    theirs = root.commit if root is not None and root.source in OUTSIDE_ROOTS else None
    out: list[Issue] = []
    for m in moves:
        if not m.moved or not m.in_range or (theirs is not None and m.after == theirs):
            continue
        if theirs is not None and root is not None:
            whose = f"the root you pass ({root.source}) names {theirs[:12]}"
        elif root is not None:
            whose = f"the root in force is the tree's own pin ({root.source})"
        else:
            whose = "no root is pinned (trust on first use)"
        out.append((PIN_MOVED, f"pin moved in {m}; {whose} (a root the tree gives itself is a committer's word: pass "
                               f"your own, --trust-root COMMIT)"))
    return out


def since_not_ancestor(given: str, commit: str, head: str | None) -> Issue:
    return (SINCE_NOT_ANCESTOR, f"--since {given} ({commit[:12]}) is not an ancestor of HEAD "
                                f"({head[:12] if head else 'none'}): history was rewritten since, or this is another "
                                f"branch; the whole tree was audited instead (fix: pass the head you audited last, "
                                f"or audit without --since)")


def since_nothing(given: str, commit: str, at_head: bool) -> Issue:
    why = "it is HEAD, and the working tree holds no change" if at_head else "nothing changed since it"
    return (SINCE_NOTHING, f"--since {given} ({commit[:12]}) judged 0 records and 0 lessons: {why}; an audit of "
                           f"nothing is no pass (fix: pass the head you audited last, or audit without --since)")
