"""The float64 reference of every program check, as tileproof recomputes it outside the program.

A program hands over each check's output and the inputs it was computed from (kernels/harness.py,
cpp/harness.h: .npy files and handover.json beside the check report). tileproof then loads this
module by path in a process of its own, with no GPU, and calls REFERENCES[check](**inputs) with
every handed-over input as a float64 numpy array; the result is compared with the handed-over
output under the check's entry in kernels/tolerances.py.

Rules for this file (tileproof enforces the first two before it runs a line of it):
  * import only numpy and math: never a program, the harness or cupy;
  * REFERENCES is a plain dict literal, check name -> a function defined here;
  * a reference is row-wise in its inputs whose first axis has the output's length: given only
    the rows 0, s, 2s, ... of those (a sampled handover), it returns those rows of the output.
    matmul(a, b) is: rows of a give rows of a @ b;
  * and column-wise in the inputs a program declares as column inputs (kernels/harness.py
    ``s.inputs(..., columns=("b",))``): above the cap tileproof passes the sampled pieces as they
    are, a[rows] and b[:, cols], and the reference must return the block out[rows][:, cols].
    matmul(a, b) is: a[rows] @ b[:, cols] is that block. fused is not (its softmax needs every
    column of a row): its program declares no column input;
  * COLUMNS names, per check, the inputs its reference is column-wise in: tileproof refuses a
    column sample of any other input (a block of softmax(x[:, cols]) is not a block of softmax(x)).
"""

import numpy as np


def matmul(a, b):
    """a @ b over the given (already rounded) input values."""
    return a @ b


def softmax(x):
    """Softmax along axis 1, row by row."""
    shifted = x - x.max(axis=1, keepdims=True)
    np.exp(shifted, out=shifted)
    shifted /= shifted.sum(axis=1, keepdims=True)
    return shifted


def fused(a, b):
    """softmax(a @ b), row by row."""
    return softmax(matmul(a, b))


def vector_add(a, b):
    """a + b, element by element."""
    return a + b


def tile_max(x):
    """The largest element of each tile x[t] (axis 0 indexes the tiles)."""
    return x.reshape(x.shape[0], -1).max(axis=1)


def tile_sum(x):
    """The sum of each tile x[t] (axis 0 indexes the tiles)."""
    return x.reshape(x.shape[0], -1).sum(axis=1)


REFERENCES = {
    "matmul": matmul,
    "softmax": softmax,
    "fused": fused,
    "online_softmax": softmax,
    "vector_add": vector_add,
    "tile_max_native": tile_max,
    "tile_sum_via_scan": tile_sum,
    "tile_sum_native": tile_sum,
}


COLUMNS = {
    "matmul": ("b",),
}
"""Check name -> the inputs its reference is column-wise in: ``ref(a[rows], b[:, cols])`` is
``ref(a, b)[rows][:, cols]``. The only inputs a program may hand over as a block's columns."""
