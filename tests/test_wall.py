"""The wall between the program and the signer, attacked by real hostile programs.

Each program below is a lesson program a contributor could submit, run by ``tileproof run`` (or ``compile``)
on a machine with a fake GPU (a fake ``nvidia-smi`` answering with the captured H200 query) and a signing key
outside the repository. Before the wall a program ran as tileproof's own user (root, in a PID namespace it could
undo): it unmounted ``/proc``, read ``TILEPROOF_SIGNING_KEY`` from tileproof's environment and the key itself,
and printed it into signed evidence; it left a git hook and a ``.pth`` file that ran outside containment; and
``compile`` imported it in the process holding the build key.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest
from conftest import fake_nvidia_smi, run_cli, sources_tree
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from one_freeze import pip_freeze_once  # noqa: F401  # used by pytestmark
from signing_keys import write_registry

from tileproof.commands import run as run_cmd
from tileproof.records import store
from tileproof.records.errors import TileproofError
from tileproof.records.models import RunRecord
from tileproof.records.trust import runner_keys, signing
from tileproof.runner import integrity, process
from tileproof.runner.environment import child_env
from tileproof.runner.wall import Wall

REPO = Path(__file__).resolve().parents[1]
QUERY = REPO / "tests" / "data" / "gpu" / "nvidia-smi-query.csv"
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("git") is None,
                                 reason="needs Linux and git"), pytest.mark.usefixtures("pip_freeze_once")]

REPORT = {"report_version": 1, "program": "kernels/evil.py", "seed": 1,
          "device": {"name": "NVIDIA H200", "compute_capability": "9.0"}, "gate": "ok",
          "gate_message": "GPU 0: NVIDIA H200, compute capability 9.0",
          "checks": [{"name": "evil", "shape": [1], "dtype": "float32", "rtol": 1e-4, "atol": 1e-3, "checked": 1,
                      "mismatches": 0, "max_abs_err": 0.0, "max_rel_err": 0.0, "first_failure": None,
                      "passed": True}],
          "passed": True}
"""A passing check report: a record signed ``passed`` is what the attacker wants."""

PASS = f"""
import json, sys
json.dump({REPORT!r}, open(sys.argv[sys.argv.index("--report") + 1], "w"))
print("GPU 0: NVIDIA H200, compute capability 9.0")
"""

STEAL = """
import base64, glob, os, subprocess, sys
AOT_SIGNATURES = {}
print("ATTACK: umount", subprocess.run(["umount", "-l", "/proc"], capture_output=True, text=True).returncode)
paths = [KEY_PATH, os.path.expanduser("~/.config/tileproof/signing-key.pem")]
for env in glob.glob("/proc/*/environ"):
    try:
        data = open(env, "rb").read()
    except OSError as e:
        print("ATTACK: environ refused", env, e.strerror)
        continue
    for item in data.split(b"\\0"):
        if item.startswith(b"TILEPROOF_SIGNING_KEY="):
            print("ATTACK: found the key's path in", env)
            paths.append(item.split(b"=", 1)[1].decode())
for path in paths:
    try:
        key = open(path, "rb").read()
    except OSError as e:
        print("ATTACK: key refused", e.strerror)
        continue
    print(key.hex())
    text = base64.b64encode(key).decode()
    print("\\n".join(text[i:i + 20] for i in range(0, len(text), 20)))
    print(key.decode().replace("PRIVATE KEY", "PRIV@TE KEY"), file=sys.stderr)
"""


def _key(tmp_path: Path) -> tuple[Path, Ed25519PrivateKey]:
    private = Ed25519PrivateKey.generate()
    folder = tmp_path / "keys"
    folder.mkdir()
    path = folder / "signing-key.pem"
    path.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    path.chmod(0o600)
    return path, private


def _forms(path: Path, private: Ed25519PrivateKey) -> list[bytes]:
    """The key's material in every encoding the attack uses (whitespace taken out)."""
    pem = path.read_bytes()
    seed = private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                 serialization.NoEncryption())
    body = b"".join(ln for ln in pem.splitlines() if not ln.startswith(b"-----"))
    return [pem.hex().encode(), base64.b64encode(pem), body, seed.hex().encode(), base64.b64encode(seed)]


