"""tileproof's own check of what programs handed over, run in a process of its own (``runner.outside_check``
starts it, once per run session): ``python -m tileproof.runner.outside_worker``.

It answers one job per line of its stdin, one JSON line per job on its stdout, and ends at the end of its input.
A job is ``{"job": ID, "folder": FOLDER, "plan": PLAN}``: FOLDER the program's report folder, PLAN tileproof's own
file in the worker's scratch: the checks of the program's ``handover.json`` as ``outside_check.plan`` validated
them (``records.handover.Handover``), each one's tolerance entry, and the text of the lesson's reference table
``kernels/references.py`` as tileproof read it. The answer is ``{"job": ID, "checks": [...]}``, each check an
``OutsideCheck`` (``"refused"``: one line, when the reference table cannot be used). The worker sees no GPU
(``CUDA_VISIBLE_DEVICES`` empty, ``cupy`` unimportable) and none of the program's code: it reads the ``.npy``
files the plan names from FOLDER through ``records.safe_read`` (no links, capped, ``numpy.load`` with
``allow_pickle=False``), holds each to the dtype and shape the manifest says, runs the reference table's text
(a fresh module per job) after checking that it imports nothing but numpy and math,
recomputes each check's reference in float64, applies the check's tolerance entry, and answers. What the table
prints goes to stderr, never into the answers. Whatever it cannot read, it refuses by name; it never reads the
program's report. It imports numpy and the safe reader only (no pydantic, no record model): its start is most of
its cost, paid once per session.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import math
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tileproof.records.errors import InputRefused
from tileproof.records.safe_read import read_bytes

Entry = dict[str, Any]
"""One ``records.handover.HandedArray`` as the plan holds it (validated by ``outside_check.plan``)."""

REFERENCE_IMPORTS = frozenset({"numpy", "math", "__future__"})
"""What a reference module may import: nothing of a program, the harness or a GPU library."""


class Refused(Exception):
    """A handed-over file or the reference table is not what it must be; the text is the one line."""


def _number(value: float) -> float | str:
    """A float as records hold it: non-finite values as the strings ``nan``, ``inf``, ``-inf``."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def references(text: str | None, shown: str) -> dict[str, Callable[..., Any]]:
    """``REFERENCES`` of the reference table's ``text`` (None: there is none; ``shown``: its path in messages):
    its imports checked before any line of it runs."""
    if text is None:
        return {}
    tree = ast.parse(text, shown)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        if isinstance(node, ast.ImportFrom) and node.level:
            names = ["." + (node.module or "")]
        bad = [n for n in names if n.split(".")[0] not in REFERENCE_IMPORTS]
        if bad:
            raise Refused(f"{shown}:{node.lineno}: imports {bad[0]}; a reference module imports only "
                          "numpy and math (fix: compute the reference here, from the handed-over inputs)")
    module = types.ModuleType("tileproof_references")
    module.__file__ = shown
    exec(compile(tree, shown, "exec"), module.__dict__)  # noqa: S102 (the lesson's own table)
    table = getattr(module, "REFERENCES", None)
    if not isinstance(table, dict) or not all(isinstance(k, str) and callable(v) for k, v in table.items()):
        raise Refused(f"{shown}: REFERENCES must be a dict of check name -> function")
    return table


