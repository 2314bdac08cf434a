// The spike says an additive reduction "has to be expressed" as two partial_sum scans
// or a matmul against ones. This kernel writes it with the header's sum, in the spike's
// own style, and is built with THE nvcc command.
#include <cuda_tile.h>
namespace ct = cuda::tiles;
using S = ct::shape<32, 32>;

__tile_global__ void tile_sum_native(const float *__restrict__ in, float *__restrict__ out)
{
    auto idx = ct::iota<ct::tile<int, S>>();
    auto v   = ct::load(ct::broadcast(in, S{}) + idx);
    auto s   = ct::sum<0>(v);
    using R  = ct::shape<1, 32>;
    ct::store(ct::broadcast(out, R{}) + ct::iota<ct::tile<int, R>>(), s);
}

int main() { return 0; }
