// Reduction spike: three ways to reduce a 32x32 float tile to one number.
//
//   tile_max_native    reduce_max along both axes (a builtin reduction)
//   tile_sum_via_scan  partial_sum along rows, then columns; the last element
//                      of the 2-D prefix sum is the total (the workaround the
//                      spike measured when it believed no additive reduction
//                      existed)
//   tile_sum_native    the header's own additive reduction, sum
//
// Each kernel runs on a grid of kTiles blocks, one 32x32 tile per block, and
// writes one float per tile. The host checks every tile against a float64
// reduction of the same float32 inputs, with bounds from kernels/tolerances.py
// (through the generated cpp/tolerances.h).
//
// Build: nvcc -std=c++20 -O3 -arch=sm_80 -enable-tile tile_spike.cu -o tile_spike
// Run:   ./tile_spike [--report PATH] [--seed N]
#include <cuda_tile.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "harness.h"

namespace ct = cuda::tiles;
using namespace ct::literals;

namespace tol = tileproof::tolerances;

constexpr std::size_t kTiles = 64;  // grid size: one tile per block
constexpr std::size_t kSide = 32;   // keep in step with the 32_ic below

// The input is kTiles tiles stacked vertically: (kTiles * 32) x 32, row-major.
// Block b owns tile (b, 0) and writes out[b].

__tile__ auto load_my_tile(const float* in, std::size_t tiles) {
    auto view = ct::partition_view{ct::tensor_span{in, ct::extents{tiles * 32, 32_ic}},
                                   ct::shape{32_ic, 32_ic}};
    return view.load(ct::bid().x, 0);
}

template <typename Tile>
__tile__ void store_my_total(float* out, std::size_t tiles, Tile total) {
    auto view = ct::partition_view{ct::tensor_span{out, ct::extents{tiles, 1_ic}},
                                   ct::shape{1_ic, 1_ic}};
    view.store(total, ct::bid().x, 0);
}

__tile_global__ void tile_max_native(const float* __restrict__ in, float* __restrict__ out,
                                     std::size_t tiles) {
    auto v = load_my_tile(in, tiles);
    auto m = ct::reduce_max(ct::reduce_max(v, 0_ic), 1_ic);  // (32,32) -> (1,32) -> (1,1)
    store_my_total(out, tiles, m);
}

__tile_global__ void tile_sum_via_scan(const float* __restrict__ in, float* __restrict__ out,
                                       std::size_t tiles) {
    auto v = load_my_tile(in, tiles);
    auto prefix = ct::partial_sum(ct::partial_sum(v, 0_ic), 1_ic);  // 2-D inclusive prefix sum
    auto total = ct::extract(prefix, ct::shape{1_ic, 1_ic}, 31, 31);  // its last element
    store_my_total(out, tiles, total);
}

__tile_global__ void tile_sum_native(const float* __restrict__ in, float* __restrict__ out,
                                     std::size_t tiles) {
    auto v = load_my_tile(in, tiles);
    auto s = ct::sum(ct::sum(v, 0_ic), 1_ic);  // (32,32) -> (1,32) -> (1,1)
    store_my_total(out, tiles, s);
}

namespace {

using Kernel = void (*)(const float*, float*, std::size_t);

/// Inputs in [0, 1): the table's sum bounds assume non-negative terms.
std::vector<float> make_input(std::mt19937_64& rng) {
    std::uniform_real_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(kTiles * kSide * kSide);
    for (auto& v : x) v = dist(rng);
    return x;
}

/// Per-tile float64 reference: the max, or the sum, of the tile's 1024 elements.
std::vector<double> reference(const std::vector<float>& x, bool is_max) {
    std::vector<double> want(kTiles);
    for (std::size_t t = 0; t < kTiles; ++t) {
        const float* tile = x.data() + t * kSide * kSide;
        double acc = is_max ? static_cast<double>(tile[0]) : 0.0;
        for (std::size_t i = 0; i < kSide * kSide; ++i) {
            acc = is_max ? std::max(acc, static_cast<double>(tile[i])) : acc + tile[i];
        }
        want[t] = acc;
    }
    return want;
}

/// Poison the output, launch one kernel over kTiles blocks, and check its totals.
void run_check(const tp::CheckSpec& spec, Kernel kernel, const tp::DeviceBuffer<float>& in,
               tp::DeviceBuffer<float>& out, const std::vector<double>& want, const std::vector<float>& x) {
    tp::begin_check(spec);
    out.poison();
    kernel<<<dim3(kTiles), 1>>>(in.ptr, out.ptr, kTiles);  // tile kernels: block size must be 1
    TP_LAUNCHED("tile kernel");
    tp::compare(spec, out.download(), want, {tp::input("x", {kTiles, kSide, kSide}, x)});
}

}  // namespace

int main(int argc, char** argv) {
    std::mt19937_64 rng = tp::start(argc, argv, "cpp/tile_spike.cu");

    const tp::CheckSpec max_spec{tol::get("tile_max_native"), {kTiles}, "float32"};
    const tp::CheckSpec scan_spec{tol::get("tile_sum_via_scan"), {kTiles}, "float32"};
    const tp::CheckSpec sum_spec{tol::get("tile_sum_native"), {kTiles}, "float32"};

    tp::begin_check(max_spec);  // a setup failure is charged to the first check
    const std::vector<float> x = make_input(rng);
    tp::DeviceBuffer<float> in(x.size()), out(kTiles);
    in.upload(x);

    const std::vector<double> want_max = reference(x, true);
    const std::vector<double> want_sum = reference(x, false);
    run_check(max_spec, tile_max_native, in, out, want_max, x);
    run_check(scan_spec, tile_sum_via_scan, in, out, want_sum, x);
    run_check(sum_spec, tile_sum_native, in, out, want_sum, x);
    tp::done();
}
