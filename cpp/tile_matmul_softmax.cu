// C++ mirror of the lesson's tile matmul and row softmax (CUDA Tile C++).
//
//   gemm         C = A @ B: FP16 A (256x128) and B (128x128), FP32 accumulator,
//                one 32x32 tile of C per block, 8 K-steps of (32x16) @ (16x32).
//   softmaxRows  Y = softmax(C) row-wise: one block loads 8 whole rows as one
//                (8, 128) tile, so the max and the sum never leave the tile.
//
// Both kernels are launched <<<grid, 1>>>: a tile kernel's block size must be 1,
// the compiler picks the threads. Each check isolates one kernel: the matmul is
// checked against float64 over the same FP16-rounded inputs, the softmax
// against a float64 softmax of the GPU's own matmul output. Bounds come from
// kernels/tolerances.py (through the generated cpp/tolerances.h).
//
// Build: nvcc -std=c++20 -O3 -arch=sm_80 -enable-tile tile_matmul_softmax.cu -o tile_matmul_softmax
// Run:   ./tile_matmul_softmax [--report PATH] [--seed N]
#include <cuda_tile.h>

#if __has_include(<nv/target>)
#include <cuda_fp16.h>
#else
// The pip toolkit (nvidia-cuda-nvcc) ships without CCCL, and cuda_fp16.h needs
// CCCL's <nv/target>. cuda_tile.h only declares __half; a tile of it needs the
// complete type, marked as a tile builtin exactly as cuda_fp16.h marks it.
// The kernels use it only as FP16 storage; the host writes the bits itself.
struct __tile_builtin__ __align__(2) __half {
    unsigned short bits;
};
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "harness.h"

namespace ct = cuda::tiles;
using namespace ct::literals;

namespace tol = tileproof::tolerances;

constexpr std::size_t kM = 256, kN = 128, kK = 128;  // C is kM x kN, K = kK
constexpr std::size_t kTm = 32, kTn = 32, kTk = 16;  // keep in step with gemm's shapes
constexpr std::size_t kRowsPerTile = 8;              // keep in step with softmaxRows' tr

__tile_global__ void gemm(const __half* __restrict__ a, const __half* __restrict__ b,
                          float* __restrict__ c, std::size_t m, std::size_t n, std::size_t k) {
    // One block owns the (bm, bn) tile of C; there is no thread index.
    auto aView = ct::partition_view{ct::tensor_span{a, ct::extents{m, k}}, ct::shape{32_ic, 16_ic}};
    auto bView = ct::partition_view{ct::tensor_span{b, ct::extents{k, n}}, ct::shape{16_ic, 32_ic}};
    auto cView = ct::partition_view{ct::tensor_span{c, ct::extents{m, n}}, ct::shape{32_ic, 32_ic}};

    const unsigned bm = ct::bid().x;
    const unsigned bn = ct::bid().y;
    auto acc = ct::zeros<ct::tile<float, ct::shape<32, 32>>>();
    const std::size_t kSteps = (k + 15) / 16;
    for (std::size_t kk = 0; kk < kSteps; ++kk) {
        auto aTile = aView.load_masked(bm, kk);  // a short edge tile is zero-padded
        auto bTile = bView.load_masked(kk, bn);
        acc = ct::mma(aTile, bTile, acc);        // FP16 x FP16 into the FP32 accumulator
    }
    cView.store_masked(acc, bm, bn);             // lanes past the edge are dropped
}

__tile_global__ void softmaxRows(const float* __restrict__ in, float* __restrict__ out,
                                 std::size_t rows) {
    in = ct::assume_aligned(in, 16_ic);
    out = ct::assume_aligned(out, 16_ic);

    constexpr auto tr = 8_ic;    // kRowsPerTile
    constexpr auto tc = 128_ic;  // kN

    auto inView = ct::partition_view{ct::tensor_span{in, ct::extents{rows, tc}}, ct::shape{tr, tc}};
    auto outView = ct::partition_view{ct::tensor_span{out, ct::extents{rows, tc}}, ct::shape{tr, tc}};

    const unsigned bx = ct::bid().x;
    auto x = inView.load_masked(bx, 0);

    // C++ reductions keep the reduced axis: (8, 128) -> (8, 1), which then
    // broadcasts back over the rows. Python's ct.max needs keepdims=True for this.
    auto mx = ct::reduce_max(x, 1_ic);
    auto num = ct::exp(x - mx);
    auto den = ct::sum(num, 1_ic);
    outView.store_masked(num / den, bx, 0);
}

