// Day79, the C++ mirror: C++ reductions keep the reduced axis, with length 1.
// RIGHT: the static_asserts hold, so this compiles.
#include <cuda_tile.h>

#include <type_traits>

namespace ct = cuda::tiles;
using namespace ct::literals;

__tile_global__ void row_stats(const float* __restrict__ in, float* __restrict__ out) {
    auto x = ct::partition_view{ct::tensor_span{in, ct::extents{8_ic, 128_ic}}, ct::shape{8_ic, 128_ic}}.load(0, 0);
    auto s = ct::sum(x, 1_ic);
    auto m = ct::reduce_max(x, 1_ic);
    static_assert(std::is_same_v<ct::tile_shape_t<decltype(s)>, ct::shape<8, 1>>, "sum keeps the axis");
    static_assert(std::is_same_v<ct::tile_shape_t<decltype(m)>, ct::shape<8, 1>>, "reduce_max keeps the axis");
    ct::partition_view{ct::tensor_span{out, ct::extents{8_ic, 1_ic}}, ct::shape{8_ic, 1_ic}}.store(s + m, 0, 0);
}

int main() { return 0; }
