// FIXTURE stand-in for cpp/tile_matmul_softmax.cu (tests only)
