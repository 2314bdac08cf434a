"""bench: timing the course kernels against cuBLAS/cupy; bench records."""
