# FIXTURE stand-in for kernels/fused.py (tests only)
