"""The fake GPU's launcher: ``cuda.tile.launch`` computes, with numpy, what each course kernel must.

On ``PYTHONPATH`` together with the fake ``cupy`` beside it, the course programs run on the CPU
(tests/data/fake_gpu_site/README.md). Kernels are told apart by their Python function's name.
"""

import numpy as np


def _softmax(x):
    x = np.asarray(x, dtype=np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _launch(_stream, _grid, kernel, args):
    name = kernel._pyfunc.__name__
    if name == "vector_add":
        a, b, c = args[:3]
        c[...] = a + b
    elif name == "tile_matmul":
        a, b, c = args[:3]
        c[...] = a.astype(np.float32) @ b.astype(np.float32)
    elif name == "fused_matmul_softmax":
        a, b, p = args[:3]
        p[...] = _softmax(a.astype(np.float32) @ b.astype(np.float32))
    elif name in ("row_softmax", "online_softmax"):
        x, y = args[:2]
        y[...] = _softmax(x)
    else:
        raise NotImplementedError(f"the fake GPU has no kernel {name}")


try:
    import cuda.tile as _ct
except ImportError:  # a program that imports no cuda.tile runs as it would
    pass
else:
    _ct.launch = _launch
