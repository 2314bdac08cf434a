"""What is on disk, read once and remembered: a fast path behind one face (``Catalog``), never a source of truth."""

from tileproof.catalog.face import Audited, ByteFacts, Catalog

__all__ = ["Audited", "ByteFacts", "Catalog"]
