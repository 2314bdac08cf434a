"""Slurm's client commands, the only way tileproof talks to Slurm: submit, and ask a job's state.

``sbatch --parsable`` answers a job id; a refusal (no node has the feature, an
invalid gres) is sbatch's own error line, returned, not raised, so the caller
can show it as that kind's row. A job's state comes from ``scontrol show job
-o`` while the controller still holds it, else from ``sacct --parsable2
--noheader`` (which needs accounting). Each is a short query with a deadline
(``runner.query``): sbatch answers once the job is queued, and it hands its own
environment to the job (``--export=ALL``), which must not carry the marker the
contained starter gives its children (``runner.process``): a job that starts on
this node would be taken for one of that child's strays.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from tileproof.records.errors import TileproofError
from tileproof.runner.query import ask

JobState = Literal[
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
    "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT",
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL",
    "DEADLINE", "REVOKED",
]
"""Slurm's job states (``man squeue``, JOB STATE CODES)."""

ENDED: frozenset[str] = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                                   "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED"})
"""States a job never leaves."""

CUT_SHORT: frozenset[str] = ENDED - {"COMPLETED", "FAILED"}
"""Ended states in which Slurm stopped the job (its time limit, a cancel, the node, memory), rather than the
job ending by itself (``COMPLETED``: exit 0; ``FAILED``: another exit status, which its records explain)."""

_JOB_ID = re.compile(r"^[0-9]+$")
SUBMIT_TIMEOUT_S = 120.0
"""sbatch answers when the controller has queued the job; one that takes longer is stopped."""
STATE_TIMEOUT_S = 60.0
"""scontrol and sacct answer from the controller's memory or the accounting database."""


class SlurmError(TileproofError):
    """A Slurm client command is missing or answered something unreadable."""


@dataclass(frozen=True)
class Submission:
    """sbatch's answer: a job id, or its refusal."""

    job_id: str | None
    refused: str | None
    """sbatch's last error line when it refused the job."""


def _client(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SlurmError(f"{name}: not found on PATH (fix: run on a Slurm login node, or install Slurm's "
                         "client commands, e.g. apt-get install slurm-client)")
    return path


def sbatch(script: Path, cwd: Path) -> Submission:
    """``sbatch --parsable SCRIPT``: the job id, or sbatch's refusal."""
    proc = ask([_client("sbatch"), "--parsable", script], cwd=cwd, timeout=SUBMIT_TIMEOUT_S)
    if proc.exit_code != 0:
        refused = proc.last_error() if proc.stderr.strip() else f"sbatch exited {proc.exit_code}"
        return Submission(job_id=None, refused=refused)
    answer = proc.text().strip()
    job_id = answer.split(";")[0]
    if not _JOB_ID.match(job_id):
        raise SlurmError(f"sbatch --parsable {script}: answered {answer!r}, not a job id")
    return Submission(job_id=job_id, refused=None)


def _state(word: str, source: str) -> JobState:
    state = word.split()[0].rstrip("+") if word.strip() else ""
    if state not in get_args(JobState):
        raise SlurmError(f"{source}: job state {word!r} is not one tileproof knows")
    return state  # type: ignore[return-value]


def job_state(job_id: str) -> JobState:
    """The job's state: ``scontrol`` while the controller holds it, ``sacct`` after."""
    proc = ask([_client("scontrol"), "show", "job", "-o", job_id], timeout=STATE_TIMEOUT_S)
    if proc.exit_code == 0:
        found = re.search(r"(?:^|\s)JobState=(\S+)", proc.text())
        if found:
            return _state(found.group(1), f"scontrol show job {job_id}")
    acct = ask([_client("sacct"), "--parsable2", "--noheader", "-X", "--format=State", "-j", job_id],
               timeout=STATE_TIMEOUT_S)
    lines = [ln for ln in acct.text().splitlines() if ln.strip()]
    if acct.exit_code != 0 or not lines:
        why = next((a.last_error() for a in (acct, proc) if a.stderr.strip()), "no such job")
        raise SlurmError(f"job {job_id}: neither scontrol nor sacct knows its state ({why})")
    return _state(lines[0], f"sacct -j {job_id}")


_TASK_LINE = re.compile(r"(?:^|\s)ArrayTaskId=([0-9]+)(?:\s|$)")


def task_states_shown(text: str, job_id: str) -> dict[int, JobState]:
    """``scontrol show job -o ARRAY``'s lines -> task index: state; pending tasks (one line, a range) are left out."""
    states: dict[int, JobState] = {}
    for line in text.splitlines():
        task, state = _TASK_LINE.search(line), re.search(r"(?:^|\s)JobState=(\S+)", line)
        if task and state:
            states[int(task.group(1))] = _state(state.group(1), f"scontrol show job {job_id}")
    return states


def task_states_accounted(text: str, job_id: str) -> dict[int, JobState]:
    """``sacct --parsable2 --noheader -X --format=JobID,State -j ARRAY``'s lines -> task index: state."""
    states: dict[int, JobState] = {}
    for line in text.splitlines():
        ident, _, word = line.partition("|")
        task = re.fullmatch(rf"{re.escape(job_id)}_([0-9]+)", ident.strip())
        if task and word.strip():
            states[int(task.group(1))] = _state(word, f"sacct -j {job_id}")
    return states


def array_task_states(job_id: str) -> dict[int, JobState]:
    """Each ended or running task of array ``job_id`` -> its state: ``scontrol`` while the controller holds the
    array, else ``sacct`` (which needs accounting); a task neither knows is left out."""
    proc = ask([_client("scontrol"), "show", "job", "-o", job_id], timeout=STATE_TIMEOUT_S)
    states = task_states_shown(proc.text(), job_id) if proc.exit_code == 0 else {}
    if states:
        return states
    acct = ask([_client("sacct"), "--parsable2", "--noheader", "-X", "--format=JobID,State", "-j", job_id],
               timeout=STATE_TIMEOUT_S)
    return task_states_accounted(acct.text(), job_id) if acct.exit_code == 0 else {}