static_assert(kTm == 32 && kTn == 32 && kTk == 16, "gemm's tile shapes are literals");
static_assert(kN == 128 && kRowsPerTile == 8, "softmaxRows' tile shape is a literal");
static_assert(kM % kTm == 0 && kN % kTn == 0 && kM % kRowsPerTile == 0, "whole tiles only");

namespace {

/// IEEE binary16 bits of f, rounded to nearest even (finite f, |f| < 65520).
std::uint16_t half_bits(float f) {
    const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const double a = std::fabs(static_cast<double>(f));
    if (a == 0.0) return sign;
    int e = 0;
    std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
    if (e - 1 < -14) {  // subnormal: units of 2^-24 (1024 units carry into the smallest normal)
        return sign | static_cast<std::uint16_t>(std::nearbyint(std::ldexp(a, 24)));
    }
    double q = std::nearbyint(std::ldexp(a, 10 - (e - 1)));  // significand in [1024, 2048]
    if (q == 2048.0) {
        q = 1024.0;
        ++e;
    }
    return sign | static_cast<std::uint16_t>(((e - 1 + 15) << 10) | (static_cast<int>(q) - 1024));
}

/// The value of binary16 bits h (finite).
double half_value(std::uint16_t h) {
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24)
                                           : std::ldexp(1024 + mantissa, exponent - 25);
    return (h & 0x8000) ? -magnitude : magnitude;
}

/// n values uniform in [-1, 1), rounded to FP16: the device bits and their exact values.
void make_fp16(std::mt19937_64& rng, std::size_t n, std::vector<std::uint16_t>& bits,
               std::vector<double>& values) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    bits.resize(n);
    values.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        bits[i] = half_bits(dist(rng));
        values[i] = half_value(bits[i]);
    }
}

/// float64 C = A @ B over the FP16-rounded values.
std::vector<double> matmul_reference(const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> c(kM * kN, 0.0);
    for (std::size_t i = 0; i < kM; ++i) {
        for (std::size_t p = 0; p < kK; ++p) {
            const double aip = a[i * kK + p];
            for (std::size_t j = 0; j < kN; ++j) c[i * kN + j] += aip * b[p * kN + j];
        }
    }
    return c;
}

/// float64 row softmax of the GPU's float32 matmul output.
std::vector<double> softmax_reference(const std::vector<float>& x) {
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < kM; ++i) {
        const float* row = x.data() + i * kN;
        const double mx = *std::max_element(row, row + kN);
        double den = 0.0;
        for (std::size_t j = 0; j < kN; ++j) den += y[i * kN + j] = std::exp(row[j] - mx);
        for (std::size_t j = 0; j < kN; ++j) y[i * kN + j] /= den;
    }
    return y;
}

}  // namespace

int main(int argc, char** argv) {
    std::mt19937_64 rng = tp::start(argc, argv, "cpp/tile_matmul_softmax.cu");

    const tp::CheckSpec matmul_spec{tol::get("matmul"), {kM, kN}, "float32"};
    const tp::CheckSpec softmax_spec{tol::get("softmax"), {kM, kN}, "float32"};

    tp::begin_check(matmul_spec);  // a setup failure is charged to the first check
    std::vector<std::uint16_t> a_bits, b_bits;
    std::vector<double> a_values, b_values;
    make_fp16(rng, kM * kK, a_bits, a_values);
    make_fp16(rng, kK * kN, b_bits, b_values);

    tp::DeviceBuffer<std::uint16_t> a(a_bits.size()), b(b_bits.size());
    tp::DeviceBuffer<float> c(kM * kN), y(kM * kN);
    a.upload(a_bits);
    b.upload(b_bits);

    // matmul: 8 x 4 tile blocks, one per 32x32 tile of C.
    c.poison();
    gemm<<<dim3(kM / kTm, kN / kTn), 1>>>(reinterpret_cast<const __half*>(a.ptr),
                                          reinterpret_cast<const __half*>(b.ptr), c.ptr, kM, kN, kK);
    TP_LAUNCHED("gemm");
    const std::vector<float> c_gpu = c.download();
    tp::compare(matmul_spec, c_gpu, matmul_reference(a_values, b_values),
                {tp::input("a", {kM, kK}, a_bits), tp::input("b", {kK, kN}, b_bits)});

    // softmax over the GPU's C: 32 tile blocks of 8 whole rows.
    tp::begin_check(softmax_spec);
    y.poison();
    softmaxRows<<<dim3(kM / kRowsPerTile), 1>>>(c.ptr, y.ptr, kM);
    TP_LAUNCHED("softmaxRows");
    tp::compare(softmax_spec, y.download(), softmax_reference(c_gpu), {tp::input("x", {kM, kN}, c_gpu)});

    tp::done();
}
