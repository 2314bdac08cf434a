// A minimal tile program that compiles for every target but sm_80 (tests/test_build.py: the compile of a
// tree and its warm rerun, one nvcc call for several targets, and what happens when one target breaks it).
#include <cuda_tile.h>
#include <cstddef>
namespace ct = cuda::tiles;
using namespace ct::literals;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 800
#error "this program refuses sm_80"
#endif
__tile_global__ void twice(const float* __restrict__ in, float* __restrict__ out, std::size_t tiles) {
    auto src = ct::partition_view{ct::tensor_span{in, ct::extents{tiles * 32, 32_ic}}, ct::shape{32_ic, 32_ic}};
    auto dst = ct::partition_view{ct::tensor_span{out, ct::extents{tiles * 32, 32_ic}}, ct::shape{32_ic, 32_ic}};
    auto v = src.load(ct::bid().x, 0);
    dst.store(v + v, ct::bid().x, 0);
}
int main() { return 0; }
