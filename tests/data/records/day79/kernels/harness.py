# FIXTURE stand-in for kernels/harness.py (tests only)