def _fake_gpu(tmp_path: Path) -> Path:
    """A folder with ``nvidia-smi`` answering as the H200 did (the captured query)."""
    return fake_nvidia_smi(tmp_path / "fakebin", QUERY)


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.invalid", "-c", "user.name=t",
                    "-c", "commit.gpgsign=false", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def committed_sources(tmp_path_factory):
    """The course's sources committed to a git repository (made once: tests get copies)."""
    root = sources_tree(tmp_path_factory.mktemp("sources"))
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "sources")
    return root


@pytest.fixture
def tree(committed_sources, tmp_path):
    """A private copy of the committed sources (its .git included)."""
    root = tmp_path / "repo"
    shutil.copytree(committed_sources, root, symlinks=True)
    return root


def _in_process(tmp_path: Path, root: Path, *args: str, key: Path,
                env: dict | None = None) -> subprocess.CompletedProcess:
    """``tileproof ARGS --root ROOT`` by the command line's own ``main`` in this process (``run_cli``), from ROOT,
    with the fake GPU first on PATH, the key in the environment and ``env``: its exit status and what it printed."""
    code, out, err = run_cli(*args, "--root", str(root), cwd=root, env={
        "PATH": f"{_fake_gpu(tmp_path)}:{os.environ['PATH']}", signing.KEY_ENV: str(key), **(env or {})})
    return subprocess.CompletedProcess(args, code, out, err)


def _evidence_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for folder in ("evidence", "runs") for p in (root / folder).rglob("*")
                    if p.is_file())


def _squeezed(data: bytes) -> bytes:
    return re.sub(rb"\s+", b"", data)


def _signed(root: Path) -> list[Path]:
    return [p for p in (root / "runs").glob("*.json")
            if signing.is_envelope(json.loads(p.read_text())) and json.loads(p.read_text())["signatures"]]


# --- (a) the key stays out of the program's reach; (d) the record names the wall ------------------------------


@dataclass(frozen=True)
class Attacked:
    """The module's one attacked ``tileproof run`` (``attacked``): its tree, what it printed, and the key, the
    environment and the copy of tileproof its programs attacked."""

    tree: Path
    done: subprocess.CompletedProcess
    key: Path
    private: Ed25519PrivateKey
    site_packages: Path
    source: Path
    """A source file of the copy of tileproof that ran, and its bytes before the run."""
    before: bytes

    def stdout_of(self, program: str) -> str:
        (rec,) = [r for r in store.load_records(self.tree) if isinstance(r, RunRecord) and r.program == program]
        return (self.tree / rec.step.stdout.path).read_text()


@pytest.fixture(scope="module")
def attacked(committed_sources, tmp_path_factory) -> Attacked:
    """``tileproof run`` of two hostile programs (``kernels/steal.py``: STEAL, ``kernels/plant.py``: PLANT), as its
    own process started with the key in its environment (as a runner starts it: the variable is in the process's
    initial environment block). Run in an environment and a copy of tileproof of the module's own, so that nothing a
    program might write (before the wall it could) touches the suite's. Read only: each test judges its attack."""
    tmp_path = tmp_path_factory.mktemp("attacked")
    tree = tmp_path / "repo"
    shutil.copytree(committed_sources, tree, symlinks=True)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site_packages = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import site; "
                                         "print(site.getsitepackages()[0])"], capture_output=True, text=True,
                                        check=True).stdout.strip())
    (site_packages / "suite.pth").write_text(integrity.environments()[0] + "\n")  # tileproof's libraries
    copy = tmp_path / "tileproof-copy"
    shutil.copytree(REPO / "tileproof", copy / "tileproof", ignore=shutil.ignore_patterns("__pycache__"))
    source = copy / "tileproof" / "records" / "trust" / "signing.py"
    before = source.read_bytes()
    key, private = _key(tmp_path)
    (tree / "kernels" / "steal.py").write_text(STEAL.replace("KEY_PATH", repr(str(key))) + PASS)
    (tree / "kernels" / "plant.py").write_text(PLANT.replace("SOURCE", repr(str(source))) + PASS)
    full = {k: v for k, v in os.environ.items() if k != signing.KEY_ENV}
    full.update(PATH=f"{_fake_gpu(tmp_path)}:{os.environ['PATH']}", PYTHONPATH=str(copy),
                **{signing.KEY_ENV: str(key)})
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "tileproof", "run", "--program", "steal",
                           "--program", "plant", "--timeout", "120", "--root", str(tree)], env=full, cwd=tree,
                          capture_output=True, text=True, timeout=300)
    return Attacked(tree, done, key, private, site_packages, source, before)