def _load(folder: Path, entry: Entry, name: str) -> np.ndarray:
    """One handed-over array, as the manifest says it is (dtype, shape, rows kept), or ``Refused``."""
    file, sample = entry["file"], entry.get("sample")
    try:
        data = read_bytes(folder, file, "handover", file)
    except InputRefused as e:
        raise Refused(str(e)) from None
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise Refused(f"{file}: not a .npy array ({e})") from None
    if not isinstance(array, np.ndarray) or array.dtype.str != entry["dtype"]:
        raise Refused(f"{file}: dtype {getattr(array, 'dtype', None)}, the manifest says {entry['dtype']}")
    shape = list(entry["shape"])
    if sample is not None:
        if not shape:
            raise Refused(f"{file}: a sampled array needs a first axis")
        shape[0] = -(-shape[0] // sample["stride"])
    if list(array.shape) != shape:
        raise Refused(f"{file}: shape {list(array.shape)}, the manifest says {shape} "
                      f"({'sampled' if sample else 'whole'}) for check {name}")
    return array


def _digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _result(name: str, status: str, problem: str | None, why: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "status": status, "problem": problem, "why": why, **more}


def check_one(folder: Path, check: dict[str, Any], refs: dict[str, Callable[..., Any]],
              table: dict[str, list[float]], shown: str) -> dict[str, Any]:
    """One check's outside verdict (an ``OutsideCheck`` as a dict); ``check``: a ``HandedCheck`` as the plan
    holds it, ``table``: check name -> [rtol, atol], ``shown``: the reference table's path in messages."""
    name = check["name"]
    out_entry = check["output"]
    sample = out_entry.get("sample")
    stride = sample["stride"] if sample else None
    try:
        got = _load(folder, out_entry, name)
        inputs = {k: _load(folder, v, name) for k, v in check.get("inputs", {}).items()}
    except Refused as e:
        return _result(name, "failed", "refused", str(e))
    whole = sample["whole_sha256"] if sample else _digest(got)
    more: dict[str, Any] = {"sampled_stride": stride, "output_sha256": whole}
    g = got.astype(np.float64)
    if g.size and not bool(np.isfinite(g).all()):
        bad = int(g.size - np.count_nonzero(np.isfinite(g)))
        return _result(name, "failed", "non-finite", f"{bad} of {g.size} output elements are NaN or Inf", **more)
    withheld = check.get("withheld") or []
    if withheld:
        return _result(name, "unverified", "withheld-input",
                       f"input {withheld[0]} was not handed over (above the cap, not row-aligned)", **more)
    fn = refs.get(name)
    if fn is None:
        return _result(name, "unverified", "no-reference",
                       f"{shown} declares no reference for {name}", **more)
    entry = table.get(name)
    if entry is None:
        return _result(name, "unverified", "no-reference", f"kernels/tolerances.py has no entry for {name}", **more)
    try:
        with np.errstate(all="ignore"):
            want = np.asarray(fn(**{k: v.astype(np.float64) for k, v in inputs.items()}), dtype=np.float64)
    except Exception as e:  # noqa: BLE001 (the lesson's function: any exception is its failure, named)
        return _result(name, "failed", "reference-error",
                       f"{shown} {name}(): {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                       **more)
    if want.shape != g.shape:
        return _result(name, "failed", "reference-error",
                       f"the reference has shape {list(want.shape)}, the handed-over output {list(g.shape)}", **more)
    return _compare(name, g, want, entry, stride, more)


def _compare(name: str, g: np.ndarray, want: np.ndarray, entry: list[float], stride: int | None,
             more: dict[str, Any]) -> dict[str, Any]:
    """The handed-over output ``g`` against the reference's ``want`` (float64, the same shape) within the
    tolerance entry ``entry`` ([rtol, atol]); ``more``: what the result says besides, filled in here."""
    rtol, atol = entry
    with np.errstate(all="ignore"):
        err = np.abs(g - want)
        ok = (err <= atol + rtol * np.abs(want)) & np.isfinite(want)
        nonzero = want != 0
        rel = float(np.max(err[nonzero] / np.abs(want[nonzero]))) if bool(nonzero.any()) else 0.0
    mismatches = int(ok.size - np.count_nonzero(ok))
    more.update(checked=int(ok.size), mismatches=mismatches,
                max_abs_err=_number(float(err.max())) if err.size else 0.0, max_rel_err=_number(rel))
    sampled = f" (every {stride}th row)" if stride else ""
    if g.size > 1 and bool((g == g.flat[0]).all()) and not bool((want == want.flat[0]).all()):
        return _result(name, "failed", "all-equal",
                       f"every output element is {float(g.flat[0])!r}, the reference's are not all equal", **more)
    if mismatches or not ok.size:
        first = np.unravel_index(int(np.argmin(ok)), ok.shape) if ok.size else ()
        where = (f" first at {tuple(int(i) for i in first)}: got {float(g[first])!r}, want {float(want[first])!r}"
                 if ok.size else "")
        return _result(name, "failed", "mismatch", f"{mismatches} of {ok.size} elements{sampled} beyond rtol "
                       f"{rtol:g}, atol {atol:g};{where}", **more)
    return _result(name, "passed", None, f"{ok.size} elements{sampled} within rtol {rtol:g}, "
                   f"atol {atol:g} of tileproof's float64 reference", **more)


def check_plan(folder: Path, plan: dict[str, Any]) -> dict[str, Any]:
    """Every planned check of ``folder`` (the step's report folder), as ``{"checks": [...]}``; a reference table
    that cannot be used fails every check by name (``refused``)."""
    shown = plan.get("references_file", "references")
    try:
        refs = references(plan.get("references"), shown)
    except (Refused, SyntaxError) as e:
        return {"checks": [], "refused": str(e).splitlines()[0]}
    table = plan.get("table", {})
    return {"checks": [check_one(folder, c, refs, table, shown) for c in plan.get("checks", [])]}


def serve(lines: Any, answer: Any) -> int:
    """Answer every job of ``lines`` (tileproof's own, one JSON object a line) through ``answer`` (one line)."""
    for line in lines:
        job = json.loads(line)
        plan = json.loads(Path(job["plan"]).read_text(encoding="utf-8"))  # tileproof's own file
        answer(json.dumps({"job": job["job"], **check_plan(Path(job["folder"]), plan)}, allow_nan=False))
    return 0


def main(argv: list[str]) -> int:
    if argv:
        print("usage: python -m tileproof.runner.outside_worker (jobs on stdin, one a line)", file=sys.stderr)
        return 2
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    sys.modules["cupy"] = None  # type: ignore[assignment]  # import cupy now raises ImportError
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # what a reference table prints goes to stderr, never among the answers
    sys.stdout = sys.stderr

    def answer(text: str) -> None:
        answers.write(text + "\n")
        answers.flush()

    return serve(sys.stdin, answer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
