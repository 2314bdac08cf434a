"""A run's GPU facts against its nvidia-smi query transcript, the CUDA runtime and the program's report."""

from __future__ import annotations

from tileproof.judge.audit.audit_rules import Context, check, rule
from tileproof.judge.audit.result import Issue
from tileproof.records.models import CheckReport, Environment, RunRecord

CC = rule("cc-transcript", "a run's GPU compute capability differs from its nvidia-smi query transcript")
RUNTIME = rule("cc-runtime", "the CUDA runtime's or the program's compute capability differs from nvidia-smi's")
GPU = rule("gpu-transcript",
           "a run's GPU name, uuid, driver or PCI bus id differs from its nvidia-smi query transcript")


def cc_issues(env: Environment, rows: list[dict] | None, report: CheckReport | None = None) -> list[Issue]:
    """``rows``: the nvidia-smi query transcript re-parsed (None: no trustworthy transcript)."""
    gpu = env.gpu
    out: list[Issue] = []
    if gpu is None:
        if rows:
            listed = ", ".join(f"{r['name']} (cc {r['compute_capability']})" for r in rows)
            out.append((CC, f"environment has no GPU but nvidia-smi lists {listed}"))
        return out
    if env.nvidia_smi_query is None:
        out.append((CC, f"GPU {gpu.name} recorded without an nvidia-smi query transcript to confirm it"))
    elif rows is not None:
        row = next((r for r in rows if r["uuid"] == gpu.uuid), None) \
            or next((r for r in rows if r["index"] == gpu.index), None)
        if row is None:
            out.append((CC, f"GPU {gpu.index} ({gpu.uuid}) is not in the nvidia-smi query transcript"))
        else:
            if row["compute_capability"] != gpu.compute_capability:
                out.append((CC, f"compute capability {gpu.compute_capability} recorded, "
                                             f"nvidia-smi says {row['compute_capability']}"))
            named = ("name", "uuid", "driver_version") + (("pci_bus_id",) if gpu.pci_bus_id is not None else ())
            diffs = [f"{k} {getattr(gpu, k)!r} recorded, nvidia-smi says {row[k]!r}"
                     for k in named if row[k] != getattr(gpu, k)]
            if diffs:
                out.append((GPU, "; ".join(diffs)))
    if gpu.runtime_compute_capability is not None and gpu.runtime_compute_capability != gpu.compute_capability:
        out.append((RUNTIME, f"CUDA runtime says compute capability {gpu.runtime_compute_capability}, "
                                  f"nvidia-smi {gpu.compute_capability}"))
    if report is not None and report.device is not None and report.device.compute_capability != gpu.compute_capability:
        out.append((RUNTIME, f"the program's report says compute capability {report.device.compute_capability}, "
                                  f"nvidia-smi {gpu.compute_capability}"))
    return out



@check(RunRecord)


def _gpu(rec: RunRecord, ctx: Context) -> list[Issue]:
    q = rec.environment.nvidia_smi_query
    return cc_issues(rec.environment, ctx.query_rows(q) if q is not None else None, rec.report)