def test_a_program_cannot_read_the_signing_key_in_any_encoding(attacked):
    tree, key, private = attacked.tree, attacked.key, attacked.private
    done = attacked.done
    out = done.stdout + done.stderr
    signed = _signed(tree)
    assert signed, out  # the session ran and signed: what it signed must not hold the key
    kept = _squeezed(_evidence_bytes(tree))
    for form in _forms(key, private):
        assert _squeezed(form) not in kept, f"the key reached the evidence: {out}"
    (rec,) = [r for r in store.load_records(tree) if isinstance(r, RunRecord) and r.program == "kernels/steal.py"]
    stdout = (tree / rec.step.stdout.path).read_text()
    assert "ATTACK: umount 32" in stdout or "ATTACK: umount 1" in stdout  # refused: no capability to unmount
    assert "ATTACK: found the key's path" not in stdout
    assert stdout.count("ATTACK: key refused") == 2
    assert rec.verdict == "unverified"  # a passing report with no outputs handed over (runner.outside_check)
    assert rec.step.step_version == 3
    assert rec.step.isolation in ("separate-user", "user-namespace")  # (d): the wall it ran behind


def test_the_key_is_not_in_a_walled_program_s_environment_even_when_a_lesson_names_it(tmp_path):
    """A lesson's ``env:`` list may name any variable; the key's never reaches a program."""
    env = child_env(extra=[signing.KEY_ENV], base={signing.KEY_ENV: "/somewhere/key.pem", "PATH": os.defpath})
    assert signing.KEY_ENV not in env


def test_a_walled_program_sees_neither_tileproof_nor_the_key_folder(tmp_path, monkeypatch):
    key, _ = _key(tmp_path)
    monkeypatch.setenv(signing.KEY_ENV, str(key))
    prog = tmp_path / "look.py"
    prog.write_text(textwrap.dedent(f"""
        import os
        print("keys:", sorted(os.listdir({str(key.parent)!r})))
        print("pids:", sorted(p for p in os.listdir("/proc") if p.isdigit()))
        try:
            os.kill({os.getpid()}, 0)
            print("signal: reached")
        except OSError as e:
            print("signal:", e.strerror)
        print("status:", [ln for ln in open("/proc/self/status") if ln.startswith(("CapEff", "CapBnd", "NoNewPrivs"))])
    """))
    done = process.start_and_wait([sys.executable, str(prog)], env=child_env(), cwd=tmp_path, timeout=60,
                                  wall=Wall(tmp_path))
    out = done.stdout.decode()
    assert done.exit_code == 0, done.stderr
    assert "keys: []" in out  # the folder is there, empty
    assert re.search(r"pids: \['1', '\d+'\]", out), out  # its init and itself: no process of the host
    assert "signal: reached" not in out
    assert "CapEff:\\t0000000000000000" in out and "CapBnd:\\t0000000000000000" in out
    assert "NoNewPrivs:\\t1" in out
    assert done.isolation in ("separate-user", "user-namespace")


