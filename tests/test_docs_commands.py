"""Every command the docs show works as written after the README's setup.

Every shell block (```` ```sh ````) of README.md and docs/*.md either runs, as a reader runs it, in one fresh
clone of this repository (the working tree's changes laid on it) after the README's Quick start, in the order the
pages show them (README first, then docs/ by name; a block that repeats the first lines of one run before it is that
run), or is marked on the line before it, where every reader sees it, with why it cannot run here:

    <!-- shell: gpu: on a GPU of compute capability >= 8.0 -->

the kind one of ``KINDS``. The fast tests check the markers and that every command a page names (in a block or
inline, ``tileproof NAME``, ``python -m tileproof NAME``, ``nox -s NAME``) exists; the slow one runs the blocks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import conftest
import pytest

from tileproof.__main__ import COMMANDS

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL = ("sh", "bash", "shell", "console")
"""The fences a reader types into a shell; ``text`` blocks show output."""
KINDS = {
    "gpu": "needs an NVIDIA GPU of compute capability >= 8.0 (or nvidia-smi)",
    "network": "downloads what the lock does not hold, or from outside PyPI",
    "placeholder": "holds values the reader fills in (COMMIT, PATH, a key's owner)",
    "elsewhere": "runs in another folder or on another machine (a new course, a Slurm cluster, a GPU host)",
    "long": "takes minutes: the whole test suite (this test among it) or a benchmark",
}
"""Why a block is not run here, one of these."""
MARKER = re.compile(r"^<!-- shell: (?P<kind>[a-z]+): (?P<why>.+?) -->$")
FENCE = re.compile(r"^```(?P<lang>[A-Za-z]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"`((?:python -m |\.nox-tool/bin/)?tileproof [a-z-]+|nox -s [\"']?[a-z-]+)")
SETUP = "python3 -m venv .nox-tool && .nox-tool/bin/pip install -q 'nox[uv]' -e . && . .nox-tool/bin/activate"
"""The README's Quick start: the line every later block is run after."""


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    body: str
    kind: str | None
    why: str | None

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def blocks() -> list[Block]:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m["lang"] not in SHELL:
                continue
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
            marked = MARKER.match(before)
            out.append(Block(page.relative_to(REPO).as_posix(), text.count("\n", 0, m.start()) + 1, m["body"],
                             marked["kind"] if marked else None, marked["why"] if marked else None))
    return out


def runs(blocks: list[Block]) -> list[Block]:
    """The blocks run here, in order: each unmarked block but one whose lines a block run before it began with (the
    README's setup line, shown alone in docs/install.md), which that run was: the same commands, in the same order,
    in the same clone."""
    out: list[Block] = []
    for b in blocks:
        lines = b.body.splitlines()
        if b.kind is None and all(done.body.splitlines()[:len(lines)] != lines for done in out):
            out.append(b)
    return out


BLOCKS = blocks()
RUN = runs(BLOCKS)


def test_a_block_shown_again_is_run_once_and_a_marked_one_never():
    shown = [Block("a.md", 1, "setup\ncompile\n", None, None), Block("a.md", 5, "check\n", None, None),
             Block("b.md", 3, "setup\n", None, None), Block("b.md", 9, "on a gpu\n", "gpu", "no GPU here"),
             Block("b.md", 12, "setup && more\n", None, None), Block("b.md", 20, "compile\n", None, None),
             Block("b.md", 24, "setup\ncompile\n", None, None)]
    assert [str(b) for b in runs(shown)] == ["a.md:1", "a.md:5", "b.md:12", "b.md:20"]


def test_every_marker_names_a_kind_and_says_why():
    for page in PAGES:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("<!-- shell"):
                m = MARKER.match(line)
                assert m and m["kind"] in KINDS, f"{page.name}:{n}: {line} (kinds: {', '.join(KINDS)})"
    assert all(b.why for b in BLOCKS if b.kind)


def test_the_readme_setup_is_the_first_block_run_and_every_page_shows_the_same():
    assert SETUP in RUN[0].body.splitlines() and RUN[0].page == "README.md"
    for b in BLOCKS:
        if ".nox-tool" in b.body and "venv" in b.body:
            assert SETUP in b.body.splitlines(), f"{b}: a setup other than the README's"


def _sessions() -> set[str]:
    import nox.registry

    conftest.noxfile()
    return {name.split("(")[0] for name in nox.registry.get()}


def named(text: str) -> list[tuple[str, str]]:
    """(kind, name) of every tileproof command and nox session ``text`` names."""
    out = []
    start = r"(?:^|&&|;|\||\$|:|\bor)\s*"  # where a shell command starts: a line, after && ; | $, "or:"
    for m in re.finditer(start + r"(?:python3? -m |\.nox-tool/bin/)?tileproof ([a-z][a-z-]*)", text, re.MULTILINE):
        out.append(("command", m[1]))
    for m in re.finditer(start + r"nox (?:--no-venv )?-s [\"']?([a-z][a-z-]*)", text, re.MULTILINE):
        out.append(("session", m[1]))
    return out


