"""Ahead-of-time export of cuTile Python kernels: ``python -m tileproof.toolchain.aot``.

Usage: ``python -m tileproof.toolchain.aot PROGRAM KERNEL TARGET OUT [KERNEL TARGET OUT ...]``, or ``--kernels
PROGRAM OUT`` (the names of the kernels it declares, ``list_kernels``): every
export of one program in one process (``build`` makes one such call per program; when it fails,
each export runs alone, so that each has its own transcript and exit code). Each export is a real
tileiras run: cuTile's own disk cache (``CUDA_TILE_CACHE_DIR``, ~/.cache/cutile-python by default) is
switched off here, since ``build/`` is tileproof's cache and a compile record must not attest a cubin
that a cache outside the tree handed back.
An export that raises leaves ``OUT.failure.json`` beside its output: the exception's type and message
(``launch.failure_of``, as for a program's run), which ``build`` keeps typed in the compile record
(``BuildResult.failure``), never read back from the traceback.
The kernel's signatures come from the program's ``AOT_SIGNATURES`` dict, declared next to
the kernel and checked against its parameters (a ``ct.Constant`` takes its value; anything else
a constraint: a plain value there would bake a runtime parameter into the export). A kernel left
out is inferred when its annotations decide every entry (``ScalarAnnotation`` scalars); arrays
never are: cuTile's ``ArrayAnnotation`` carries no dtype or rank, so the error says what to write.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tileproof.records.errors import RecordError
from tileproof.toolchain import launch

FAILURE_SUFFIX = ".failure.json"
"""Beside an export's output (``OUT.failure.json``): the exception it raised."""


def load_program(path: Path):
    """Import a program file by path, without running its ``main``."""
    name = f"tileproof_program_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RecordError(path, "", "cannot be imported as a Python module", "check the file name")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


FIX = ("declare AOT_SIGNATURES = {'kernel_name': [harness.aot_signature(...)], ...} next to the kernels; "
       "one entry per parameter: an array is harness.aot_array(ct.float32, NDIM), a ct.Constant its value, "
       "a runtime scalar ScalarConstraint(ct.float32) from cuda.tile.compilation (AUTHORING.md)")


def kernels_of(module) -> dict[str, object]:
    """Every ``@ct.kernel`` defined at the module's top level, by name."""
    import cuda.tile as ct

    return {n: v for n, v in vars(module).items() if isinstance(v, ct.kernel)}


@dataclass(frozen=True)
class _Masked:
    """A parameter as cuda-tile before 1.5 describes it: only whether it is a ``ct.Constant``."""

    constant: bool
    scalar: None = None


def _parameters(kernel) -> list[tuple[str, Any]]:
    """(name, cuTile's annotation node) for each parameter of ``kernel``: cuda-tile 1.5 and later build one
    node per parameter (untyped); 1.3 and 1.4 keep only a mask of its ``ct.Constant`` parameters, read here
    as nodes that say nothing about scalars (so nothing is inferred from them)."""
    af = kernel._annotated_function
    nodes = getattr(af, "parameter_annotations", None)
    if nodes is None:
        nodes = [_Masked(bool(c)) for c in af.constant_parameter_mask]
    return list(zip(af.pysig.parameters, nodes, strict=True))


def _written(name: str, node) -> str | None:
    """How the signature entry of one parameter is written, or None when its annotation cannot say
    (an array: cuTile's annotations carry no dtype or rank; a ct.Constant: the value is the author's)."""
    scalar = getattr(node, "scalar", None)
    if scalar is not None and not getattr(node, "constant", False):
        return f"ScalarConstraint(ct.{scalar.dtype.name})"
    return None


def infer(kernel) -> list | None:
    """The kernel's one signature when every parameter's annotation decides its entry
    (``Annotated[int, ct.ScalarAnnotation(dtype=ct.int32)]``), else None."""
    from cuda.tile.compilation import (
        CallingConvention,
        KernelSignature,
        ScalarConstraint,
    )

    params = _parameters(kernel)
    if not params or any(_written(n, node) is None for n, node in params):
        return None
    return [KernelSignature([ScalarConstraint(node.scalar.dtype) for _n, node in params],
                            CallingConvention.cutile_python_v1())]


def missing(kernel) -> str:
    """What a signature of ``kernel`` must give, parameter by parameter (for the error line)."""
    parts = []
    for name, node in _parameters(kernel):
        if getattr(node, "constant", False):
            parts.append(f"{name}: its ct.Constant value")
        else:
            parts.append(f"{name}: " + (_written(name, node) or "harness.aot_array(DTYPE, NDIM) for an array, "
                                        "ScalarConstraint(DTYPE) for a runtime scalar"))
    return "; ".join(parts)


