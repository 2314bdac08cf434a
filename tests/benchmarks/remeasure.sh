#!/bin/sh
# Re-measure the README's loop (setup_bench.py) and the incremental compile (compile_bench.py) of this checkout's
# HEAD, each paired pass by pass with the revision before it (default e0f4b50), and write the committed outputs
# tests/benchmarks/setup_bench.txt and compile_bench.txt. Both print the load around every command and each
# command's CPU time; run it on a quiet machine (it refuses a 1-minute load above half the cores, unless
# --anyway). Takes about half an hour on two cores: four fresh clones set up and compiled, the full suite run four times.
#
#     sh tests/benchmarks/remeasure.sh [--anyway] [REV]
set -eu
anyway=no
if [ "${1:-}" = "--anyway" ]; then anyway=yes; shift; fi
against="${1:-e0f4b50}"
cd "$(git rev-parse --show-toplevel)"
git rev-parse --verify -q "$against^{commit}" >/dev/null || { echo "remeasure: $against is not a commit here (fix: git fetch)" >&2; exit 2; }
python3 - "$anyway" <<'PY' || exit 2
import os, sys
one, five, _ = os.getloadavg()
cores = len(os.sched_getaffinity(0))
print(f"remeasure: load {one:.1f}/{five:.1f} on {cores} cores", file=sys.stderr)
if one > cores / 2 and sys.argv[1] != "yes":
    sys.exit(f"remeasure: the machine is busy (load {one:.1f} on {cores} cores): wait, or pass --anyway")
PY
python=.nox/toolchain/bin/python
[ -x "$python" ] || { echo "remeasure: $python is missing (fix: nox -s toolchain)" >&2; exit 2; }
python3 tests/benchmarks/setup_bench.py --against "$against" > tests/benchmarks/setup_bench.txt
"$python" tests/benchmarks/compile_bench.py --against "$against" > tests/benchmarks/compile_bench.txt
tail -n 12 tests/benchmarks/setup_bench.txt tests/benchmarks/compile_bench.txt