def test_every_command_and_session_the_docs_name_exists():
    sessions = _sessions()
    bad = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        rel = page.relative_to(REPO).as_posix()
        spans = [m.group(1) for m in re.finditer(r"`([^`\n]+)`", text)] + [b.body for b in BLOCKS if b.page == rel]
        for span in spans:
            for kind, name in named(span):
                if (kind == "command" and name not in COMMANDS) or (kind == "session" and name not in sessions):
                    bad.append(f"{page.name}: {kind} '{name}' in `{span.strip()[:80]}`")
    assert not bad, "\n".join(bad)


def test_a_command_that_does_not_exist_is_caught():
    assert named("tileproof frobnicate; nox -s nowhere") == [("command", "frobnicate"), ("session", "nowhere")]
    assert named("from tileproof import sessions; git commit -m 'a tileproof course'") == []


# --- the reader's shell ------------------------------------------------------------------------------------------


def reader_env() -> dict[str, str]:
    """The environment of a reader's new shell: this test's own venvs and settings left out."""
    venvs = {Path(sys.prefix).resolve(), REPO / ".nox-tool", REPO / ".nox"}
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and not any(Path(p).resolve().is_relative_to(v) for v in venvs)]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VIRTUAL_ENV", "NOX", "TILEPROOF", "PYTHON", "PYTEST", "CONDA"))}
    return env | {"PATH": os.pathsep.join(path)}


BUILT = re.compile(r"[0-9a-f]{64}")
"""A folder of the build cache: ``build/<cache key>/`` (see ``tileproof.toolchain.build``)."""


def seed_builds(src: Path, dst: Path) -> int:
    """Copy the finished folders of ``src``'s build cache (those with their ``meta.json``) into ``dst``'s.

    The README's Quick start runs ``nox -s compile`` before the tests: the reader's own command has just built
    the course cold in this checkout. The clone starts from that cache, so its ``nox -s compile`` (the same
    command, as written) rebuilds only what the working tree's changes touch, and every reuse passes the checks a
    reader's warm rerun passes (the artifact's digest against its meta, the compile record still present: the
    clone carries the checkout's untracked records too). A checkout that never compiled (CI's clean checkout)
    has no cache to copy, and the block builds every program for every target, cold."""
    cache = src / "build"
    folders = [f for f in cache.iterdir() if BUILT.fullmatch(f.name) and (f / "meta.json").is_file()] \
        if cache.is_dir() else []
    for folder in folders:
        shutil.copytree(folder, dst / "build" / folder.name)
    return len(folders)


def test_the_clone_starts_from_finished_builds_only(tmp_path):
    key, unfinished = "a" * 64, "b" * 64
    for folder in (key, unfinished, "docs", "lib"):
        (tmp_path / "src" / "build" / folder).mkdir(parents=True)
    (tmp_path / "src" / "build" / key / "meta.json").write_text("{}")
    (tmp_path / "src" / "build" / key / "k.cubin").write_bytes(b"\x7fELF")
    (tmp_path / "src" / "build" / "docs" / "meta.json").write_text("{}")
    assert seed_builds(tmp_path / "src", tmp_path / "dst") == 1
    assert sorted(p.relative_to(tmp_path / "dst").as_posix() for p in (tmp_path / "dst").rglob("*")) == \
        ["build", f"build/{key}", f"build/{key}/k.cubin", f"build/{key}/meta.json"]
    assert seed_builds(tmp_path / "nothing-built", tmp_path / "dst2") == 0


@pytest.fixture(scope="module")
def clone():
    """One fresh clone of this repository with the working tree's changes laid on it and the checkout's build
    cache copied in (``seed_builds``), on the disk uv's cache is on (its environments are hard links), shared by
    every block."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    (REPO / "build").mkdir(exist_ok=True)
    top = Path(tempfile.mkdtemp(prefix="docs-commands-", dir=REPO / "build"))
    root = top / "clone"
    try:
        subprocess.run(["git", "clone", "-q", "--shared", str(REPO), str(root)], check=True)
        diff = subprocess.run(["git", "-C", str(REPO), "diff", "HEAD", "--binary"], capture_output=True,
                              check=True).stdout
        if diff:
            subprocess.run(["git", "-C", str(root), "apply", "--whitespace=nowarn"], input=diff, check=True)
        untracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--others", "--exclude-standard"],
                                   capture_output=True, check=True).stdout.decode().split("\0")
        for rel in filter(None, untracked):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, root / rel)
        seed_builds(REPO, root)
        yield root
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.slow(reason="runs every shell block of the docs in a fresh clone: the README's setup (pip), the "
                         "toolchain environment (uv, from its cache) and a compile for every target (nvcc; cold "
                         "where the checkout has not compiled)")
@pytest.mark.parametrize("block", RUN, ids=str)
def test_the_block_works_as_written(block, clone):
    activate = "" if SETUP in block.body.splitlines() else ". .nox-tool/bin/activate\n"
    if activate and not (clone / ".nox-tool" / "bin" / "activate").is_file():
        pytest.fail(f"{block}: the README's setup did not run first")
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", activate + block.body], cwd=clone,
                          env=reader_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (f"{block} exits {done.returncode}:\n{block.body}\n--- stdout\n{done.stdout[-3000:]}"
                                  f"\n--- stderr\n{done.stderr[-3000:]}")
