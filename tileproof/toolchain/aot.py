"""Ahead-of-time export of one cuTile Python kernel: ``python -m tileproof.aot``.

Run as its own process by ``build`` so that each export has its own
transcript and exit code. Usage: ``python -m tileproof.aot PROGRAM KERNEL TARGET OUT``.
The kernel's signatures come from the program's ``AOT_SIGNATURES`` dict,
declared next to the kernel.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from tileproof.records.errors import RecordError


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


def declared_kernels(path: Path) -> dict[str, list]:
    """``AOT_SIGNATURES`` of a program, validated: kernel name → signatures."""
    from cuda.tile.compilation import KernelSignature

    module = load_program(path)
    decl = getattr(module, "AOT_SIGNATURES", None)
    fix = "declare AOT_SIGNATURES = {'kernel_name': [KernelSignature(...), ...]} next to the kernels"
    if not isinstance(decl, dict) or not decl:
        raise RecordError(path, "AOT_SIGNATURES", f"expected a non-empty dict, found {type(decl).__name__}", fix)
    for name, sigs in decl.items():
        if not isinstance(name, str) or not hasattr(module, name):
            raise RecordError(path, f"AOT_SIGNATURES[{name!r}]", "names no kernel defined in this file", fix)
        if not isinstance(sigs, (list, tuple)) or not sigs or not all(isinstance(s, KernelSignature) for s in sigs):
            raise RecordError(path, f"AOT_SIGNATURES[{name!r}]", "expected a non-empty list of KernelSignature", fix)
    return {name: list(sigs) for name, sigs in decl.items()}


def export(path: Path, kernel: str, target: str, out: Path) -> None:
    from cuda.tile.compilation import export_kernel

    module = load_program(path)
    sigs = declared_kernels(path)[kernel]
    export_kernel(getattr(module, kernel), sigs, str(out), gpu_code=target, output_format="cubin")


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    program, kernel, target, out = argv
    export(Path(program), kernel, target, Path(out))
    print(f"exported {program}:{kernel} for {target} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
