"""The lint rules, one module per rule id (``tpNNN.py``), each registered with ``@rule``.

Importing this package imports every module in it, so a new rule is one new file here:
its function, its id, slug and description, and the events it looks at
(see ``tileproof.lint.rule_table``). Rule ids and their fixtures are listed by
``python -m tileproof lint-kernels --list-rules``; each rule has a wrong and a right
snippet in ``tests/data/lint/``.
"""

from __future__ import annotations

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
