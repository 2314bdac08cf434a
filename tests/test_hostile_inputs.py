"""Hostile files (FIFOs, links, huge or sparse files, odd names) through the real commands.

Each attack is planted in a committed copy of the clean audit tree (tests/data/audit/audit_tree.py, a git repository
here) and ``audit``, ``publish --dry-run`` and ``verify`` run on it. An attack that could hang a command or make it
read without bound runs them in a process of their own (``guarded``): with a 30 s timeout per command, so that a
hang fails the test instead of the suite, and an address-space cap, so that reading /dev/zero or a 2 GB file whole
fails it too (``attacks``: all of them planted once, their commands in one such process); every other attack runs
them in this process (``said``). Before ``runner.git_history`` hashed the working tree through
``records.safe_read.stream``, a FIFO in place of a committed transcript hung all three, a link to /dev/zero ended in
a MemoryError and a 2 GB sparse file was read whole; ``publish`` accepted a transcript linked out of the repository;
a line break in a file name split a finding line in two; and ``verify`` failed a pristine clone the audit passed.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest
from conftest import fake_nvidia_smi, run_cli
from one_freeze import pip_freeze_once  # noqa: F401  # used by usefixtures
from signing_keys import entry, new_signer, real_run, registry_of, write_registry

from tileproof.gather import audit as audit_run
from tileproof.judge import trust
from tileproof.records import safe_read, store
from tileproof.records.errors import one_line
from tileproof.records.trust import signing

REPO = Path(__file__).resolve().parents[1]
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
MEMORY_CAP = 1536 << 20
"""Address space a command may use here: the audit of the small tree needs a fraction of it, and a
2 GB file (or /dev/zero) read whole cannot fit."""
TRUST_RULES = set(trust.RULES)
COMMANDS = {
    "audit": ["audit"],
    "publish": ["publish", "01-vector-add", "--dry-run"],
    "verify": ["verify"],
}


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.invalid", "-c", "user.name=t",
                    "-c", "commit.gpgsign=false", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def committed_template(audit_template, tmp_path_factory):
    """The clean audit tree, every file committed to a git repository (made once: tests get copies)."""
    clean, info = audit_template
    root = tmp_path_factory.mktemp("committed") / "tree"
    shutil.copytree(clean, root)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "records and transcripts")
    return root, info


@pytest.fixture
def committed(committed_template, tmp_path):
    """A private copy of the committed clean audit tree (its .git included) for one test to attack."""
    template, info = committed_template
    root = tmp_path / "tree"
    shutil.copytree(template, root, symlinks=True)
    return root, info


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


GUARDED = """
import contextlib, io, json, sys
from tileproof.__main__ import main
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    print("ended", json.dumps([code, out.getvalue(), err.getvalue()]), flush=True)
"""
"""Runs each command line of argv[1] (a JSON list) by the command line's own ``main``, one after another, and
prints each one's exit status, stdout and stderr as one line (``ended [...]``) as soon as it ends."""


def guarded(runs: list[tuple[Path, str]], timeout: float = 30) -> list[subprocess.CompletedProcess]:
    """``tileproof <command> --root <root>`` for each ``(root, command)`` of ``runs``, one after another in one
    process of their own, its memory capped; a command that does not end within ``timeout`` seconds (it blocked on
    an input) fails, and so does one that ends the process (a MemoryError)."""
    argvs = [[*COMMANDS[c], "--root", str(root)] for root, c in runs]
    named = [f"{c} of {root.parent.name}" for root, c in runs]
    try:
        proc = subprocess.run([sys.executable, "-c", GUARDED, json.dumps(argvs)],
                              env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True,
                              timeout=timeout * len(runs), preexec_fn=_capped)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
        done = sum(line.startswith("ended ") for line in out.splitlines())
        pytest.fail(f"{named[done]} did not finish within {timeout} s (it blocked on an input)")
    lines = [line.removeprefix("ended ") for line in proc.stdout.splitlines() if line.startswith("ended ")]
    assert len(lines) == len(runs), f"{named[len(lines)]} ended its process: {proc.stderr}"
    return [subprocess.CompletedProcess(argv, *json.loads(line)) for argv, line in zip(argvs, lines, strict=True)]


