"""What a reviewer names from outside the tree: ``--trust-root``, ``$TILEPROOF_TRUST_ROOT``, ``--expect-ancestor``
and ``--since``, each resolved by the one rule here (docs/threat-model.md, "What a reviewer holds").

A value is one of:

- a **full commit id** (40 hex digits; 64 in a SHA-256 repository): that commit, looked up as an object id alone
  (``runner.git_history.commit_by_id``), never as a ref, a file or an abbreviation. A full id that names no commit
  here is kept as given (the caller's finding: ``trust-root-not-in-history``, ``history-rewritten``, or one line);
- ``file:PATH``: the file at PATH (relative to the working directory), which must lie outside the audited tree,
  since a committer writes everything inside it. For a trust root it is a pin file or a registry file
  (``gather.trust_state``); for ``--expect-ancestor`` and ``--since``, a file holding a full commit id (what
  ``git rev-parse HEAD > FILE`` writes).

Anything else is refused in one line that says what to pass instead:

- an abbreviated id (``4a2a0d3``): git takes a branch or tag of that name before the commit the digits begin, so a
  pushed tag decides what it names; the line gives the full id of each commit it abbreviates, and names the refs
  that would have shadowed it;
- a ref name (``main``, a tag, ``refs/tags/v1``, ``HEAD``, ``HEAD~2``): a committer creates and moves refs (a tag
  moved to HEAD makes ``--since`` audit nothing), so a reviewer passes the commit, not the name; the line gives the
  full id it names now (``git rev-parse``), to pass once checked;
- a bare path (the value is tried as a file only when it says ``file:``: a committed file named like a commit id
  would otherwise replace the reviewer's root).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tileproof.records.errors import TileproofError
from tileproof.records.history_check import NoHistory
from tileproof.records.safe_read import read_file
from tileproof.runner import git_history

Option = Literal["--trust-root", "$TILEPROOF_TRUST_ROOT", "--expect-ancestor", "--since"]
"""Where a value came from: the command line, or CI's environment (both outside the tree)."""

FILE_PREFIX = "file:"
HEX = re.compile(r"[0-9a-fA-F]+")
ANY_FULL_ID = re.compile("|".join(f"[0-9a-fA-F]{{{n}}}" for n in git_history.ID_LENGTH.values()))


@dataclass(frozen=True)
class GivenId:
    """A full commit id, as the reviewer gave it (``given``: the value, or ``file:PATH`` holding it)."""

    option: Option
    given: str
    full: str
    """The id, lower case."""
    commit: str | None
    """``full`` when a commit of this repository has that id; None when none has (or there is no history)."""


@dataclass(frozen=True)
class GivenFile:
    """``file:PATH``: a file outside the audited tree."""

    option: Option
    given: str
    path: Path
    """Absolute, links resolved."""


class Refused(TileproofError):
    """A value no rule of this module accepts: one line, what was given and what to pass instead."""


def resolve(root: Path, value: str, option: Option) -> GivenId | GivenFile:
    """``value`` by the rule of the module docstring; :class:`Refused` (one line) otherwise."""
    if value.startswith(FILE_PREFIX):
        return _outside(root, value, option)
    if ANY_FULL_ID.fullmatch(value):
        fmt = git_history.object_format(root)
        full = value.lower()
        if not isinstance(fmt, NoHistory) and not re.fullmatch(git_history.FULL_ID[fmt], full):
            raise Refused(f"{option} {value}: {len(value)} hex digits, and a full commit id of this ({fmt}) "
                          f"repository has {git_history.ID_LENGTH[fmt]} (fix: pass the commit's full id: git rev-parse "
                          f"<commit>)")
        return GivenId(option, value, full, git_history.commit_by_id(root, full))
    raise Refused(_refusal(root, value, option))


def commit_of(root: Path, value: str, option: Option) -> GivenId:
    """``--expect-ancestor`` and ``--since``: a full commit id, given as such or in a ``file:PATH`` that holds one."""
    found = resolve(root, value, option)
    if isinstance(found, GivenId):
        return found
    text = read_file(found.path, "lesson", str(found.path)).decode("utf-8", errors="replace").strip()
    if not ANY_FULL_ID.fullmatch(text):
        raise Refused(f"{option} {value}: the file holds {_shown(text)}, not a full commit id (fix: write one, as "
                      f"git rev-parse HEAD > FILE does)")
    inner = resolve(root, text, option)
    assert isinstance(inner, GivenId)
    return GivenId(option, value, inner.full, inner.commit)


def _shown(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    return "nothing" if not first else repr(first[:80]) + ("..." if len(first) > 80 or "\n" in text else "")


def _outside(root: Path, value: str, option: Option) -> GivenFile:
    """``file:PATH``: PATH, refused unless it is a file outside the audited tree (links followed: a link outside
    to a file inside is inside)."""
    given = value[len(FILE_PREFIX):]
    if not given:
        raise Refused(f"{option} {value}: names no file (fix: file:PATH, a file you keep outside the repository)")
    path = Path(given).expanduser()
    resolved, tree = path.resolve(), Path(root).resolve()
    if resolved == tree or tree in resolved.parents:
        raise Refused(f"{option} {value}: {resolved} is inside the audited tree {tree}, where a committer writes "
                      f"(fix: keep the file outside the repository, and pass file:<that path>)")
    if not resolved.is_file():
        raise Refused(f"{option} {value}: no such file (fix: file:PATH, a file you keep outside the repository)")
    return GivenFile(option, value, resolved)


def _refusal(root: Path, value: str, option: Option) -> str:
    """The one line refusing ``value`` (not a full id, not ``file:``): what it is, and what to pass instead."""
    if HEX.fullmatch(value):
        commits = git_history.commits_by_prefix(root, value.lower())
        refs = git_history.refs_named(root, value)
        shadow = "; " + ", ".join(f"{r} names {c}" for r, c in sorted(refs.items())) + \
            " (a ref shadows the abbreviation)" if refs else ""
        if len(commits) == 1:
            fix = f"pass the full id: {commits[0]}"
        elif commits:
            fix = f"pass the full id of the one you mean: {', '.join(commits)}"
        else:
            fix = "pass a full commit id: git rev-parse <commit>"
        return (f"{option} {value}: an abbreviated commit id, which a branch or tag of that name would shadow (git "
                f"takes the ref first){shadow} (fix: {fix})")
    if value and Path(value).expanduser().is_file():
        fix = f"for that file, pass {FILE_PREFIX}{value} (it must lie outside the repository)"
    elif named := git_history.resolve_commit(root, value):
        fix = f"pass the full id it names now, once checked: {named} (git rev-parse {value})"
    else:
        fix = f"pass a full commit id (git rev-parse <commit>), or {FILE_PREFIX}PATH"
    return (f"{option} {value}: neither a full commit id nor {FILE_PREFIX}PATH; a ref (a branch, a tag, HEAD) is a "
            f"name a committer can move, and a path is read as a file only when it says {FILE_PREFIX} (fix: {fix})")
