// A minimal correct tile program, for the claims about nvcc's flags (day79 pitfalls):
// built with THE nvcc command it compiles; -std=c++17 instead of -std=c++20, or the
// command without -enable-tile, are the two wrong builds the lesson describes.
#include <cuda_tile.h>

namespace ct = cuda::tiles;
using namespace ct::literals;

__tile_global__ void scale(const float* __restrict__ in, float* __restrict__ out) {
    auto src = ct::partition_view{ct::tensor_span{in, ct::extents{64_ic}}, ct::shape{16_ic}};
    auto dst = ct::partition_view{ct::tensor_span{out, ct::extents{64_ic}}, ct::shape{16_ic}};
    dst.store(src.load(ct::bid().x) * 2.0f, ct::bid().x);
}

int main() { return 0; }
