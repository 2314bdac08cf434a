// The reduction spike's own reproduction code ("Reproducing: tile_spike.cu"), verbatim.
// Its REG/SHARED table came from: nvcc --enable-tile --tilefatbin -std=c++20 -arch=sm_89
// tile_spike.cu; cuobjdump -res-usage.
#include <cuda_tile.h>
namespace ct = cuda::tiles;
using S = ct::shape<32, 32>;

__tile_global__ void tile_sum_via_scan(const float *__restrict__ in, float *__restrict__ out)
{
    auto idx  = ct::iota<ct::tile<int, S>>();
    auto v    = ct::load(ct::broadcast(in, S{}) + idx);
    auto rows = ct::partial_sum<0>(v);
    auto all  = ct::partial_sum<1>(rows);
    ct::store(ct::broadcast(out, S{}) + idx, all);
}

__tile_global__ void tile_max_native(const float *__restrict__ in, float *__restrict__ out)
{
    auto idx = ct::iota<ct::tile<int, S>>();
    auto v   = ct::load(ct::broadcast(in, S{}) + idx);
    auto m   = ct::reduce_max<0>(v);
    using R  = ct::shape<1, 32>;
    ct::store(ct::broadcast(out, R{}) + ct::iota<ct::tile<int, R>>(), m);
}
