"""The fake GPU's launcher: ``cuda.tile.launch`` computes, with numpy, what each course kernel must.

On ``PYTHONPATH`` together with the fake ``cupy`` beside it, the course programs run on the CPU
(tests/data/fake_gpu_site/README.md). Kernels are told apart by their Python function's name.
``cuda.tile`` gets the stand-in as it is imported (``_Patch``): a Python process that never imports it
(a hostile program, ``pip freeze``, a capability probe) imports neither it nor numpy for nothing.
"""

import importlib.abc
import importlib.machinery
import sys


def _softmax(x):
    import numpy as np

    x = np.asarray(x, dtype=np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _launch(_stream, _grid, kernel, args):
    import numpy as np

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


class _Patch(importlib.abc.MetaPathFinder):
    """Finds ``cuda.tile`` where the interpreter would, and replaces its ``launch`` once the module has run; a
    program that imports no cuda.tile runs as it would."""

    def find_spec(self, name, path, target=None):
        if name != "cuda.tile":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.launch = _launch

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Patch())
