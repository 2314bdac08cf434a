"""The tile toolchain: finding nvcc/tileiras/ptxas, the one nvcc command, AOT export, diagnoses."""
