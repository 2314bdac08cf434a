"""The batch scripts Slurm runs: rendered from the plan, pure text.

Each script only starts ``python -m tileproof fleet task|finish``; everything a
task does is tileproof's code, so a script holds no logic to test but its
``#SBATCH`` lines.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from tileproof.fleet.plan import PLAN_FILE, KindArray, Plan


def array_options(plan: Plan, array: KindArray) -> list[str]:
    """The ``#SBATCH`` options of one kind's array: resources from the cluster file."""
    c, spec = plan.cluster, array.spec
    opts = [
        f"--job-name=tileproof-{plan.fleet_id}-{array.kind}",
        f"--array=0-{len(array.tasks) - 1}",
        f"--output={Path(plan.folder) / 'logs' / f'{array.kind}-%A_%a.out'}",
        f"--time={c.time_limit}",
        f"--cpus-per-task={c.cpus_per_task}",
    ]
    if spec.partition or c.partition:
        opts.append(f"--partition={spec.partition or c.partition}")
    if c.mem:
        opts.append(f"--mem={c.mem}")
    if spec.constraint:
        opts.append(f"--constraint={spec.constraint}")
    if spec.gres:
        opts.append(f"--gres={spec.gres}")
    return opts


def merge_options(plan: Plan, array_ids: list[str]) -> list[str]:
    """The merge job: after every submitted array has ended, whatever its tasks' exit codes."""
    c = plan.cluster
    opts = [
        f"--job-name=tileproof-{plan.fleet_id}-merge",
        f"--output={Path(plan.folder) / 'logs' / 'merge-%j.out'}",
        f"--time={c.time_limit}",
        f"--dependency=afterany:{':'.join(array_ids)}",
    ]
    if c.partition:
        opts.append(f"--partition={c.partition}")
    return opts


def script(options: list[str], argv: list[str]) -> str:
    lines = ["#!/bin/sh", *(f"#SBATCH {o}" for o in options), "exec " + " ".join(shlex.quote(a) for a in argv)]
    return "\n".join(lines) + "\n"


def array_script(plan: Plan, array: KindArray) -> str:
    plan_file = str(Path(plan.folder) / PLAN_FILE)
    argv = [plan.python, "-m", "tileproof", "fleet", "task", "--plan", plan_file, "--kind", array.kind, "--index"]
    return script(array_options(plan, array), argv)[:-1] + ' "$SLURM_ARRAY_TASK_ID"\n'


def merge_script(plan: Plan, array_ids: list[str]) -> str:
    argv = [plan.python, "-m", "tileproof", "fleet", "finish", "--plan", str(Path(plan.folder) / PLAN_FILE)]
    return script(merge_options(plan, array_ids), argv)
