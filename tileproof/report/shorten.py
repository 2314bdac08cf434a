"""Environment values as a reviewer needs them in the report: no home or build paths of the machine.

The records keep every allowlisted variable verbatim; only the reports shorten
them. ``env_value(name, value, env)``: a path list (PATH, LD_LIBRARY_PATH,
PYTHONPATH...) keeps its system entries (``/usr/...``, ``/bin``, ``/opt/...``
outside a home or a virtual environment) and replaces each run of the others by
one ``…`` with their count; an entry inside the record's VIRTUAL_ENV reads
``$VIRTUAL_ENV/...``; VIRTUAL_ENV itself and any single path under a home, /tmp
or a work tree reads ``(a path on the machine that ran it)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PATH_LISTS = frozenset({"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "LIBRARY_PATH", "CPATH", "MANPATH"})
HIDDEN = "(a path on the machine that ran it)"
VENV_SET = "(set: a virtual environment on the machine that ran it)"
_SYSTEM = re.compile(r"^/(usr|bin|sbin|lib|lib32|lib64|etc)(/|$)|^/opt/(?!.*\.venv)[^/]+(/|$)")
_PRIVATE = re.compile(r"^(/root|/home/[^/]+|/Users/[^/]+|/tmp|/var/tmp|/work|/builds|/runner|~)(/|$)")


def _entry(entry: str, venv: str | None) -> str | None:
    """The entry as shown, or None when it is one of the machine's own paths."""
    if venv and (entry == venv or entry.startswith(venv.rstrip("/") + "/")):
        return "$VIRTUAL_ENV" + entry[len(venv.rstrip("/")):]
    if _SYSTEM.match(entry) and not _PRIVATE.match(entry):
        return entry
    return None


def path_list(value: str, venv: str | None) -> str:
    out: list[str] = []
    hidden = 0
    for entry in value.split(":"):
        shown = _entry(entry, venv)
        if shown is None:
            hidden += 1
            continue
        if hidden:
            out.append(f"…({hidden})")
            hidden = 0
        out.append(shown)
    if hidden:
        out.append(f"…({hidden})")
    return ":".join(out)


def env_value(name: str, value: str, env: Mapping[str, str]) -> str:
    """One variable's value as the report shows it (see the module docstring)."""
    venv = env.get("VIRTUAL_ENV")
    if name == "VIRTUAL_ENV":
        return VENV_SET
    if name in PATH_LISTS or (":" in value and value.startswith("/")):
        return path_list(value, venv)
    if value.startswith(("/", "~")):
        return value if _entry(value, None) is not None else HIDDEN
    return value


def env_text(env: Mapping[str, str]) -> str:
    """``A=1, PATH=…(3):/usr/bin`` for the report; ``-`` when empty."""
    return ", ".join(f"{k}={env_value(k, v, env)}" for k, v in sorted(env.items())) or "-"


def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """``1 check``, ``2 checks``."""
    return f"{n} {noun if n == 1 else (plural_form or noun + 's')}"
