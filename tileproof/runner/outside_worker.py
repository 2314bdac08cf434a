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
program's report. It imports numpy, the safe reader and the Python source reader only (no pydantic, no record
model): its start is most of its cost, paid once per session.
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

from tileproof.records import python_source
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


def references(text: str | None, shown: str) -> tuple[dict[str, Callable[..., Any]], dict[str, frozenset[str]]]:
    """(``REFERENCES``, ``COLUMNS``) of the reference table's ``text`` (None: there is none; ``shown``: its path in
    messages), its imports checked before any line of it runs. ``COLUMNS``: check name -> the inputs its reference is
    column-wise in (optional; none when absent): the only inputs a block sample may hand over as columns."""
    if text is None:
        return {}, {}
    tree = python_source.parse(text, shown)
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
    columns = getattr(module, "COLUMNS", {})
    if not isinstance(columns, dict) or not all(
            isinstance(k, str) and isinstance(v, (tuple, list, frozenset, set)) and all(isinstance(i, str) for i in v)
            for k, v in columns.items()):
        raise Refused(f"{shown}: COLUMNS must be a dict of check name -> a tuple of input names")
    return table, {k: frozenset(v) for k, v in columns.items()}


def axes(sample: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(rows, columns) of a sample as the plan holds it (``records.handover.RowSample`` or ``Sample``): each an
    ``Axis`` (``{"stride": s}`` or ``{"indices": [...]}``), None for an axis kept whole."""
    if sample is None:
        return None, None
    if "stride" in sample:
        return {"stride": sample["stride"], "indices": None}, None
    return sample.get("rows"), sample.get("columns")


def _kept(axis: dict[str, Any] | None, length: int) -> int:
    if axis is None:
        return length
    return -(-length // axis["stride"]) if axis.get("stride") is not None else len(axis["indices"])


def said(sample: dict[str, Any] | None) -> str:
    """The sample in a message: `` (every 8th row)``, `` (rows every 8th, columns every 8th)``; empty when whole."""
    def one(axis: dict[str, Any]) -> str:
        if axis.get("stride") is not None:
            return f"every {axis['stride']}th"
        return f"{len(axis['indices'])} listed"

    rows, columns = axes(sample)
    if rows is not None and columns is None:
        return f" ({one(rows)} row)" if rows.get("stride") is not None else f" ({one(rows)} rows)"
    parts = [f"{what} {one(a)}" for what, a in (("rows", rows), ("columns", columns)) if a is not None]
    return f" ({', '.join(parts)})" if parts else ""


def _load(folder: Path, entry: Entry, name: str) -> np.ndarray:
    """One handed-over array, as the manifest says it is (dtype, shape, rows and columns kept), or ``Refused``."""
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
        rows, columns = axes(sample)
        if not shape or (columns is not None and len(shape) < 2):
            raise Refused(f"{file}: a sample of {'columns' if shape else 'rows'} needs an array with that axis")
        shape[0] = _kept(rows, shape[0])
        shape[-1] = _kept(columns, shape[-1])
    if list(array.shape) != shape:
        raise Refused(f"{file}: shape {list(array.shape)}, the manifest says {shape} "
                      f"({'sampled' if sample else 'whole'}) for check {name}")
    return array


def _digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _result(name: str, status: str, problem: str | None, why: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "status": status, "problem": problem, "why": why, **more}


class Cache:
    """What the checks of one job share: the handed-over inputs loaded once per file, each reference computed once
    per check name and input files (a bench hands one shape's inputs over once, for every configuration)."""

    def __init__(self, columns: dict[str, frozenset[str]] | None = None) -> None:
        self.columns = columns or {}
        """The reference table's ``COLUMNS``: check name -> the inputs its reference is column-wise in."""
        self.arrays: dict[str, np.ndarray] = {}
        self.wants: dict[tuple, np.ndarray | Exception] = {}
        self.bounded: dict[tuple, Bounds] = {}
        self.buffers: dict[tuple[int, ...], np.ndarray] = {}
        self.verdicts: dict[tuple, dict[str, Any]] = {}
        """(name, input files, the output's dtype, shape, rows kept and sha256 of the bytes read) -> its verdict: a
        configuration whose output is bit for bit another's of the same check (a correct matmul on exact inputs)
        is compared once."""

    def load(self, folder: Path, entry: Entry, name: str) -> np.ndarray:
        key = json.dumps(entry, sort_keys=True)
        if key not in self.arrays:
            self.arrays[key] = _load(folder, entry, name)
        return self.arrays[key]

    def want(self, name: str, fn: Callable[..., Any], inputs: dict[str, np.ndarray], files: tuple) -> np.ndarray:
        """``fn(**inputs)`` in float64, computed once per ``(name, files)``; raises what ``fn`` raised."""
        key = (name, files)
        if key not in self.wants:
            try:
                with np.errstate(all="ignore"):
                    self.wants[key] = np.asarray(fn(**{k: v.astype(np.float64) for k, v in inputs.items()}),
                                                 dtype=np.float64)
            except Exception as e:  # noqa: BLE001 (the lesson's function: any exception is its failure, named)
                self.wants[key] = e
        found = self.wants[key]
        if isinstance(found, Exception):
            raise found
        return found

    def bounds(self, want: np.ndarray, entry: list[float]) -> Bounds:
        """The ``Bounds`` of a reference ``want`` (one of ``wants``) under ``entry``, computed once."""
        key = (id(want), *entry)
        if key not in self.bounded:
            self.bounded[key] = Bounds(want, entry)
        return self.bounded[key]

    def buffer(self, shape: tuple[int, ...]) -> np.ndarray:
        """A float64 scratch array of ``shape``, one per shape for the job."""
        if shape not in self.buffers:
            self.buffers[shape] = np.empty(shape, dtype=np.float64)
        return self.buffers[shape]


def _inputs(folder: Path, check: dict[str, Any], cache: Cache) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The handed-over output and inputs of ``check`` (``Refused`` when one cannot be read as the manifest says)."""
    name = check["name"]
    got = _load(folder, check["output"], name)
    return got, {k: cache.load(folder, v, name) for k, v in check.get("inputs", {}).items()}


def check_one(folder: Path, check: dict[str, Any], refs: dict[str, Callable[..., Any]],
              table: dict[str, list[float]], shown: str, cache: Cache | None = None) -> dict[str, Any]:
    """One check's outside verdict (an ``OutsideCheck`` as a dict); ``check``: a ``HandedCheck`` as the plan
    holds it, ``table``: check name -> [rtol, atol], ``shown``: the reference table's path in messages."""
    name, cache = check["name"], cache or Cache()
    sample = check["output"].get("sample")
    rows, _ = axes(sample)
    try:
        got, inputs = _inputs(folder, check, cache)
    except Refused as e:
        return _result(name, "failed", "refused", str(e), index=check.get("index"))
    read = _digest(got)
    more: dict[str, Any] = {"sampled_stride": rows.get("stride") if rows else None, "index": check.get("index"),
                            "output_sha256": sample["whole_sha256"] if sample else read}
    files = tuple(sorted((k, v["file"]) for k, v in check.get("inputs", {}).items()))
    same = (name, files, tuple(check.get("withheld") or ()), got.dtype.str, tuple(check["output"]["shape"]),
            json.dumps(sample, sort_keys=True), read)
    if same not in cache.verdicts:
        cache.verdicts[same] = _verdict(name, got, inputs, (refs, table, shown), cache, check, more)
    return {**cache.verdicts[same], **more}


def _verdict(name: str, got: np.ndarray, inputs: dict[str, np.ndarray], lesson: tuple, cache: Cache,
             check: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """The verdict of one handed-over output; ``lesson``: (reference table, tolerance table, the table's path)."""
    refs, table, shown = lesson
    finite = np.isfinite(got)
    if got.size and not bool(finite.all()):
        bad = int(got.size - np.count_nonzero(finite))
        return _result(name, "failed", "non-finite", f"{bad} of {got.size} output elements are NaN or Inf", **more)
    del finite
    withheld = check.get("withheld") or []
    if withheld:
        return _result(name, "unverified", "withheld-input",
                       f"input {withheld[0]} was not handed over: it is above the handover's cap and neither "
                       "row-wise in the output (its first axis is not the output's, or the program declared it "
                       "whole) nor a column input, so no sample of it recomputes any output element", **more)
    fn, entry = refs.get(name), table.get(name)
    wise = cache.columns.get(name, frozenset())
    stray = sorted(k for k, v in check.get("inputs", {}).items()
                   if axes(v.get("sample"))[1] is not None and k not in wise)
    if fn is not None and stray:
        return _result(name, "failed", "refused",
                       f"input {stray[0]} is handed over as a sample of its columns, but {shown} does not declare "
                       f"{name}'s reference column-wise in it (COLUMNS); only a column-wise reference recomputes a "
                       "block from sampled columns", **more)
    if fn is None or entry is None:
        why = f"{shown} declares no reference for {name}" if fn is None \
            else f"kernels/tolerances.py has no entry for {name}"
        return _result(name, "unverified", "no-reference", why, **more)
    files = tuple(sorted((k, v["file"]) for k, v in check.get("inputs", {}).items()))
    try:
        want = cache.want(name, fn, inputs, files)
    except Exception as e:  # noqa: BLE001 (the lesson's function: any exception is its failure, named)
        return _result(name, "failed", "reference-error",
                       f"{shown} {name}(): {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                       **more)
    if want.shape != got.shape:
        return _result(name, "failed", "reference-error",
                       f"the reference has shape {list(want.shape)}, the handed-over output {list(got.shape)}", **more)
    return _compare(name, got, cache.bounds(want, entry), said(check["output"].get("sample")), cache, more)


class Bounds:
    """What every comparison with one reference under one tolerance entry shares, computed once: the bound
    ``atol + rtol * |want|`` of each element, ``|want|`` with its zeros as infinity (the relative error's
    denominator: ``err / inf`` is 0 where the reference is 0), which elements are finite, whether all are equal."""

    def __init__(self, want: np.ndarray, entry: list[float]) -> None:
        self.want = want
        self.rtol, self.atol = entry
        with np.errstate(all="ignore"):
            self.denominator = np.abs(want)
            self.bound = self.denominator * self.rtol
            self.bound += self.atol
            self.denominator[self.denominator == 0] = np.inf
        finite = np.isfinite(want)
        self.finite: np.ndarray | None = None if bool(finite.all()) else finite
        self.all_equal = bool(want.size == 0 or (want.max() == want.min() and self.finite is None))


def _compare(name: str, got: np.ndarray, b: Bounds, sampled: str, cache: Cache,
             more: dict[str, Any]) -> dict[str, Any]:
    """The verdict of output ``got`` (finite) against the reference of ``b``: every element compared in float64
    (``got`` is upcast element by element into one buffer per shape, kept for the job)."""
    want = b.want
    err = cache.buffer(want.shape)
    with np.errstate(all="ignore"):
        np.subtract(got, want, out=err, dtype=np.float64)
        np.abs(err, out=err)
        ok = err <= b.bound  # NaN compares False
        if b.finite is not None:
            ok &= b.finite
        mismatches = int(ok.size - np.count_nonzero(ok))
        max_abs = float(err.max()) if err.size else 0.0
        np.divide(err, b.denominator, out=err)
        rel = float(err.max()) if err.size else 0.0
    more.update(checked=int(ok.size), mismatches=mismatches, max_abs_err=_number(max_abs), max_rel_err=_number(rel))
    rtol, atol = b.rtol, b.atol
    if got.size > 1 and bool(got.max() == got.min()) and not b.all_equal:
        return _result(name, "failed", "all-equal",
                       f"every output element is {float(got.flat[0])!r}, the reference's are not all equal", **more)
    if mismatches or not ok.size:
        first = np.unravel_index(int(np.argmin(ok)), ok.shape) if ok.size else ()
        where = (f" first at {tuple(int(i) for i in first)}: got {float(got[first])!r}, want {float(want[first])!r}"
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
        refs, columns = references(plan.get("references"), shown)
    except (Refused, SyntaxError) as e:
        return {"checks": [], "refused": str(e).splitlines()[0]}
    table, cache = plan.get("table", {}), Cache(columns)
    return {"checks": [check_one(folder, c, refs, table, shown, cache) for c in plan.get("checks", [])]}


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
