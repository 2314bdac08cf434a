"""One module per seam of the audit's rules; ``load()`` imports every module here.

The loader lives here, not in ``audit_rules``: the rule modules import ``audit_rules``,
so it importing them back would make a cycle.
"""

from __future__ import annotations

import importlib
import pkgutil

from tileproof.judge.audit.audit_rules import RULES


def load() -> dict[str, str]:
    """Import every rule module (registering its rules) and return ``RULES``, ordered by rule id: the order in
    which modules registered them depends on what a command imported first, and the reports list them."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        importlib.import_module(f"{__name__}.{info.name}")
    if list(RULES) != sorted(RULES):
        ordered = sorted(RULES.items())
        RULES.clear()
        RULES.update(ordered)
    return RULES
