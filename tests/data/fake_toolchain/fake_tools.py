"""A fake tile toolchain for tests: an nvcc whose outputs differ on every call (as the
real one's do: nvcc output is not bit-for-bit reproducible) and a cuobjdump printing a
real res-usage listing (tests/data/nvcc). ``tools(folder)`` writes them and returns Tools."""

import sys
from pathlib import Path

from tileproof.records.models import Toolchain, ToolVersion
from tileproof.toolchain.find import Tools

LISTING = Path(__file__).resolve().parents[1] / "nvcc" / "sm90-executable.res-usage.txt"

NVCC = f"""#!{sys.executable}
import os, sys, time
out = sys.argv[sys.argv.index("-o") + 1]
time.sleep(float(os.environ.get("FAKE_NVCC_SLEEP", "0.5")))
open(out, "wb").write(os.urandom(256))
if "-keep-dir" in sys.argv:  # nvcc keeps its intermediates there, the tile fatbin among them
    stem = os.path.splitext(os.path.basename(next(a for a in sys.argv if a.endswith(".cu"))))[0]
    keep = sys.argv[sys.argv.index("-keep-dir") + 1]
    open(os.path.join(keep, stem + ".tile.fatbin"), "wb").write(os.urandom(256))
"""

CUOBJDUMP = f"""#!{sys.executable}
import sys
sys.stdout.write({LISTING.read_text()!r})
"""
"""The listing is in the script itself: behind the wall a tool sees its own folder, not this checkout's tests
(hidden where the checkout lies under a temp folder)."""


def tools(folder: Path) -> Tools:
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("nvcc", NVCC), ("cuobjdump", CUOBJDUMP)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    paths = {"nvcc": bin_dir / "nvcc", "cuobjdump": bin_dir / "cuobjdump", "tileiras": None, "ptxas": None}
    facts = Toolchain(source="system", tools=[ToolVersion(name=n, path=str(p) if p else None, version="13.4.92")
                                              for n, p in paths.items()],
                      packages={}, major_minor="13.4", coherent=True, problems=[])
    return Tools(bin=bin_dir, source="system", paths=paths, facts=facts)
