"""Today's claims files, read once for the audit's reports.

``claims_files_today(root)``: document id → its claims file as it is today
(``ClaimsFileToday``: which claims the document still asserts, in the file's
order, and each claim's words), or the one-line error when the file cannot be
read. The reports show the claims matrix with it; the publish decision reads
the same files through ``gather.tree.claims_today``, which this calls.
"""

from __future__ import annotations

from pathlib import Path

from tileproof.claims import spec as claims_spec
from tileproof.gather.tree import claims_today
from tileproof.judge.audit.result import ClaimsFileToday
from tileproof.records.errors import TileproofError
from tileproof.records.store import rel


def claims_files_today(root: Path) -> dict[str, ClaimsFileToday | str]:
    """Every claims file under lessons/claims/, by document id (the file name's stem)."""
    root = Path(root)
    out: dict[str, ClaimsFileToday | str] = {}
    for path in claims_spec.claims_files(root):
        document = path.name.removesuffix(claims_spec.SUFFIX)
        try:
            loaded = claims_spec.load_file(path, rel(root, path))
            out[document] = ClaimsFileToday(claims_today(root, document),
                                            {c.id: c.statement for c in loaded.spec.claims},
                                            {c.id: loaded.source_text(c) for c in loaded.spec.claims})
        except TileproofError as e:
            out[document] = str(e).splitlines()[0]
    return out
