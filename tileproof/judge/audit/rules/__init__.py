"""One module per seam of the audit's rules; ``load()`` imports every module here.

The loader lives here, not in ``registry``: the rule modules import the registry,
so the registry importing them back would make a cycle.
"""

from __future__ import annotations

import importlib
import pkgutil

from tileproof.judge.audit.registry import RULES


def load() -> dict[str, str]:
    """Import every rule module (registering its rules) and return ``RULES``."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        importlib.import_module(f"{__name__}.{info.name}")
    return RULES
