"""How tileproof starts a cuTile Python program: ``python launch.py FAILURE PROGRAM [ARGS...]``, run by path.

It runs PROGRAM as ``python PROGRAM ARGS...`` would (``sys.argv``, ``sys.path[0]`` the program's
folder, ``__name__ == "__main__"``; exit status and traceback unchanged) and, when an exception
ends the program, writes the exception's type and message to FAILURE as JSON before Python prints
the traceback. The run record keeps them typed (``RunRecord.failure``): what a cuda-tile release
refused is evidence read by type, never parsed back out of the traceback. An exception raised
anywhere counts, before the program's harness is imported too (``import cuda.tile`` itself).

The standard library only, and nothing from tileproof: this file runs in the program's process,
and programs never import tileproof (the program's own files are unchanged, so their run records'
sources are what a student runs). ``failure_of`` is also how the AOT exporter (``toolchain.aot``)
names an exception, so the two write the same shape.
"""

from __future__ import annotations

import json
import os
import runpy
import sys


def failure_of(exc: BaseException) -> dict[str, str]:
    """``{"type": ..., "message": ...}``: the class qualified by its module (a builtin bare), ``str(exc)``."""
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    return {"type": name, "message": str(exc)}


def write_failure(path: str, exc: BaseException) -> None:
    """FAILURE, written once (a new file: an existing one is never replaced)."""
    try:
        with open(path, "x", encoding="utf-8") as f:
            json.dump(failure_of(exc), f)
    except OSError as e:
        print(f"tileproof launch: could not write {path}: {e}", file=sys.stderr)


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    failure, program, args = argv[0], argv[1], argv[2:]
    sys.argv = [program, *args]
    if not getattr(sys.flags, "safe_path", False):  # as `python PROGRAM` sets it (-P / PYTHONSAFEPATH: not at all)
        sys.path[0] = os.path.dirname(os.path.realpath(program))
    try:
        runpy.run_path(program, run_name="__main__")
    except Exception as exc:  # SystemExit and KeyboardInterrupt pass: the program's exit, or a kill
        write_failure(failure, exc)
        raise


if __name__ == "__main__":
    main(sys.argv[1:])