def said(root: Path, command: str) -> subprocess.CompletedProcess:
    """``tileproof <command> --root root`` by the command line's own ``main``, in this process (``run_cli``): for an
    attack that can neither hang a command nor make it read without bound."""
    argv = [*COMMANDS[command], "--root", str(root)]
    return subprocess.CompletedProcess(argv, *run_cli(*argv))


def assert_clean_exit(proc: subprocess.CompletedProcess, code: int) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == code, out
    assert "Traceback" not in out, out
    assert "MemoryError" not in out, out
    return out


def lines_about(out: str, path: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(f"{path}: ") or line.startswith(f"  {path}: ")]


# --- 1. the history check reads committed files through the one safe reader ----------------


def _fifo(which: str):
    def plant(root: Path, info: dict) -> str:
        transcript = (info["run"].step.stdout if which == "stdout" else info["env"].nvidia_smi_query).path
        (root / transcript).unlink()
        os.mkfifo(root / transcript)
        return transcript
    return plant


def _dev_zero(root: Path, info: dict) -> str:
    transcript = info["run"].step.stdout.path
    (root / transcript).unlink()
    (root / transcript).symlink_to("/dev/zero")
    return transcript


def _sparse(root: Path, info: dict) -> str:
    transcript = info["run"].step.stdout.path
    os.truncate(root / transcript, 2 << 30)  # sparse: no disk used
    return transcript


GUARDED_ATTACKS = {
    **({f"fifo-{which}": (_fifo(which), ("audit", "verify", "publish")) for which in ("stdout", "nvidia-smi-query")}
       if hasattr(os, "mkfifo") else {}),
    "dev-zero": (_dev_zero, ("audit", "verify")),
    "sparse": (_sparse, ("audit",)),
}
"""Attacks that could hang a command or make it read without bound: how each is planted in its copy of the
committed tree (the transcript it replaces returned), and the commands run on it."""


@dataclass(frozen=True)
class Attack:
    root: Path
    transcript: str
    ran: dict[str, subprocess.CompletedProcess]


@pytest.fixture(scope="module")
def attacks(committed_template, tmp_path_factory) -> dict[str, Attack]:
    """Each of ``GUARDED_ATTACKS`` planted in a copy of the committed tree of its own, and all their commands run in
    one guarded process (``guarded``). Read only: each test judges its attack's."""
    template, info = committed_template
    planted = {}
    for name, (plant, _) in GUARDED_ATTACKS.items():
        root = tmp_path_factory.mktemp(name) / "tree"
        shutil.copytree(template, root, symlinks=True)
        planted[name] = (root, plant(root, info))
    ran = iter(guarded([(planted[name][0], c) for name, (_, commands) in GUARDED_ATTACKS.items() for c in commands]))
    return {name: Attack(*planted[name], {c: next(ran) for c in commands})
            for name, (_, commands) in GUARDED_ATTACKS.items()}


@needs_fifo
@pytest.mark.parametrize("which", ["stdout", "nvidia-smi-query"])
def test_a_fifo_in_place_of_a_committed_transcript_hangs_no_command(attacks, which):
    attack = attacks[f"fifo-{which}"]
    transcript = attack.transcript
    audit = assert_clean_exit(attack.ran["audit"], 1)
    assert any(": history-refused: " in line and "FIFO" in line for line in lines_about(audit, transcript)), audit
    verify = assert_clean_exit(attack.ran["verify"], 1)
    (line,) = lines_about(verify, transcript)
    assert ": history-refused: replaced after commit " in line
    assert "(is a FIFO" in line  # the audit's words
    publish = assert_clean_exit(attack.ran["publish"], 2)
    assert f"  {transcript}: input-special-file: is a FIFO" in publish


def test_a_committed_transcript_linked_to_dev_zero_is_refused_not_read(attacks):
    attack = attacks["dev-zero"]
    transcript = attack.transcript
    outs = {command: assert_clean_exit(done, 1) for command, done in attack.ran.items()}
    for out in outs.values():
        assert any("symbolic link" in line for line in lines_about(out, transcript)), out
    assert ": history-refused: replaced after commit " in outs["audit"]


