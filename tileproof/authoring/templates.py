"""The program skeletons ``new-lesson`` writes: working programs that already follow the rules.

Each skeleton doubles a float32 input (exact in float32, so its tolerance entry is rtol 0,
atol 0, with that derivation written next to it) and is meant to be replaced kernel by kernel:
the gate, the seed, the NaN-poisoned output, the float64 reference, the JSON report (all through
the existing harness, ``kernels/harness.py`` / ``cpp/harness.h``) and the AOT signatures stay.
"""

from __future__ import annotations

PYTHON = '''\
"""{title}: {name} (scaffolded by `tileproof new-lesson`; replace the kernel, keep the shape).

    x, y: {length} float32 elements, tiles of {tile}; grid cdiv({length}, {tile}) blocks

Every element of y starts as NaN, so an element that no block writes fails the check.

Check `{check}`: y against the float64 reference, with the bound in kernels/tolerances.py.

Run: python kernels/{name}.py [--seed N] [--report PATH]
Needs cuda-tile, cupy, numpy and a GPU of compute capability 8.0 or newer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import cuda.tile as ct
import numpy as np

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import harness  # noqa: E402  (found through this script's own directory)
from tolerances import TOLERANCES  # noqa: E402

LENGTH = {length}
TILE = {tile}


@ct.kernel
def {name}(x, y, tile: ct.Constant[int]):
    """y[block i's tile] = x[tile i] + x[tile i] (exact in float32)."""
    i = ct.bid(0)
    v = ct.load(x, index=(i,), shape=(tile,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(i,), tile=v + v)


# One signature per parameter, in order: an array is harness.aot_array(dtype, ndim), a
# ct.Constant is its value, a runtime scalar is ScalarConstraint(dtype) (cuda.tile.compilation).
AOT_SIGNATURES = {{
    "{name}": [harness.aot_signature(harness.aot_array(ct.float32, 1), harness.aot_array(ct.float32, 1), TILE)],
}}


def _body(s: harness.Session) -> None:
    cp = s.cp
    x_host = s.rng.uniform(-1.0, 1.0, size=LENGTH).astype(np.float32)
    y = s.nan_filled((LENGTH,), np.float32)
    ct.launch(cp.cuda.get_current_stream(), (ct.cdiv(LENGTH, TILE), 1, 1), {name}, (cp.asarray(x_host), y, TILE))
    want = 2.0 * x_host.astype(np.float64)
    # The output and its input are handed over: tileproof recomputes {check}(x) from
    # kernels/references.py itself, outside this program.
    s.check("{check}", cp.asnumpy(y), want, inputs={{"x": x_host}})


def main(argv: list[str] | None = None) -> int:
    return harness.run_program(__file__, _body, argv=argv, tolerances=TOLERANCES,
                               description=__doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
'''

CPP = '''\
// {title}: {name} (scaffolded by `tileproof new-lesson`; replace the kernel, keep the shape).
//
// The input is kTiles tiles of 32x32 float32 stacked vertically; block b doubles tile b
// (exact in float32). The output starts poisoned (NaN), so an element no block writes fails.
// Check `{check}`: against a float64 reference, with the bound from kernels/tolerances.py
// (through the generated cpp/tolerances.h).
//
// Build: nvcc -std=c++20 -O3 -arch=sm_80 -enable-tile {name}.cu -o {name}
// Run:   ./{name} [--report PATH] [--seed N]

#include <cuda_tile.h>

#include <cstddef>
#include <random>
#include <vector>

#include "harness.h"

namespace ct = cuda::tiles;
using namespace ct::literals;
namespace tol = tileproof::tolerances;

constexpr std::size_t kTiles = 64;  // grid size: one tile per block
constexpr std::size_t kSide = 32;   // keep in step with the 32_ic below

__tile_global__ void {name}(const float* __restrict__ in, float* __restrict__ out, std::size_t tiles) {{
    auto src = ct::partition_view{{ct::tensor_span{{in, ct::extents{{tiles * 32, 32_ic}}}},
                                   ct::shape{{32_ic, 32_ic}}}};
    auto dst = ct::partition_view{{ct::tensor_span{{out, ct::extents{{tiles * 32, 32_ic}}}},
                                   ct::shape{{32_ic, 32_ic}}}};
    auto v = src.load(ct::bid().x, 0);
    dst.store(v + v, ct::bid().x, 0);
}}

int main(int argc, char** argv) {{
    std::mt19937_64 rng = tp::start(argc, argv, "cpp/{name}.cu");
    const tp::CheckSpec spec{{tol::get("{check}"), {{kTiles * kSide, kSide}}, "float32"}};
    tp::begin_check(spec);  // a setup failure is charged to the check
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(kTiles * kSide * kSide);
    for (auto& v : x) v = dist(rng);
    std::vector<double> want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) want[i] = 2.0 * static_cast<double>(x[i]);
    tp::DeviceBuffer<float> in(x.size()), out(x.size());
    in.upload(x);
    out.poison();
    {name}<<<dim3(kTiles), 1>>>(in.ptr, out.ptr, kTiles);  // tile kernels: block size must be 1
    TP_LAUNCHED("tile kernel");
    // The output and its input are handed over: tileproof recomputes {check}(x) from
    // kernels/references.py itself, outside this program.
    tp::compare(spec, out.download(), want, {{tp::input("x", {{kTiles * kSide, kSide}}, x)}});
    tp::done();
}}
'''

ENTRY = '''\
    # {check}: doubling a float32 is exact (a power-of-two scale), so y equals the float64
    # reference: rtol 0, atol 0. Replace this derivation with your kernel's error bound.
    "{check}": Tolerance(rtol=0.0, atol=0.0),
'''

REFERENCE_FUNCTION = '''

def {check}(x):
    """{check}: y = 2 * x, row by row (replace it with what your kernel computes, in float64 numpy)."""
    return 2.0 * x
'''
"""A check's reference function in kernels/references.py (``scaffold.with_references`` adds it)."""

REFERENCE_ENTRY = '''\
    "{check}": {check},
'''
"""Its entry in ``REFERENCES``."""

REFERENCES = '''\
"""The float64 reference of every program check, as tileproof recomputes it outside the program.

tileproof loads this file by path, with no GPU, and calls REFERENCES[check](**inputs) with the
arrays the check handed over (float64); import only numpy and math here (docs/authoring.md).
"""

import numpy as np

REFERENCES = {
}
'''
"""kernels/references.py for a repository that has none yet."""
