"""Input files refused by what they are, for a command that does not read them all (``publish``).

The audit reads every file under runs/, evidence/ and lessons/ through ``records.safe_read``
and reports each refusal as an ``input-*`` finding (``judge.audit.rules.inputs``). ``publish``
decides from the few transcripts its decision reads, so a transcript it does not read (a
program's stdout replaced by a link out of the repository, a FIFO) would pass it unseen:
:func:`refused` finds what the audit would refuse about the files themselves (a link where none
may be, one leading outside the repository, a FIFO or device, a file over its kind's cap, one that
cannot be opened), with the same reader's checks, opening nothing that is not a regular file and
reading nothing. A file's content (UTF-8, nesting, schema) is judged where it is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tileproof.claims import spec as claims_spec
from tileproof.gather.audit_scan import entries, walk
from tileproof.judge.audit.result import Issue
from tileproof.judge.audit.rules import inputs
from tileproof.records import store
from tileproof.records.errors import InputRefused
from tileproof.records.lessons import LESSONS
from tileproof.records.safe_read import InputKind, check_file, listed_file_passes


def refused(root: Path) -> dict[str, Issue]:
    """Path → its ``input-*`` issue, for every entry under evidence/ and every entry under lessons/
    that is not a regular file (lesson and claims files are checked again by their loaders).

    Each evidence entry gets exactly ``check_file``'s answer, most of them without its ``lstat`` of every
    path component: when evidence/ is a real folder, every folder below it that the walk enters was
    listed as a real folder by the one above, so the components need no second look, and an entry its
    folder lists as a regular file is opened once, the reader's way (``safe_read.listed_file_passes``:
    its inode, regular, within the cap). That open stays: nothing short of opening a file tells whether
    it can be opened (an ACL, a security module or a server may refuse what its mode allows). Every
    other entry (a link, a FIFO or device, an open that failed, a file over the cap) goes to
    ``check_file``, which words its refusal."""
    out: dict[str, Issue] = {}
    sroot = str(root)
    dev = _real_folder(sroot, store.EVIDENCE)
    for rel, entry in entries(sroot, store.EVIDENCE, out):
        try:
            if dev is not None and entry.is_file(follow_symlinks=False) \
                    and listed_file_passes(entry.path, dev, entry.inode(), "evidence"):
                continue
        except OSError:  # a listing without types, whose lstat failed: check_file says why
            pass
        try:
            check_file(sroot, rel, "evidence")
        except InputRefused as e:
            out[rel] = inputs.refused_issue(e)
    return out | lesson_inputs(Path(root))


def _real_folder(root: str, folder: str) -> int | None:
    """The device of ``root/folder`` when it is a real folder (not a link), as ``safe_read`` checks the first
    component of each path below it; None otherwise (then every entry is checked in full)."""
    try:
        st = os.lstat(os.path.join(root, folder))
    except OSError:
        return None
    return st.st_dev if stat.S_ISDIR(st.st_mode) else None


def lesson_inputs(root: Path) -> dict[str, Issue]:
    """Every entry under lessons/ that is neither a folder nor a regular file, checked by ``safe_read``
    (a link inside the repository is fine there; one leading outside, a FIFO or a device is an
    ``input-*`` issue). Regular lesson and claims files are read, and judged, by their loaders."""
    refused_here: dict[str, Issue] = {}
    for rel in walk(str(root), LESSONS, refused_here):
        try:
            if not stat.S_ISREG(os.lstat(root / rel).st_mode):
                kind: InputKind = "claims" if rel.startswith(f"{claims_spec.CLAIMS_DIR.as_posix()}/") else "lesson"
                check_file(root, rel, kind)
        except InputRefused as e:
            refused_here[rel] = inputs.refused_issue(e)
        except OSError:
            continue  # gone since it was listed
    return refused_here
