// The spike: tile code needs its own entry point. RIGHT: a __tile_global__ kernel calls
// the same __tile__ function.
#include <cuda_tile.h>

namespace ct = cuda::tiles;
using namespace ct::literals;

__tile__ auto twice(auto x) { return x * 2.0f; }

__tile_global__ void tile_kernel(float* out) {
    auto view = ct::partition_view{ct::tensor_span{out, ct::extents{16_ic}}, ct::shape{16_ic}};
    view.store(twice(view.load(0)), 0);
}

int main() { return 0; }
