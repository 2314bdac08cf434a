// Day79, the C++ mirror: WRONG expectation, written as Python would have it: a
// reduction over axis 1 of an (8, 128) tile is (8,). The static_assert fails.
#include <cuda_tile.h>

#include <type_traits>

namespace ct = cuda::tiles;
using namespace ct::literals;

__tile_global__ void row_sums(const float* __restrict__ in, float* __restrict__ out) {
    auto x = ct::partition_view{ct::tensor_span{in, ct::extents{8_ic, 128_ic}}, ct::shape{8_ic, 128_ic}}.load(0, 0);
    auto s = ct::sum(x, 1_ic);
    static_assert(std::is_same_v<ct::tile_shape_t<decltype(s)>, ct::shape<8>>, "sum drops the axis");
    ct::partition_view{ct::tensor_span{out, ct::extents{8_ic}}, ct::shape{8_ic}}.store(ct::reshape(s, ct::shape<8>{}), 0);
}

int main() { return 0; }