def test_the_scratch_is_private_and_size_capped(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEPROOF_SCRATCH_MB", "16")
    prog = tmp_path / "fill.py"
    prog.write_text(textwrap.dedent("""
        import os
        for where in ("/tmp", "/dev/shm", "/var/tmp", os.path.expanduser("~")):
            open(os.path.join(where, "small"), "w").write("ok")  # writable: its own scratch
        try:
            with open("/tmp/big", "wb") as f:
                for _ in range(32):
                    f.write(b"z" * (1 << 20))
            print("filled 32 MiB")
        except OSError as e:
            print("stopped:", e.strerror)
    """))
    done = process.start_and_wait([sys.executable, str(prog)], env=child_env(), cwd=tmp_path, timeout=60,
                                  wall=Wall(tmp_path))
    assert done.exit_code == 0, done.stderr
    assert done.stdout.decode().strip() == "stopped: No space left on device"  # its /tmp: 16 MiB, its own


def test_an_interpreter_reached_through_another_environment_starts_behind_the_wall(tmp_path):
    """A venv made from a venv's Python (uv's way on Python 3.10): its ``python`` links to the other venv's, which
    links to the installation, each in a folder the wall hides (here under the temp folder). Every hop's folder is
    bound back; before, only the first and the last were, and the program never started (exit 127)."""
    tool, env = tmp_path / "tool" / "bin", tmp_path / "env" / "bin"
    tool.mkdir(parents=True)
    env.mkdir(parents=True)
    (tool / "python3").symlink_to(os.path.realpath(sys.executable))
    (env / "python").symlink_to(tool / "python3")
    course = tmp_path / "course"
    course.mkdir()
    (course / "hello.py").write_text("print('started')\n")
    done = process.start_and_wait([str(env / "python"), str(course / "hello.py")], env=child_env(), cwd=course,
                                  timeout=60, wall=Wall(course))
    assert (done.exit_code, done.stdout.decode().strip()) == (0, "started"), done.stderr


def test_a_tool_on_path_linked_through_a_hidden_folder_starts_behind_the_wall(tmp_path):
    """The same for a tool found on ``PATH``: its link leads through a folder the wall hides to the installation."""
    path, hop = tmp_path / "path", tmp_path / "hop" / "bin"
    path.mkdir()
    hop.mkdir(parents=True)
    (hop / "say-true").symlink_to(shutil.which("true"))
    (path / "say-true").symlink_to(hop / "say-true")
    course = tmp_path / "course"
    course.mkdir()
    done = process.start_and_wait(["say-true"], env={**child_env(), "PATH": f"{path}:/usr/bin:/bin"}, cwd=course,
                                  timeout=60, wall=Wall(course))
    assert done.exit_code == 0, done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the separate-user wall needs tileproof as root")
def test_a_checkout_others_may_not_read_is_refused_in_one_line_under_separate_user(tmp_path, monkeypatch):
    monkeypatch.setenv(process.ISOLATE_VAR, "separate-user")
    process.isolation.cache_clear()
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    try:
        with pytest.raises(TileproofError) as refused:
            process.start_and_wait(["/bin/true"], env=child_env(), cwd=closed, timeout=60, wall=Wall(closed))
    finally:
        process.isolation.cache_clear()
    line = str(refused.value)
    assert line.startswith(f"{closed}: others may not read it (mode 700)") and "\n" not in line
    assert f"chmod o+rX {closed}" in line


def test_a_jit_tool_only_its_owner_may_run_is_refused_in_one_line_under_separate_user(tmp_path, monkeypatch):
    """A toolchain unpacked with tileiras at mode 744 (seen on a GPU node): behind the wall every cuTile Python
    program failed with "'tileiras' compiler not found"; now nothing starts, and the line says the fix."""
    monkeypatch.setenv(process.ISOLATE_VAR, "separate-user")
    process.isolation.cache_clear()
    tools = tmp_path / "cu13" / "bin"
    tools.mkdir(parents=True)
    tool = tools / "tileiras"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o744)
    env = {**child_env(), "PATH": f"{tools}:{child_env()['PATH']}"}
    try:
        with pytest.raises(TileproofError) as refused:
            process.start_and_wait(["/bin/true"], env=env, cwd=tmp_path, timeout=60, wall=Wall(tmp_path))
        tool.chmod(0o755)
        assert process.start_and_wait(["/bin/true"], env=env, cwd=tmp_path, timeout=60,
                                      wall=Wall(tmp_path)).exit_code == 0
    finally:
        process.isolation.cache_clear()
    line = str(refused.value)
    assert line.startswith(f"{tool}: others may not execute it (mode 744)") and "\n" not in line
    assert f"chmod a+rx {tool}" in line


# --- (b) nothing outside the scratch is writable; a change during the session is refused ---------------------


PLANT = """
import os, site, sys
AOT_SIGNATURES = {}
for path, text in [(".git/hooks/post-commit", "#!/bin/sh\\ntouch HOOK_RAN\\n"),
                   (os.path.join(site.getsitepackages()[0], "zz_evil.pth"), "import os\\n"),
                   (SOURCE, "\\n# planted\\n")]:
    try:
        with open(path, "a") as f:
            f.write(text)
        print("ATTACK: wrote", path)
    except OSError as e:
        print("ATTACK: refused", path, e.strerror)
"""


