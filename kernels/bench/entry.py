"""A bench program's command line: the bench itself, or one of its compile workers.

Every bench program ends with ``sys.exit(entry.main(__file__, body, warm_body, ...))``:
``PROGRAM --jit-warm SPEC`` makes it a compile worker (kernels/bench/jit.py), anything
else runs ``body`` through the course harness (gate, check report, exit code = verdict)
with the bench options ``--quick`` and ``--results``.

Standard library and kernels/harness.py only.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import harness
import jit
from tolerances import TOLERANCES


def main(program_file: str, body: Callable[[harness.Session], None],
         warm_body: Callable[[dict[str, Any]], dict[str, Any]], description: str,
         quick_help: str, argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [jit.WARM_FLAG]:
        return jit.worker_main(argv[1], warm_body)

    def add_arguments(parser) -> None:
        parser.add_argument("--quick", action="store_true", help=quick_help)
        parser.add_argument("--results", default=None, help="write the timing results JSON here")

    return harness.run_program(program_file, body, argv=argv, tolerances=TOLERANCES,
                               add_arguments=add_arguments, description=description)


def print_repeats(sweep: list, repeats: list, width: int) -> None:
    """The same case measured twice in this run: both medians and how far apart."""
    print("\nrepeat (same case measured twice in this run):", flush=True)
    first = {c.key: c for c in sweep}
    for c in repeats:
        m1, m2 = first[c.key].median_ms, c.median_ms
        print(f"  {c.key:{width}} {m1:.4f} ms then {m2:.4f} ms: {100 * abs(m2 - m1) / m1:.2f}%", flush=True)
