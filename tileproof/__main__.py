"""The command line: ``python -m tileproof COMMAND ...``.

Each command lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``; this file only parses, dispatches and turns a
``TileproofError`` into one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from tileproof.records.errors import TileproofError

COMMANDS = {
    "compile": ("tileproof.commands.compile", "build every program for every target (no GPU needed)"),
    "run": ("tileproof.commands.run", "run lesson programs on this machine's GPU and write run records"),
    "publish": ("tileproof.commands.publish", "flip a lesson to published when its evidence allows"),
    "status": ("tileproof.commands.status", "lesson x program x newest evidence"),
    "audit": ("tileproof.commands.audit", "check every record, transcript and published lesson"),
    "bench": ("tileproof.commands.bench", "time the course kernels against cuBLAS/cupy on this GPU; bench record"),
    "claims": ("tileproof.commands.claims", "check every claim of the shipped documents; claims record"),
    "schema": ("tileproof.commands.schema", "regenerate schema/ and cpp/tolerances.h"),
    "lint-kernels": ("tileproof.commands.lint", "static checks for known cuTile mistakes"),
    "keygen": ("tileproof.commands.keygen",
               "make a runner's signing key outside the repository; print its registry entry"),
    "verify": ("tileproof.commands.verify", "every record's signature against lessons/runners.yaml, and git history"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tileproof", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text)
    # Parse the command first, then import only that command's module.
    args, rest = parser.parse_known_args(argv)
    module = importlib.import_module(COMMANDS[args.command][0])
    cmd_parser = argparse.ArgumentParser(prog=f"tileproof {args.command}", description=COMMANDS[args.command][1])
    module.add_arguments(cmd_parser)
    cmd_args = cmd_parser.parse_args(rest)
    try:
        return int(module.run(cmd_args) or 0)
    except TileproofError as e:
        print(f"tileproof {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tileproof {args.command}: interrupted; records written so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