def test_a_program_cannot_leave_a_hook_a_pth_or_an_edited_source(attacked):
    """The planting program of ``attacked``, run from an environment and a copy of tileproof of the module's own."""
    tree, source, site_packages = attacked.tree, attacked.source, attacked.site_packages
    out = attacked.done.stdout + attacked.done.stderr
    assert _signed(tree), out
    assert not (tree / ".git" / "hooks" / "post-commit").exists(), out
    assert not (site_packages / "zz_evil.pth").exists(), out
    assert source.read_bytes() == attacked.before, out
    stdout = attacked.stdout_of("kernels/plant.py")
    assert stdout.count("ATTACK: refused") == 3, stdout
    assert "Read-only file system" in stdout


def _race_targets(tree: Path, tmp_path: Path, monkeypatch, shared: bool = True) -> dict[str, Path]:
    """Each kind of watched file a racing writer might change. The environment is one of the test's own: a file
    raced into the suite's shared one would be a change in every session another test runs at the same time.
    Without ``shared``, it is the only one watched (the suite's 40,000 files are a real session's to read)."""
    site_packages = tmp_path / "site-packages"
    site_packages.mkdir()
    others = integrity.environments() if shared else []
    monkeypatch.setattr(integrity, "environments", lambda: [str(site_packages), *others])
    monkeypatch.setattr(integrity, "_TOP", set(integrity._TOP))
    return {"hook": tree / ".git" / "hooks" / "post-commit", "config": tree / ".git" / "config",
            "pth": site_packages / "zz_tileproof_test_race.pth", "tracked": tree / "kernels" / "harness.py"}


def _refused_line(tree: Path, target: Path, refused: pytest.ExceptionInfo[integrity.Changed]) -> None:
    line = str(refused.value)
    assert "\n" not in line
    shown = target.relative_to(tree).as_posix() if target.is_relative_to(tree) else str(target)
    assert line.startswith(f"{shown}: changed while this session ran; nothing signed"), line


@pytest.mark.slow(reason="a real signing session with its program behind the wall: the refusal must stop its own "
                         "signature and leave no record")
def test_a_change_during_the_session_is_refused_naming_the_path(tree, tmp_path, monkeypatch):
    """A race the wall does not see (something else writes while the program runs): the session refuses to sign,
    in one line naming the path, and writes no record. One real session here (a tracked file raced); every other
    kind of watched file by the same check below (``test_a_change_to_any_watched_file_is_seen``)."""
    key, _ = _key(tmp_path)
    monkeypatch.setenv(signing.KEY_ENV, str(key))
    monkeypatch.setenv("PATH", f"{_fake_gpu(tmp_path)}:{os.environ['PATH']}")
    (tree / "kernels" / "evil.py").write_text("AOT_SIGNATURES = {}\n" + PASS)
    target = _race_targets(tree, tmp_path, monkeypatch)["tracked"]
    taken = integrity.Snapshot.take

    def take_then_race(root):
        snapshot = taken(root)
        with open(target, "a") as f:  # what a racing writer leaves, after the session's snapshot
            f.write("# raced\n")
        return snapshot

    monkeypatch.setattr(integrity.Snapshot, "take", take_then_race)
    with pytest.raises(integrity.Changed) as refused:
        run_cmd.run(run_cmd_args(tree))
    _refused_line(tree, target, refused)
    assert not list((tree / "runs").glob("*.json")) if (tree / "runs").exists() else True


RACES = [*((what, "appended") for what in ("hook", "config", "pth", "tracked")),
         ("pth", "rewritten-in-place"), ("tracked", "rewritten-in-place"), ("hook", "added"), ("pth", "added")]
"""What a racing writer does to which kind of watched file: appends to it; rewrites its content in place (same
size and inode, its modification time set back: a ``.pth`` file is compared by content, a tracked one by its
change time); or adds a new file where a new one is a change too (the hooks, an environment)."""