def _fits(path: Path, name: str, kernel, sig) -> None:
    """A signature must give one entry per parameter: a constant exactly for each ct.Constant. Checked only
    where cuda-tile describes each parameter (1.5 and later); an older release checks the signature itself
    when it exports, and its own refusal is what the compile record keeps."""
    from cuda.tile.compilation import ConstantConstraint

    if getattr(kernel._annotated_function, "parameter_annotations", None) is None:
        return
    params = _parameters(kernel)
    where = f"AOT_SIGNATURES[{name!r}]"
    if len(sig.parameters) != len(params):
        raise RecordError(path, where, f"a signature gives {len(sig.parameters)} entries for "
                          f"{len(params)} parameters ({missing(kernel)})", FIX)
    for (pname, node), given in zip(params, sig.parameters, strict=True):  # lengths checked above
        constant = isinstance(given, ConstantConstraint)
        if getattr(node, "constant", False) and not constant:
            raise RecordError(path, where, f"parameter '{pname}' is a ct.Constant; the signature gives "
                              f"{type(given).__name__}", "give its value (e.g. TILE) in that place")
        if constant and not getattr(node, "constant", False):
            raise RecordError(path, where, f"parameter '{pname}' is a runtime parameter but the signature gives "
                              f"the constant {given.value!r}: the export would bake it in",
                              "write ScalarConstraint(ct.float32) (from cuda.tile.compilation; the scalar's "
                              "dtype) for a runtime scalar, harness.aot_array(DTYPE, NDIM) for an array")


def declared_kernels(path: Path, module=None) -> dict[str, list]:
    """Each kernel of a program with its signatures: ``AOT_SIGNATURES``'s, checked against the kernel's
    parameters, or inferred from its annotations where they decide every entry (``infer``). ``module``:
    the program already imported (``load_program``)."""
    from cuda.tile.compilation import KernelSignature

    module = load_program(path) if module is None else module
    decl = getattr(module, "AOT_SIGNATURES", None)
    kernels = kernels_of(module)
    if not isinstance(decl, dict):
        found = "none" if decl is None else type(decl).__name__
        raise RecordError(path, "AOT_SIGNATURES", f"expected a dict of kernel name -> signatures, found {found}", FIX)
    if not (decl or kernels):
        raise RecordError(path, "AOT_SIGNATURES", "is empty and the file defines no @ct.kernel function: "
                                                  "nothing to export", FIX)
    out: dict[str, list] = {}
    for name, sigs in decl.items():
        if not isinstance(name, str) or name not in kernels:
            raise RecordError(path, f"AOT_SIGNATURES[{name!r}]", "names no kernel defined in this file", FIX)
        if not isinstance(sigs, (list, tuple)) or not sigs or not all(isinstance(s, KernelSignature) for s in sigs):
            raise RecordError(path, f"AOT_SIGNATURES[{name!r}]", "expected a non-empty list of KernelSignature", FIX)
        for sig in sigs:
            _fits(path, name, kernels[name], sig)
        out[name] = list(sigs)
    covered = {id(kernels[n]) for n in out}  # a kernel bound to several names needs signatures under one
    for name, kernel in kernels.items():
        if id(kernel) not in covered:
            covered.add(id(kernel))
            inferred = infer(kernel)
            if inferred is None:
                raise RecordError(path, f"AOT_SIGNATURES[{name!r}]", "missing, and the kernel's annotations "
                                  f"cannot decide it: {missing(kernel)}", FIX)
            out[name] = inferred
    return out


def export(path: Path, exports: list[tuple[str, str, Path]]) -> None:
    """Export each (kernel, target, out) of one program, importing the program once; a line per export. An
    exception is written beside the output of the export it ended (``failure_file``), then raised on."""
    out = exports[0][2]
    try:
        from cuda.tile.compilation import export_kernel

        module = load_program(path)
        sigs = declared_kernels(path, module)
        for kernel, target, out in exports:
            export_kernel(getattr(module, kernel), sigs[kernel], str(out), gpu_code=target, output_format="cubin")
            print(f"exported {path}:{kernel} for {target} to {out}", flush=True)
    except Exception as exc:
        failure_file(out).write_text(json.dumps(launch.failure_of(exc)))
        raise


def failure_file(out: Path) -> Path:
    """Where an export to ``out`` leaves the exception it raised."""
    return out.with_name(out.name + FAILURE_SUFFIX)


KERNELS = "--kernels"
"""``python -m tileproof.toolchain.aot --kernels PROGRAM OUT``: the names of the kernels ``PROGRAM`` declares
(``declared_kernels``), written to ``OUT`` as a JSON list; a declaration it refuses is one line on stderr, exit 2.
``runner.builds`` runs it behind the wall: a program is imported only there, never in a process that signs."""


def list_kernels(path: Path, out: Path) -> int:
    """``--kernels``: the declared kernels' names to ``out``; a refused declaration one line (exit 2)."""
    try:
        names = list(declared_kernels(path))
    except RecordError as e:
        print(e, file=sys.stderr)
        return 2
    out.write_text(json.dumps(names))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == KERNELS:
        os.environ["CUDA_TILE_CACHE_DIR"] = "off"
        return list_kernels(Path(argv[1]), Path(argv[2]))
    if len(argv) < 4 or (len(argv) - 1) % 3:
        print(__doc__, file=sys.stderr)
        return 2
    os.environ["CUDA_TILE_CACHE_DIR"] = "off"  # read when cuda.tile is first imported (see above)
    rest = argv[1:]
    export(Path(argv[0]), [(rest[i], rest[i + 1], Path(rest[i + 2])) for i in range(0, len(rest), 3)])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