def test_a_2_gb_sparse_file_in_place_of_a_transcript_is_changed_unread(attacks, monkeypatch):
    attack = attacks["sparse"]
    root, transcript = attack.root, attack.transcript
    out = assert_clean_exit(attack.ran["audit"], 1)
    (line,) = [x for x in lines_about(out, transcript) if ": history-changed: " in x]
    assert f"is {2 << 30} bytes" in line
    from tileproof.runner import git_history

    read = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: read.append(n) or real_read(fd, n))
    report = git_history.check_repository(root)
    assert [(f.file, f.rule) for f in report.findings] == [(transcript, "history-changed")]
    assert sum(read) < safe_read.LIMITS["evidence"], "the history check read the oversized file"


def test_publish_refuses_a_transcript_linked_out_of_the_repository(committed, tmp_path):
    """The decision reads only the nvidia-smi query; a run's stdout replaced by a link to an outside
    copy of itself (same bytes, same digest) passed publish while the audit refused it."""
    root, info = committed
    transcript = info["run"].step.stdout.path
    outside = tmp_path / "elsewhere.txt"
    shutil.copyfile(root / transcript, outside)
    (root / transcript).unlink()
    (root / transcript).symlink_to(outside)
    publish = assert_clean_exit(said(root, "publish"), 2)
    assert f"  {transcript}: input-symlink: " in publish
    assert "nothing changed" in publish
    audit = assert_clean_exit(said(root, "audit"), 1)
    assert any(": input-symlink: " in line for line in lines_about(audit, transcript))


def test_the_forked_refused_walk_finds_what_the_inline_one_finds(committed, tmp_path, monkeypatch):
    """A tree of many records has its refused-inputs walk done by the runner's forked helper while its records
    are read (``Tree.load``); a small one inline. Forced both ways on one tree, they find the same refusals."""
    from tileproof.catalog import byte_pass as audit_scan
    from tileproof.gather.tree import Tree
    from tileproof.runner import forked

    root, info = committed
    transcript = info["run"].step.stdout.path
    (tmp_path / "elsewhere.txt").write_text("x")
    (root / transcript).unlink()
    (root / transcript).symlink_to(tmp_path / "elsewhere.txt")
    pools = []
    real_helper = audit_scan.helper

    def helper(jobs: int) -> forked.ForkedHelper:  # the walk's helper (a cold read of runs/ may fork its own)
        made = real_helper(jobs)
        pools.append(made.pool is not None)
        return made
    monkeypatch.setattr(audit_scan, "helper", helper)
    inline = Tree.load(root).refused()
    assert pools and not any(pools)
    pools.clear()
    monkeypatch.setattr(audit_scan, "PARALLEL_MIN_RECORDS", 1)
    in_fork = Tree.load(root).refused()
    assert pools and all(pools)
    assert in_fork == inline and inline[transcript][0] == "input-symlink"


@needs_fifo
def test_publish_refuses_exactly_the_inputs_the_audit_refuses(audit_copy, tmp_path, monkeypatch):
    root, info = audit_copy
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    (root / "evidence" / "linked-out.txt").symlink_to(outside)
    (root / "evidence" / "linked-in.txt").symlink_to(root / info["run"].step.stdout.path)
    os.mkfifo(root / "evidence" / "pipe.txt")
    (root / "evidence" / "big.txt").write_bytes(b"x" * 2048)
    (root / "lessons" / "out.md").symlink_to(outside)
    monkeypatch.setitem(safe_read.LIMITS, "evidence", 1024)
    from tileproof.gather import inputs

    from_audit = {(f.file, f.rule) for f in audit_run.audit(root).findings if f.rule.startswith("input-")}
    from_publish = {(file, rule) for file, (rule, _) in inputs.refused(root).items()}
    assert from_publish == from_audit
    assert {rule for _, rule in from_audit} == {"input-symlink", "input-special-file", "input-too-large",
                                                "input-outside-repo"}


