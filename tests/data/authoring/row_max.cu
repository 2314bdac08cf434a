// Row ops: row_max, the maximum of every row of a float32 matrix (port of a row reduction).
//
// The input is kTiles tiles of 32x32 float32 stacked vertically ((kTiles * 32) x 32, row-major);
// block b reduces the 32 rows of tile b with reduce_max along axis 1 and writes their 32 maxima.
// The output starts poisoned (NaN), so a row no block writes fails the check.
// Check `row_max`: against a float64 max of the same float32 inputs, with the bound from
// kernels/tolerances.py (through the generated cpp/tolerances.h).
//
// Build: nvcc -std=c++20 -O3 -arch=sm_80 -enable-tile row_max.cu -o row_max
// Run:   ./row_max [--report PATH] [--seed N]

#include <cuda_tile.h>

#include <algorithm>
#include <cstddef>
#include <random>
#include <vector>

#include "harness.h"

namespace ct = cuda::tiles;
using namespace ct::literals;
namespace tol = tileproof::tolerances;

constexpr std::size_t kTiles = 64;  // grid size: one tile per block
constexpr std::size_t kSide = 32;   // keep in step with the 32_ic below

__tile_global__ void row_max(const float* __restrict__ in, float* __restrict__ out, std::size_t tiles) {
    auto src = ct::partition_view{ct::tensor_span{in, ct::extents{tiles * 32, 32_ic}}, ct::shape{32_ic, 32_ic}};
    auto dst = ct::partition_view{ct::tensor_span{out, ct::extents{tiles * 32, 1_ic}}, ct::shape{32_ic, 1_ic}};
    auto v = src.load(ct::bid().x, 0);
    dst.store(ct::reduce_max(v, 1_ic), ct::bid().x, 0);  // (32,32) -> (32,1)
}

int main(int argc, char** argv) {
    std::mt19937_64 rng = tp::start(argc, argv, "cpp/row_max.cu");
    const tp::CheckSpec spec{tol::get("row_max"), {kTiles * kSide}, "float32"};
    tp::begin_check(spec);  // a setup failure is charged to the check
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(kTiles * kSide * kSide);
    for (auto& v : x) v = dist(rng);
    std::vector<double> want(kTiles * kSide);
    for (std::size_t r = 0; r < want.size(); ++r) {
        double m = x[r * kSide];
        for (std::size_t c = 1; c < kSide; ++c) m = std::max(m, static_cast<double>(x[r * kSide + c]));
        want[r] = m;
    }
    tp::DeviceBuffer<float> in(x.size()), out(want.size());
    in.upload(x);
    out.poison();
    row_max<<<dim3(kTiles), 1>>>(in.ptr, out.ptr, kTiles);  // tile kernels: block size must be 1
    TP_LAUNCHED("tile kernel");
    tp::compare(spec, out.download(), want, {tp::input("x", {kTiles * kSide, kSide}, x)});
    tp::done();
}
