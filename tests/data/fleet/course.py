"""A miniature course repository for the fleet tests, and simulated hosts' records.

Imported by path (``tests/`` is not a package), like tests/data/audit/audit_tree.py.
``course_repo`` makes a git repository holding this checkout's ``tileproof/`` and
two real lesson programs that gate themselves on a machine without a GPU, with two
lessons over them; ``host_records`` writes what one simulated GPU host's run
session leaves (sealed records and transcripts, through ``tileproof.records.store``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PROGRAMS = {"kernels/vector_add.py": "vector_add", "kernels/online_softmax.py": "online_softmax"}
LESSONS = {"fleet-vector-add": ["kernels/vector_add.py"], "fleet-online-softmax": ["kernels/online_softmax.py"]}
GIT_ENV = {"GIT_AUTHOR_NAME": "fleet test", "GIT_AUTHOR_EMAIL": "fleet@test.invalid",
           "GIT_COMMITTER_NAME": "fleet test", "GIT_COMMITTER_EMAIL": "fleet@test.invalid"}


def audit_tree():
    spec = importlib.util.spec_from_file_location("audit_tree", REPO / "tests" / "data" / "audit" / "audit_tree.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV})
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def course_repo(root: Path) -> Path:
    """A committed repository: tileproof/, the two programs with their harness and tolerances, two lessons."""
    root.mkdir(parents=True)
    shutil.copytree(REPO / "tileproof", root / "tileproof", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "kernels").mkdir()
    for name in ("harness.py", "tolerances.py", "vector_add.py", "online_softmax.py"):
        shutil.copy2(REPO / "kernels" / name, root / "kernels" / name)
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    shutil.copy2(REPO / ".gitignore", root / ".gitignore")
    tree = audit_tree()
    for lid, progs in LESSONS.items():
        tree.write_lesson(root, lid, {p: [PROGRAMS[p]] for p in progs})
    (root / "cpp").mkdir()
    (root / "cpp" / ".gitkeep").write_text("")  # no C++ program: nothing to compile first
    (root / "runs").mkdir()
    (root / "runs" / ".gitkeep").write_text("")
    (root / "evidence").mkdir()
    (root / "evidence" / ".gitkeep").write_text("")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "course")
    global COMMIT
    COMMIT = git(root, "rev-parse", "HEAD").strip()
    return root


COMMIT: str | None = None
"""The newest course's commit: simulated hosts ran it (the audit checks a record's commit is in history)."""


def host_records(root: Path, host: int, which: str = "H200", sessions: int = 1, when: datetime | None = None) -> int:
    """One simulated host's run sessions over the course's programs, into ``root``; returns records written."""
    from tileproof.records import store

    tree = audit_tree()
    when = when or datetime(2026, 11, 1, tzinfo=timezone.utc) + timedelta(minutes=host)
    written = 0
    for _ in range(sessions):
        sid = store.new_run_id("session", when)
        env = tree.environment(root, sid, which=which)
        runs = []
        for program, check in PROGRAMS.items():
            lid = next(name for name, ps in LESSONS.items() if program in ps)
            run = tree.run_record(root, env, program, checks=[check], lessons=[lid], when=when)
            runs.append(run.model_copy(update={"git": run.git.model_copy(update={"commit": COMMIT})}))
            store.write_record(root, runs[-1])
        closing = tree.session_record(sid, runs, when)
        store.write_record(root, closing.model_copy(update={"git": closing.git.model_copy(update={"commit": COMMIT})}))
        written += len(runs) + 1
        when += timedelta(seconds=30)
    return written
