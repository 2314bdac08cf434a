# FIXTURE stand-in for kernels/tile_matmul_softmax.py (tests only)
