// The spike: a __global__ function cannot call tile code. WRONG: a SIMT kernel calls a
// __tile__ function.
#include <cuda_tile.h>

__tile__ float twice(float x) { return 2.0f * x; }

__global__ void simt_kernel(float* out) { out[0] = twice(out[0]); }

int main() { return 0; }
