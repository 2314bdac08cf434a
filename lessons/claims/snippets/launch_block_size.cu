// Day79 pitfall: a tile kernel's launch takes a block size of exactly 1.
//   --case thread-count   launches fill<<<4, 256>>>; stated: refused or wrong output
//   --case block-size-1   launches fill<<<4, 1>>>;   stated: right output
// Each of the 4 tile blocks writes 16 copies of (its index + 1). Prints one JSON line
// {"observed": ..., "detail": ...}; exit 0 = stated result observed, 1 = not, 2 = no GPU.
#include <cuda_tile.h>

#include <cstdio>
#include <cstring>

namespace ct = cuda::tiles;
using namespace ct::literals;

__tile_global__ void fill(float* out) {
    auto view = ct::partition_view{ct::tensor_span{out, ct::extents{64_ic}}, ct::shape{16_ic}};
    const unsigned b = ct::bid().x;
    view.store(ct::full<ct::tile<float, ct::shape<16>>>(static_cast<float>(b + 1)), b);
}

static int report(bool observed, const char* detail) {
    std::printf("{\"observed\": %s, \"detail\": \"%s\"}\n", observed ? "true" : "false", detail);
    return observed ? 0 : 1;
}

int main(int argc, char** argv) {
    const bool threads = argc == 3 && std::strcmp(argv[1], "--case") == 0 && std::strcmp(argv[2], "thread-count") == 0;
    const bool one = argc == 3 && std::strcmp(argv[1], "--case") == 0 && std::strcmp(argv[2], "block-size-1") == 0;
    if (!threads && !one) {
        std::fprintf(stderr, "usage: %s --case thread-count|block-size-1\n", argv[0]);
        return 2;
    }
    float* d = nullptr;
    if (cudaMalloc(&d, 64 * sizeof(float)) != cudaSuccess || cudaMemset(d, 0, 64 * sizeof(float)) != cudaSuccess) {
        std::printf("{\"observed\": null, \"detail\": \"no usable GPU: %s\"}\n", cudaGetErrorString(cudaGetLastError()));
        return 2;
    }
    if (threads) {
        fill<<<4, 256>>>(d);
    } else {
        fill<<<4, 1>>>(d);
    }
    cudaError_t launch = cudaGetLastError();
    cudaError_t sync = cudaDeviceSynchronize();
    float h[64] = {};
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    int wrong = 0;
    for (int i = 0; i < 64; ++i) wrong += h[i] != static_cast<float>(i / 16 + 1);
    char detail[256];
    std::snprintf(detail, sizeof detail, "<<<4, %d>>>: launch %s, sync %s, %d of 64 outputs wrong", threads ? 256 : 1,
                  cudaGetErrorName(launch), cudaGetErrorName(sync), wrong);
    const bool right = launch == cudaSuccess && sync == cudaSuccess && wrong == 0;
    return report(threads ? !right : right, detail);
}
