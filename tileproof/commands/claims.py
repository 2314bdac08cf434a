"""``tileproof claims``: turn what documents say about the toolchain into evidence.

    python -m tileproof claims [--document ID ...] [--list] [--gpu-only] [--jobs N]

Loads the claims files (``claims.spec``), runs every probe (``claims.checks``: compile
probes in parallel, GPU probes a few at a time), combines each claim's probes into a
verdict (``claims.outcomes``) and writes one claims record with the transcripts as
evidence. Refuted claims are findings about documents; they do not fail the run. Exit 1
when a check could not run (a tool failure, not a finding), 0 otherwise; the last line
is always the summary.
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tileproof.claims import checks
from tileproof.claims.outcomes import ProbeResult, claim_result
from tileproof.claims.quotes import quote_problems
from tileproof.claims.spec import (
    CLAIMS_DIR,
    SUFFIX,
    Claim,
    Loaded,
    Probe,
    load_all,
    selected,
)
from tileproof.commands import add_root
from tileproof.records.errors import TileproofError
from tileproof.records.models import (
    CLAIMS_SCHEMA_VERSION,
    ClaimResult,
    ClaimsRecord,
    ProbeRole,
)
from tileproof.records.store import digest, header, new_run_id, rel, whole, write_record
from tileproof.records.trust.signing import signer_from_env
from tileproof.runner import integrity
from tileproof.runner.capture import git_state, host_facts

Task = tuple[Loaded, Claim, ProbeRole, Probe]
"""One probe to run: its claims file, its claim, its role and the probe."""

GPU_WORKERS = 4
"""GPU probes share one GPU: at most this many at a time."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``claims`` command line."""
    parser.add_argument("--document", action="append", default=[], metavar="ID",
                        help="check only this document's claims (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the claims and their checks; run nothing")
    parser.add_argument("--gpu-only", action="store_true",
                        help="only claims with a GPU probe (for a GPU node without nvcc)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compile checks")
    parser.add_argument("--device", type=int, default=0, metavar="N", help="GPU index (default 0)")
    parser.add_argument("--gpu-arch", default="sm_90", metavar="sm_XX",
                        help="where there is nvcc but no GPU, prebuild C++ GPU programs for this target "
                             "into build/claims/ (carry it to a GPU node without nvcc); default sm_90")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S", help="per-step timeout")
    add_root(parser)


def run(args: argparse.Namespace) -> int:
    """Check the selected claims and write one claims record; 1 when a check could not run."""
    root = args.root.resolve()
    signer = signer_from_env(root)
    files = load_all(root, args.document)
    if not files:
        raise TileproofError(f"no claims files under {root / CLAIMS_DIR} (fix: add lessons/claims/<id>{SUFFIX})")
    if args.list:
        return _list(root, files)
    chosen = selected(files, args.gpu_only)
    if not chosen:
        raise TileproofError("no claims selected (--gpu-only keeps only claims with a gpu probe)")
    signer = integrity.start(root, signer, lambda line: print(f"claims: {line}"))
    with whole(root):  # a full disk: one line, and nothing of the claims run left behind
        run_id = new_run_id("claims")
        tasks: list[Task] = [(f, c, role, p) for f, c in chosen for role, p in c.probes()]
        here = checks.survey(root, run_id, device=args.device,
                             need_gpu=any(t[3].check.kind == "gpu" for t in tasks), gpu_arch=args.gpu_arch,
                             timeout=args.timeout)
        for line in here.notes():
            print(f"claims: {line}")
        print(f"claims: {len(chosen)} claims, {len(tasks)} probes on {max(1, args.jobs)} workers "
              f"(record {run_id})", flush=True)
        outcomes = _run_probes(here, tasks, max(1, args.jobs))
        results = []
        for f, c in chosen:
            result = claim_result(f, c, [outcomes[id(t)] for t in tasks if t[0] is f and t[1] is c])
            results.append(result)
            print(f"{result.verdict:17}  {f.spec.document}/{c.id}  {result.why}", flush=True)
        path = write_record(root, _record(root, run_id, here, files, results), signer)
    return _summary(root, path, results)


def _run_probes(here: checks.Here, tasks: list[Task], jobs: int) -> dict[int, ProbeResult]:
    """Every task's result by ``id(task)``: compile-side probes on ``jobs`` workers, GPU ones a few at a time."""
    def go(task: Task) -> ProbeResult:
        f, c, role, p = task
        return checks.run_probe(here, f"{f.spec.document}.{c.id}.{role}", role, p.check, p.expected, f.folder)

    outcomes: dict[int, ProbeResult] = {}
    for group, workers in (([t for t in tasks if t[3].check.kind != "gpu"], jobs),
                           ([t for t in tasks if t[3].check.kind == "gpu"], min(GPU_WORKERS, jobs))):
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for t, res in zip(group, pool.map(go, group), strict=True):
                outcomes[id(t)] = res
    return outcomes


def _record(root: Path, run_id: str, here: checks.Here, files: list[Loaded],
            results: list[ClaimResult]) -> ClaimsRecord:
    """The claims record: results, and the digests of the claims files, snippets and documents checked."""
    attested = [loaded.path for loaded in files] + sorted({p for loaded in files for p in loaded.files()})
    documents = [root / loaded.spec.path for loaded in files]
    attested += [d for d in documents if d.is_file() and d.resolve().is_relative_to(root)]
    return ClaimsRecord(
        **{**header(run_id, git_state(root), host_facts()), "schema_version": CLAIMS_SCHEMA_VERSION},
        kind="claims", toolchain=here.toolchain, gpu=here.gpu, nvidia_smi=here.smi, nvidia_smi_query=here.smi_query,
        claims_files=[digest(root, p) for p in dict.fromkeys(attested)], results=results,
    )


def _summary(root: Path, path: Path, results: list[ClaimResult]) -> int:
    """The closing lines; the last one is the summary. 1 when a check could not run."""
    blocking = [r for r in results if r.verdict == "refuted" and r.asserted]
    if blocking:
        print("claims: refuted and still asserted by their documents (publish refuses a lesson with one): "
              + ", ".join(f"{r.document}/{r.id}" for r in blocking))
    counts = {v: sum(r.verdict == v for r in results) for v in ("confirmed", "refuted", "unverifiable-here", "error")}
    errors = f" ({counts['error']} checks could not run, see their lines above; exit 1)" if counts["error"] else ""
    print("claims: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n) + f"; record {rel(root, path)}{errors}")
    return 1 if counts["error"] else 0


def _list(root: Path, files: list[Loaded]) -> int:
    """``--list``: every claim and its checks, with a warning per quote gone from its document."""
    warnings = 0
    for loaded in files:
        print(f"{loaded.spec.document}  ({rel(root, loaded.path)}, {len(loaded.spec.claims)} claims, "
              f"document {loaded.spec.path})")
        for c in loaded.spec.claims:
            flag = "" if c.asserted else "  [not asserted]"
            print(f"  {c.id:34} {c.kinds_text():32}{flag}")
            print(f"      {c.statement}")
        problems = quote_problems(root, loaded)
        warnings += len(problems)
        for line in problems:
            print(f"  warning: {line}")
    claims = sum(len(loaded.spec.claims) for loaded in files)
    print(f"claims: {len(files)} files, {claims} claims, {warnings} quote warnings; nothing run")
    return 0