@pytest.mark.parametrize(("what", "how"), RACES, ids=[f"{how}-{what}" for what, how in RACES])
def test_a_change_to_any_watched_file_is_seen(tree, tmp_path, monkeypatch, what, how):
    """The check a session makes before each signature (``guard``), on its own: each change is named."""
    target = _race_targets(tree, tmp_path, monkeypatch, shared=False)[what]
    if how == "added":
        target = target.with_name("raced-" + target.name)
    elif not target.exists():
        target.write_text("# here before the session\n")
    snapshot = integrity.Snapshot.take(tree)
    assert snapshot.changed() is None
    if how == "rewritten-in-place":
        before = target.stat()
        data = target.read_bytes()
        with open(target, "r+b") as f:  # same size, same inode: only the content and the change time move
            f.write(bytes([data[0] ^ 1]) + data[1:])
        os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert (target.stat().st_ino, target.stat().st_size, target.stat().st_mtime_ns) == \
            (before.st_ino, before.st_size, before.st_mtime_ns)
    else:
        with open(target, "a") as f:
            f.write("# raced\n")
    with pytest.raises(integrity.Changed) as refused:
        snapshot.check()
    _refused_line(tree, target, refused)


def _environments_of(python: Path) -> list[str]:
    """``integrity.environments()`` as the interpreter ``python`` answers it (this checkout's tileproof and the
    suite's libraries added to its path after it started, so they change nothing of what it read at start)."""
    code = (f"import sys; sys.path[:0] = [{str(REPO)!r}, {integrity.environments()[0]!r}]; "
            "from tileproof.runner import integrity; print('\\n'.join(integrity.environments()))")
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_watched_environments_are_the_site_folders_the_interpreter_reads(tmp_path):
    """A virtual environment reads its own ``site-packages``, and its base installation's only when made with
    ``--system-site-packages``: the base's are watched exactly then (every session's process runs this
    interpreter). The base's folders are the ones its own interpreter lists (Debian's are ``dist-packages``)."""
    import site

    listed = subprocess.run([getattr(sys, "_base_executable", sys.executable), "-I", "-c",
                             "import site; print('\\n'.join(site.getsitepackages()))"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    base = {os.path.abspath(p) for p in listed if os.path.isdir(p)}
    if sys.prefix == sys.base_prefix or not base:
        pytest.skip("the suite's interpreter is no virtual environment over a base with site-packages")
    for folder in site.getsitepackages():  # Debian's list names folders that do not exist: watched all the same
        assert os.path.abspath(folder) in integrity.environments()
    for system, watched in ((False, False), (True, True)):
        venv = tmp_path / f"system-{system}"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", *(["--system-site-packages"] * system),
                        str(venv)], check=True, capture_output=True)
        found = _environments_of(venv / "bin" / "python")
        assert os.path.join(venv, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages") \
            in found
        assert bool(base & set(found)) is watched, found


def test_a_site_folder_made_during_the_session_with_a_pth_in_it_is_seen(tree, tmp_path, monkeypatch):
    """``site`` reads a folder of its list made after a session started (the user's site, most often absent): a
    ``.pth`` planted there runs in every later Python start, so the folder is watched before it exists."""
    user_site = tmp_path / "home" / ".local" / "lib" / "site-packages"
    monkeypatch.setattr(integrity.site, "getusersitepackages", lambda: str(user_site))
    monkeypatch.setattr(integrity, "_TOP", set(integrity._TOP))
    assert str(user_site) in integrity.environments()
    snapshot = integrity.Snapshot.take(tree)
    assert snapshot.changed() is None
    user_site.mkdir(parents=True)
    (user_site / "planted.pth").write_text("import os; os.system('true')\n")
    with pytest.raises(integrity.Changed) as refused:
        snapshot.check()
    _refused_line(tree, user_site / "planted.pth", refused)


def run_cmd_args(root: Path):
    from conftest import cli_args

    return cli_args("run", "--root", str(root), "--program", "evil", "--timeout", "120")


# --- (c) compile never imports a program ---------------------------------------------------------------------


COMPILE_EVIL = """
import os
print("MODULE-LEVEL-RAN", flush=True)
try:
    print("KEY:", open(KEY_PATH, "rb").read().hex(), flush=True)
except OSError as e:
    print("KEY REFUSED:", e.strerror, flush=True)
"""


@pytest.mark.skipif(shutil.which("tileiras") is None and not list(Path(sys.prefix).glob("lib/python*/site-packages/"
                                                                                         "nvidia/cu13/bin/tileiras")),
                    reason="needs the tile toolchain (tileiras) for a compile")
@pytest.mark.slow(reason="a real tileiras compile of the program's kernel, signed, its export behind the wall")
def test_compile_never_runs_the_program_s_code_in_its_own_process(tree, tmp_path):
    """``compile`` runs in this process: a module-level print of the program there would be in what it printed
    (``run_cli`` takes this process's stdout and stderr)."""
    key, private = _key(tmp_path)
    vector_add = (tree / "kernels" / "vector_add.py").read_text()
    for p in (tree / "kernels").glob("*.py"):
        if p.name not in ("harness.py", "tolerances.py"):
            p.unlink()
    (tree / "kernels" / "evil_compile.py").write_text(vector_add + COMPILE_EVIL.replace("KEY_PATH", repr(str(key))))
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", "evil")
    done = _in_process(tmp_path, tree, "compile", "--python-only", "--arch", "sm_90", key=key)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert _signed(tree), out  # it compiled, and signed the compile record
    assert "MODULE-LEVEL-RAN" not in out, out  # its print is not in compile's own output
    assert "KEY:" not in out
    kept = _squeezed(_evidence_bytes(tree))
    for form in _forms(key, private):
        assert _squeezed(form) not in kept
    # the export imported it, behind the wall: its print is in that step's transcript, the key refused there
    assert b"MODULE-LEVEL-RAN" in kept and b"KEYREFUSED:" in kept, out


def test_a_declaration_compile_refuses_is_still_one_line_from_behind_the_wall(tmp_path):
    """The kernels a program declares come back from the walled reader; a refused declaration is the same one
    line as before (``aot.declared_kernels``' own), the program's prints nowhere in it."""
    from tileproof.runner.builds import declared_behind_wall

    pytest.importorskip("cuda.tile", reason="needs cuda-tile to read a program's kernels")
    (tmp_path / "kernels").mkdir()
    bad = tmp_path / "kernels" / "bad.py"
    bad.write_text("print('MODULE-LEVEL-RAN')\nAOT_SIGNATURES = 5\n")
    with pytest.raises(TileproofError) as refused:
        declared_behind_wall(tmp_path, bad)
    line = str(refused.value)
    assert "\n" not in line and "MODULE-LEVEL-RAN" not in line
    assert "AOT_SIGNATURES" in line and "expected a dict of kernel name -> signatures, found int" in line
    good = tmp_path / "kernels" / "vector_add.py"
    good.write_text((REPO / "kernels" / "vector_add.py").read_text())
    for helper in ("harness.py", "tolerances.py"):
        shutil.copy(REPO / "kernels" / helper, tmp_path / "kernels" / helper)
    assert declared_behind_wall(tmp_path, good) == ["vector_add"]


# --- (e) where no wall can be built ---------------------------------------------------------------------------


def _entry(private: Ed25519PrivateKey, unisolated: bool) -> runner_keys.RunnerKey:
    signer = signing.Signer(private)
    return runner_keys.RunnerKey(owner="test runner", keyid=signer.keyid,
                                 public_key=signing.raw_public(signer.public).hex(),
                                 may_sign=list(runner_keys.RUNNER_KINDS), added=date(2025, 1, 1),
                                 unisolated=unisolated)


@pytest.fixture
def wall_chosen_again():
    """``process.isolation()`` chosen again in this test (its ``TILEPROOF_ISOLATION``) and after it."""
    process.isolation.cache_clear()
    yield
    process.isolation.cache_clear()


@pytest.mark.parametrize("allowed", [False, True], ids=["key-not-allowed", "key-allowed"])
@pytest.mark.usefixtures("wall_chosen_again")
@pytest.mark.slow(reason="a real signing session of a real program without a wall, its record audited twice")
def test_without_a_wall_only_a_key_allowed_unisolated_runs_signs(tree, tmp_path, allowed, capsys):
    key, private = _key(tmp_path)
    write_registry(tree, runner_keys.RunnerRegistry(registry_version=1, runners=[_entry(private, allowed)]))
    (tree / "kernels" / "evil.py").write_text("AOT_SIGNATURES = {}\n" + PASS)
    done = _in_process(tmp_path, tree, "run", "--program", "evil", "--timeout", "120", key=key,
                       env={process.ISOLATE_VAR: "none"})
    out = done.stdout + done.stderr
    if not allowed:
        assert done.returncode != 0, out
        assert "Traceback" not in out
        (line,) = [ln for ln in out.splitlines() if "no wall here" in ln]
        assert f"{process.ISOLATE_VAR}=none" in line and "may not sign such runs" in line
        assert "unisolated: true" in line
        assert not (tree / "runs").exists() or not list((tree / "runs").glob("*.json"))
        return
    (line,) = [ln for ln in out.splitlines() if ln.startswith("run: unisolated: no wall here")]
    assert "allows unisolated runs" in line
    (path,) = [p for p in (tree / "runs").glob("*-run-*.json")]
    read = store.read_record(path, runner_keys.load_registry(tree))
    assert read.record.step.isolation == "none"
    assert read.trust == "verified"
    stricter = runner_keys.RunnerRegistry(registry_version=1, runners=[_entry(private, False)])
    refused = store.read_record(path, stricter)
    assert refused.trust == "unisolated-not-allowed"  # the audit's record-unisolated-not-allowed
    assert "unisolated: true" in refused.verification.reason
    audit = _audit(tree, capsys)  # the audit reads what the run left
    (listed,) = [ln for ln in audit.splitlines() if ln.startswith("unisolated: ")]
    assert listed.endswith(f": {read.record.run_id}"), audit
    write_registry(tree, stricter)  # the same record, its key's entry without unisolated: true
    audit = _audit(tree, capsys)
    assert f"runs/{path.name}: record-unisolated-not-allowed: " in audit, audit


def _audit(root: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``tileproof audit --no-write`` prints for ``root``, by the command line's own ``main``."""
    from tileproof.__main__ import main

    capsys.readouterr()
    main(["audit", "--no-write", "--root", str(root)])
    return capsys.readouterr().out


def test_the_registry_field_defaults_to_false_and_old_registries_read(tmp_path):
    private = Ed25519PrivateKey.generate()
    entry = _entry(private, False).model_dump(mode="json")
    del entry["unisolated"]  # as every registry written before the field has it
    (tmp_path / "lessons").mkdir()
    import yaml

    (tmp_path / runner_keys.REGISTRY).write_text(yaml.safe_dump({"registry_version": 1, "runners": [entry]}))
    assert runner_keys.load_registry(tmp_path).runners[0].unisolated is False
    entry["unisolated"] = True
    (tmp_path / runner_keys.REGISTRY).write_text(yaml.safe_dump({"registry_version": 1, "runners": [entry]}))
    assert runner_keys.load_registry(tmp_path).runners[0].unisolated is True
    entry["unisolated"] = "yes please"
    (tmp_path / runner_keys.REGISTRY).write_text(yaml.safe_dump({"registry_version": 1, "runners": [entry]}))
    with pytest.raises(TileproofError, match="unisolated"):
        runner_keys.load_registry(tmp_path)


# --- signal dispositions ---------------------------------------------------------------------------------------


SHOW = ("import signal\nprint(*(signal.getsignal(s) != signal.SIG_IGN for s in "  # Python's own SIGINT handler
        "(signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)))\n")  # stands in for SIG_DFL
PARENT = """
import sys
from tileproof.runner.environment import child_env
from tileproof.runner.process import start_and_wait
from tileproof.runner.wall import Wall
from pathlib import Path
walled = sys.argv[2] == "wall"
done = start_and_wait([sys.executable, sys.argv[1]], env=child_env(), cwd=Path(sys.argv[1]).parent, timeout=60,
                      wall=Wall(Path(sys.argv[1]).parent) if walled else None)
sys.stdout.write(done.stdout.decode())
"""


@pytest.mark.parametrize("walled", ["wall", "tool"])
def test_a_program_gets_default_signal_dispositions_under_nohup(tmp_path, walled):
    prog = tmp_path / "show.py"
    prog.write_text(SHOW)

    def ignore() -> None:  # as nohup and a shell's background job leave tileproof
        for s in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
            signal.signal(s, signal.SIG_IGN)

    done = subprocess.run([sys.executable, "-c", PARENT, str(prog), walled], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=ignore, timeout=120)
    assert done.stdout.strip() == "True True True", done.stdout + done.stderr