# --- 5. output: escaped file names; verify and audit agree on a pristine clone -------------


NAMES = ["a\nb.txt", "c\rd\x1b[2Ke.txt", "f\u2028g.txt"]


@pytest.mark.parametrize("name", NAMES, ids=["newline", "cr-and-escape", "line-separator"])
def test_a_control_character_in_a_file_name_never_splits_a_line(committed, name):
    root, _ = committed
    (root / "evidence" / name).write_text("orphan\n")
    (root / "runs" / f"x{name}.json").write_text("{}\n")
    out = assert_clean_exit(said(root, "audit"), 1)
    evidence, record = f"evidence/{one_line(name)}", f"runs/x{one_line(name)}.json"
    assert f"{evidence}: evidence-orphan: " in out
    assert f"{record}: record-schema: " in out
    assert not any(c in out for c in "\r\x1b\u2028"), repr(out)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "odd names")
    (root / "evidence" / name).unlink()
    (root / "runs" / f"x{name}.json").unlink()
    for command in ("audit", "verify"):
        out = said(root, command).stdout
        for path in (evidence, record):
            assert any(line.startswith(f"{path}: ") and "missing" in line for line in out.splitlines()), out


def test_one_line_escapes_every_control_character():
    for c in [*map(chr, range(0x20)), "\x7f", "\x85", "\u2028", "\u2029", "\u202e"]:
        assert one_line(f"a{c}b") == f"a{repr(c)[1:-1]}b"
        assert c not in one_line(f"a{c}b")
    assert one_line("plain évidence/x.txt") == "plain évidence/x.txt"


def test_verify_and_audit_agree_on_a_pristine_clone(tmp_path):
    """Unsigned records committed before the tree's first key are legacy for both commands: a clone
    exits 0 for both; an unsigned record committed after the key is a finding for both."""
    signer = new_signer()
    root = tmp_path / "repo"
    old = real_run()
    store.write_record(root, old)
    write_registry(root, registry_of())
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "records from before signing")
    write_registry(root, registry_of(entry(signer, added=date(2026, 11, 1))).model_copy(
        update={"policy": "signed-only"}))
    store.write_record(root, real_run(run_id=old.run_id.replace("-run-", "-run-a")), signer)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the first key, and a signed record")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    audit_findings = {(f.file, f.rule) for f in audit_run.audit(clone).findings if f.rule in TRUST_RULES}
    verify = said(clone, "verify")
    assert audit_findings == set(), verify.stdout + verify.stderr
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "1 unsigned legacy or uncommitted" in verify.stdout
    late = store.write_record(clone, real_run(run_id=old.run_id.replace("-run-", "-run-b")))
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "an unsigned record after the key")
    name = f"runs/{late.name}"
    assert (name, "record-unsigned") in {(f.file, f.rule) for f in audit_run.audit(clone).findings}
    verify = said(clone, "verify")
    assert verify.returncode == 1
    assert re.search(rf"^{re.escape(name)}: record-unsigned: ", verify.stdout, re.M)


# --- 6. a program that prints the signing key, under a fake GPU ---------------------------------


FAKE_SMI_QUERY = REPO / "tests" / "data" / "gpu" / "nvidia-smi-query.csv"


def fake_gpu_path(tmp_path: Path) -> str:
    """A PATH whose ``nvidia-smi`` answers with the real captured H200 query (no GPU is used: the
    hostile program writes its own passing report)."""
    bin_dir = fake_nvidia_smi(tmp_path / "fakebin", FAKE_SMI_QUERY)
    return f"{bin_dir}:/usr/bin:/bin"


HOSTILE = '''
import json, sys
AOT_SIGNATURES = {{}}
print({hex!r})
print({b64!r})
print({pem!r}, file=sys.stderr)
json.dump({{"report_version": 1, "program": "kernels/evil_lesson.py", "seed": 1, "device": None, "gate": "ok",
           "gate_message": {hex!r}, "checks": [], "passed": True}},
          open(sys.argv[sys.argv.index("--report") + 1], "w"))
'''
QUIET = '''
import json, sys
AOT_SIGNATURES = {}
json.dump({"report_version": 1, "program": "kernels/quiet.py", "seed": 1, "device": None, "gate": "ok",
           "gate_message": "GPU 0", "checks": [], "passed": True}, open(sys.argv[sys.argv.index("--report") + 1], "w"))
'''


