"""Whether a claims file's quotes still occur in today's documents.

A claim quotes the document's own words; ``claims --list`` warns when an asserted claim's
quote is gone (the document changed under its claim). Markdown marks and line breaks are
ignored when comparing.
"""

from __future__ import annotations

import re
from pathlib import Path

from tileproof.claims.spec import Loaded


def _normal(text: str) -> str:
    text = re.sub(r"(?m)^\s*>\s?", "", text)  # Markdown block quotes
    text = re.sub(r"[`*_|]", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def quote_found(document_text: str, quote: str) -> bool:
    """Whether the document still says this (Markdown marks and line breaks ignored)."""
    return _normal(quote) in _normal(document_text)


def quote_problems(root: Path, loaded: Loaded) -> list[str]:
    """One line per asserted claim whose quote is not in today's document."""
    doc = (root / loaded.spec.path)
    if not doc.is_file():
        return [f"{loaded.spec.document}: document {loaded.spec.path} not found here; quotes not checked"]
    text = doc.read_text(errors="replace")
    return [f"{loaded.spec.document}/{c.id}: quote not found in {loaded.spec.path}: {c.source.quote!r}"
            for c in loaded.spec.claims if c.asserted and c.source.quote and not quote_found(text, c.source.quote)]
