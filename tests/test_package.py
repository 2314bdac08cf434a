"""tileproof as a package for any course: ``tileproof init``, the course's settings, the sessions from the
package, and (slow) the whole path a new author takes: the wheel built and installed outside this checkout,
``init`` in an empty git repository, a lesson with both programs, ``compile``, the course's tests and the audit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tileproof import __version__
from tileproof.authoring import init as course_init
from tileproof.records import course
from tileproof.records.errors import RecordError, TileproofError

REPO = Path(__file__).resolve().parents[1]
GIT_ENV = {"GIT_AUTHOR_NAME": "author", "GIT_AUTHOR_EMAIL": "author@example.org", "GIT_COMMITTER_NAME": "author",
           "GIT_COMMITTER_EMAIL": "author@example.org"}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def author(tmp_path, monkeypatch):
    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)
    key = tmp_path / "keys" / "signing-key.pem"
    monkeypatch.setenv("TILEPROOF_SIGNING_KEY", str(key))
    return key


def test_init_makes_a_course_and_commits_the_first_key_alone(tmp_path, author):
    root = tmp_path / "course"
    said: list[str] = []
    written = course_init.init(root, None, "author", said.append)
    for rel in ["noxfile.py", "pyproject.toml", "constraints.txt", ".gitignore", "README.md", "kernels/harness.py",
                "kernels/tolerances.py", "kernels/references.py", "cpp/harness.h", "cpp/tolerances.h",
                ".github/workflows/pull-request.yml", ".github/workflows/gpu-evidence.yml",
                ".github/actions/tileproof/action.yml", ".ci/sticky-comment", "schema/lesson.v1.schema.json",
                ".pre-commit-config.yaml"]:
        assert rel in written and (root / rel).is_file(), rel
    assert (root / "kernels/harness.py").read_bytes() == (REPO / "kernels/harness.py").read_bytes()
    assert (root / "cpp/harness.h").read_bytes() == (REPO / "cpp/harness.h").read_bytes()
    assert (root / "constraints.txt").read_bytes() == (REPO / "constraints.txt").read_bytes()
    assert "sessions.register()" in (root / "noxfile.py").read_text()
    for flow in ("pull-request.yml", "gpu-evidence.yml"):
        assert f"'tileproof=={__version__}'" in (root / ".github/workflows" / flow).read_text(), flow
    # commit A holds the registry alone, commit B the pin alone, naming A
    log = git(root, "log", "--format=%H", "--name-only").split()
    commit_b, pin, commit_a, registry = log
    assert (pin, registry) == (".ci/trust-root", "lessons/runners.yaml")
    assert f"commit: '{commit_a}'" in (root / ".ci/trust-root").read_text()
    assert author.is_file() and oct(author.stat().st_mode & 0o777) == "0o600"
    assert any(line.startswith("  $ git commit") for line in said), "the commits are shown"
    # everything else is left for the author to commit
    assert "noxfile.py" in git(root, "status", "--porcelain", "--untracked-files=all")


def test_init_again_overwrites_nothing_and_commits_nothing(tmp_path, author):
    root = tmp_path / "course"
    root.mkdir()
    git(root, "init", "-q")
    (root / "noxfile.py").write_text("# the author's own\n")
    said: list[str] = []
    course_init.init(root, None, "author", said.append)
    assert (root / "noxfile.py").read_text() == "# the author's own\n"
    assert "kept noxfile.py (exists; init overwrites nothing)" in said
    head = git(root, "rev-parse", "HEAD")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts}
    again: list[str] = []
    assert course_init.init(root, None, "author", again.append) == []
    assert git(root, "rev-parse", "HEAD") == head
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts} == before
    assert len([ln for ln in again if ln.startswith("kept ")]) >= len(course_init.COPIED)


def test_init_refuses_a_subfolder_of_a_repository(tmp_path, author):
    git(tmp_path, "init", "-q")
    with pytest.raises(TileproofError, match="not its top"):
        course_init.init(tmp_path / "sub", None, "author", lambda _line: None)


def test_the_course_settings_are_read_through_one_model(tmp_path):
    assert course.load(tmp_path) == course.CourseSettings()
    (tmp_path / "pyproject.toml").write_text('[tool.tileproof]\ntargets = ["sm_90"]\ncuda-tile-axis = ["1.6.0"]\n')
    assert course.load(tmp_path).targets == ["sm_90"]
    for text, said in [('targets = ["90"]', r"\[tool.tileproof\] targets\[0\]: .* \(fix: write it as targets = "),
                       ("cuda-tile = 1", r"\[tool.tileproof\] cuda-tile: Extra inputs .* \(fix: the keys are targets"),
                       ("targets = [", "not valid TOML")]:
        (tmp_path / "pyproject.toml").write_text(f"[tool.tileproof]\n{text}\n")
        with pytest.raises(RecordError, match=said) as e:
            course.load(tmp_path)
        assert "\n" not in str(e.value)


def test_compile_without_targets_or_arch_says_where_to_write_them(tmp_path):
    from tileproof.commands.compile import targets_from

    with pytest.raises(TileproofError, match=r"pyproject.toml: \[tool.tileproof\] targets: no target"):
        targets_from([], tmp_path)
    assert targets_from(["sm_90,sm_80"], tmp_path) == ["sm_90", "sm_80"]
    assert targets_from([], REPO) == course.load(REPO).targets


def course_names() -> list[str]:
    """What only this course knows: its lesson ids, its programs' paths and its claims files' names."""
    names = [p.stem for p in (REPO / "lessons").glob("*.md")]
    names += [p.relative_to(REPO).as_posix() for d in ("kernels", "cpp") for p in (REPO / d).rglob("*")
              if p.suffix in (".py", ".cu", ".jl") and p.stem not in ("harness", "tolerances", "references")]
    names += [p.name for p in (REPO / "lessons" / "claims").glob("*.yaml")]
    return names


def test_the_package_knows_no_course():
    names = course_names()
    assert "day79-cutile" in names and "kernels/bench/matmul_bench.py" in names
    found = []
    for path in (REPO / "tileproof").rglob("*"):
        if path.is_file() and not path.is_symlink() and path.suffix in (".py", ".toml", ".yml", ".md", ".txt"):
            text = path.read_text(encoding="utf-8", errors="replace")
            found += [f"{path.relative_to(REPO)}: {n}" for n in names if n in text]
    assert not found, found


def without_install(text: str) -> str:
    """A workflow less the lines that say which tileproof it installs: a ``pip install`` line, the step that uses
    the composite action (``./`` here, the copy ``init`` writes in a course) and its ``tileproof:`` input."""
    text = text.replace("Install nox and tileproof", "Install nox")
    return re.sub(r'(?m)^.*(pip"? install |uses: \./|^\s+tileproof: ).*\n', "", text)


@pytest.mark.parametrize(("flow", "installs"), [("gpu-evidence.yml", 3), ("pull-request.yml", 1)])
def test_a_workflow_template_is_this_repositorys_but_for_the_install(flow, installs):
    ours = (REPO / ".github/workflows" / flow).read_text()
    template = course_init.template(f"workflows/{flow}")
    assert template.count(course_init.WORKFLOW_INSTALL) == installs
    assert without_install(template) == without_install(ours)
    assert len(template.splitlines()) == len(ours.splitlines())  # a line changed, never one added or dropped


def test_this_repository_holds_every_workflow_a_course_gets_and_no_other():
    ours = {p.name for p in (REPO / ".github/workflows").glob("*.yml")}
    assert ours == {Path(dest).name for dest in course_init.COPIED if dest.startswith(".github/workflows/")}


def test_version_is_written_once(capsys):
    from tileproof.__main__ import main

    with pytest.raises(SystemExit) as done:  # argparse's --version: printed, then exit 0
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"tileproof {__version__}"
    assert re.search(r'^dynamic = \["version"\]', (REPO / "pyproject.toml").read_text(), re.M)


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    said = f"{' '.join(argv)}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, said
    return done.stdout + done.stderr


@pytest.mark.slow(reason="builds the wheel, installs it with nox into a fresh venv, and runs compile (nvcc, about "
                         "20 s of CPU), the course's tests and the audit in a new course: the path a new author takes")
def test_a_new_course_from_the_wheel_compiles_tests_and_audits(tmp_path):
    """The venv is made without a pip of its own (``--without-pip``: ensurepip's install of pip took a third of the
    setup's CPU); this interpreter's pip installs into it (``pip --python``), the same pip doing the same install
    as a ``.venv/bin/pip`` would."""
    tool = tmp_path / "tool"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "NOX", "TILEPROOF", "PYTHON"))}
    run([sys.executable, "-m", "venv", "--without-pip", str(tool)], tmp_path, env)
    pip = [sys.executable, "-m", "pip", "--python", str(tool / "bin" / "python"), "install", "-q"]
    run([*pip, "nox[uv]"], tmp_path, env)
    dist = tmp_path / "dist"  # what nox -s build runs
    run([str(tool / "bin" / "uv"), "build", "-q", "--wheel", "-o", str(dist), str(REPO)], tmp_path, env)
    (wheel,) = dist.glob("tileproof-*.whl")
    run([*pip, str(wheel)], tmp_path, env)
    env |= GIT_ENV | {"PATH": f"{tool / 'bin'}{os.pathsep}{env['PATH']}",
                      "TILEPROOF_SIGNING_KEY": str(tmp_path / "keys" / "signing-key.pem")}
    root = tmp_path / "course"
    root.mkdir()
    run(["git", "init", "-q"], root, env)
    said = run(["tileproof", "init"], root, env)
    assert "commit B, the pin .ci/trust-root" in said
    run(["git", "add", "-A"], root, env)
    run(["git", "commit", "-qm", "a tileproof course"], root, env)
    run(["nox", "-s", "new-lesson", "--", "first-lesson", "--python", "first_kernel", "--cpp", "first_host"], root, env)
    run(["git", "add", "-A"], root, env)
    run(["git", "commit", "-qm", "first lesson"], root, env)
    built = run(["nox", "-s", "compile", "--", "--arch", "sm_90"], root, env)
    assert "3 built, 0 reused, 0 failed or refused of 3 artifacts" in built
    tested = run(["nox", "-s", "tests"], root, env)
    assert "check: 1 lesson(s), 0 problem(s)" in tested
    audited = run(["tileproof", "audit"], root, env)
    assert re.search(r"audit: 1 records, \d+ evidence files, 1 lessons: 0 findings", audited), audited
    # the sessions ran the wheel, not this checkout: its origin is the distribution, named by version and digest
    origin = run([str(root / ".nox" / "toolchain" / "bin" / "python"), "-c",
                  "from tileproof.runner.capture import tileproof_origin; import tileproof; "
                  "print(tileproof_origin().model_dump_json()); print(tileproof.__file__)"], root, env).splitlines()
    assert '"kind":"distribution"' in origin[0] and f'"version":"{__version__}"' in origin[0]
    assert not origin[1].startswith(str(REPO)), origin[1]
    # the workflows init wrote pass actionlint
    actionlint = Path(sys.executable).with_name("actionlint")
    if actionlint.exists():  # the test extra's (tests/test_fleet_workflow.py)
        run([str(actionlint), "-config-file", ".github/actionlint.yaml", ".github/workflows/pull-request.yml",
             ".github/workflows/gpu-evidence.yml"], root, env)