@pytest.mark.usefixtures("pip_freeze_once")
@pytest.mark.slow(reason="two real signing sessions of real programs, one a tileproof process of its own that never "
                         "saw the key exposed")
def test_a_program_printing_the_signing_key_stores_none_of_it_and_signs_nothing(tmp_path, monkeypatch, capsys):
    """The attack on the key, its content half (that the program cannot read the key at all is the wall's):
    a lesson program holding the runner's real key (made by ``tileproof keygen`` in a temp folder)
    prints it as hex, as base64 in 20-character lines and as a PEM headed ``PRIV@TE KEY``, and puts the
    hex in its report. Before, all three were stored verbatim in evidence/<run>/, the record was signed
    by that key with verdict passed and counted one ``private-key`` redaction. Now: one line, exit 2,
    none of it in evidence/, nothing signed; the same session without the program signs as before."""
    import base64
    import textwrap

    from conftest import sources_tree
    from cryptography.hazmat.primitives import serialization as ser

    tree = sources_tree(tmp_path)
    key = tmp_path / "keys" / "signing-key.pem"
    from tileproof.__main__ import main

    monkeypatch.setenv("PATH", fake_gpu_path(tmp_path))
    monkeypatch.setenv(signing.KEY_ENV, str(key))
    assert main(["keygen", "--key", str(key), "--root", str(tree)]) == 0
    private = ser.load_pem_private_key(key.read_bytes(), None)
    seed = private.private_bytes_raw()
    pem = private.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption()).decode()
    b64 = base64.b64encode(seed).decode()
    (tree / "kernels" / "evil_lesson.py").write_text(HOSTILE.format(
        hex=seed.hex(), b64="\n".join(textwrap.wrap(b64, 20)), pem=pem.replace("PRIVATE KEY", "PRIV@TE KEY")))
    (tree / "kernels" / "quiet.py").write_text(QUIET)

    def run(*programs: str) -> subprocess.CompletedProcess:
        """``tileproof run`` by the command line's own ``main``, in this process (the key read from the variable
        as a runner's process reads it); this process then holds the key as exposed, and never signs with it."""
        argv = ["run", *(a for p in programs for a in ("--program", p)), "--root", str(tree)]
        capsys.readouterr()
        code = main(argv)
        said = capsys.readouterr()
        return subprocess.CompletedProcess(argv, code, said.out, said.err)

    def run_fresh(*programs: str) -> subprocess.CompletedProcess:
        """``tileproof run`` as a process of its own: one that never saw the key exposed."""
        argv = [sys.executable, "-m", "tileproof", "run", *(a for p in programs for a in ("--program", p)),
                "--root", str(tree)]
        return subprocess.run(argv, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True,
                              timeout=300)

    def stored() -> bytes:
        return b"".join(p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()
                        and p.relative_to(tree).parts[0] in ("evidence", "runs"))

    attacked = run("quiet", "evil_lesson")
    out = attacked.stdout + attacked.stderr
    assert attacked.returncode == 2, out
    assert "Traceback" not in out
    (line,) = [ln for ln in out.splitlines() if "not signed" in ln]
    assert "the signing key" in line and "was in what a program printed or left" in line
    assert line.endswith("file(s) this session had written were removed")
    kept = stored()
    pieces = [t[i:i + 12] for t in (seed.hex(), b64, pem.splitlines()[1]) for i in range(0, len(t) - 12, 4)]
    assert not [p for p in pieces if p.encode() in kept]
    keyid = signing.keyid_of(private.public_key())
    assert keyid.encode() not in kept  # no record signed by it
    clean = run_fresh("quiet")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    records = [json.loads(p.read_text()) for p in (tree / "runs").glob("*.json")]
    assert len(records) == 2 and all(r["signatures"][0]["keyid"] == keyid for r in records)
