"""runner.children: a tileproof child starts contained, with a deadline; its output comes back (or live)."""

import functools
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from own_processes import fresh_name, in_proc, left_after, named_sleep

from tileproof.runner import children, process

REPO = Path(__file__).resolve().parents[1]
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the process table is read from /proc")

HANG = '''"""A fake lesson program that takes the name in hang.name and sleeps."""
import time
from pathlib import Path

AOT_SIGNATURES = {}  # makes it a program for ``run``'s discovery

Path("/proc/self/comm").write_text(Path(__file__).with_suffix(".name").read_text())
time.sleep(600)
'''
"""The test finds it by its name (``own_processes``): a PID read inside its PID namespace means nothing outside,
and behind the wall it cannot write the checkout to say it runs."""


@pytest.fixture
def tree(tmp_path, monkeypatch):
    for folder in ("kernels", "lessons", "cpp"):
        (tmp_path / folder).mkdir()
    (tmp_path / "kernels" / "tolerances.py").write_text((REPO / "kernels" / "tolerances.py").read_text())
    (tmp_path / "kernels" / "hang.py").write_text(HANG)
    (tmp_path / "kernels" / "hang.name").write_text(fresh_name())
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return tmp_path


FAKE_PYTHON = """#!/bin/sh
# stands in for the interpreter: ignores "-m tileproof ...", starts two grandchildren and waits
GROUP 600 &
setsid SETSID 600 &
exec sleep 600
"""
"""GROUP, SETSID: two ``named_sleep``s, by whose names the test finds the grandchildren."""


@linux
@pytest.mark.slow(reason="waits out a real 2 s deadline on a child whose grandchildren left its group and session")
def test_a_child_past_its_deadline_dies_with_its_whole_tree(tmp_path):
    python = tmp_path / "python"
    sleeps = {"python.group": named_sleep(tmp_path), "python.setsid": named_sleep(tmp_path)}
    python.write_text(FAKE_PYTHON.replace("GROUP", str(sleeps["python.group"]))
                      .replace("SETSID", str(sleeps["python.setsid"])))
    python.chmod(0o755)
    t0 = time.perf_counter()
    child = children.tileproof(["run"], tmp_path, deadline_s=2, python=str(python))
    assert child.exit_code is None
    assert child.status == 1
    assert child.last_line() == "(killed at its deadline, 2 s)"
    assert 2 <= time.perf_counter() - t0 < 15
    for name, sleep in sleeps.items():
        assert not left_after(5, sleep.name, zombies=False), f"{name}: the grandchild outlived its tileproof child"


@linux
@pytest.mark.slow(reason="a real tileproof run child, stopped while the program it started runs")
def test_a_stopped_tileproof_takes_its_tileproof_child_and_that_child_s_program(tree):
    """What SIGTERM does (``process.kill_all_live``) while a ``tileproof run`` child runs a program: the child
    is killed, and its program with it (the program's death signal), instead of running on for ten minutes."""
    got = {}
    worker = threading.Thread(target=lambda: got.update(child=children.tileproof(
        ["run", "--program", "hang", "--record-no-gpu", "--timeout", "600", "--root", str(tree)], tree,
        deadline_s=600)))
    worker.start()
    name = (tree / "kernels" / "hang.name").read_text()
    until = time.perf_counter() + 120
    while not in_proc(name) and time.perf_counter() < until and worker.is_alive():
        time.sleep(0.05)
    assert in_proc(name), got
    process.kill_all_live()
    worker.join(30)
    assert not worker.is_alive()
    assert got["child"].exit_code == -9, got["child"].stderr
    assert got["child"].status == 1, got["child"].stderr
    assert not left_after(5, name, zombies=False), "the program outlived the tileproof child that ran it"
    assert not list((tree / "runs").glob("*-session-*.json")), "a stopped session has no session record"


def test_the_last_line_is_the_command_s_own_exit_line_or_its_summary():
    def child(code, out, err=""):
        return children.Child(("python", "-m", "tileproof", "audit"), code, 60.0, out, err)

    bad = child(2, "audit: reading\n", "a warning\ntileproof audit: runs/x.json: kind: bad (fix: y)\n")
    assert (bad.status, bad.last_line()) == (2, "tileproof audit: runs/x.json: kind: bad (fix: y)")
    ok = child(1, "audit: 3 finding(s)\n\n", "a warning on stderr\n")
    assert ok.last_line() == "audit: 3 finding(s)"
    assert ok.lines() == ["audit: 3 finding(s)", "", "a warning on stderr"]
    assert child(0, "", "").last_line() == "(no output)"
    assert child(-9, "", "").status == 1
    assert child(None, "half\n", "").last_line() == "(killed at its deadline, 60 s)"


REFUSING_PYTHON = """#!/bin/sh
# stands in for the interpreter of "python -m tileproof run --program NAME ...": what tileproof says of an unknown
# program, on the streams it says it on
echo "run: looking for $5"
echo "tileproof $3: --program $5: no such program under kernels/ or cpp/" >&2
exit 2
"""
"""What ``children.tileproof`` runs in the two tests below: the child's output, not tileproof's decision, is what
they are about (the decision is tests/test_run_cmd.py's)."""


@pytest.fixture
def refusing_python(tmp_path) -> str:
    python = tmp_path / "python"
    python.write_text(REFUSING_PYTHON)
    python.chmod(0o755)
    return str(python)


def test_echo_copies_the_child_s_output_as_it_comes(tree, capfd, refusing_python):
    done = children.tileproof(["run", "--program", "nope", "--root", str(tree)], tree, deadline_s=120, echo=True,
                              python=refusing_python)
    said = capfd.readouterr()
    assert done.last_line() in said.err
    assert done.stderr in said.err
    assert done.stdout == "run: looking for nope\n" and done.stdout in said.out


def test_children_run_side_by_side_in_order(tree, refusing_python, monkeypatch):
    monkeypatch.setattr(children, "tileproof", functools.partial(children.tileproof, python=refusing_python))
    jobs = [(["run", "--program", name, "--root", str(tree)], tree) for name in ("first", "second")]
    done = children.in_parallel(jobs, deadline_s=120)
    assert [d.last_line().split(":")[1].strip() for d in done] == ["--program first", "--program second"]
    assert children.in_parallel([], deadline_s=1) == []


def test_a_summary_is_the_last_line_with_its_prefix_in_either_stream():
    """The audit's own order when it fails: findings and the trust root's lines on stdout, its summary on stderr;
    the fleet's matrix names the summary (it named the trust root's pin line before)."""
    failed = children.Child(("python", "-m", "tileproof", "audit"), 1, 60.0,
                            "finding: x\npin moved in c995354435fa: .ci/trust-root absent -> a22ecf5c5383\n",
                            "audit: 68 records, 1865 evidence files, 2 lessons: 6 findings\n")
    assert failed.last_line() == "pin moved in c995354435fa: .ci/trust-root absent -> a22ecf5c5383"
    assert failed.summary("audit: ") == "audit: 68 records, 1865 evidence files, 2 lessons: 6 findings"
    assert children.Child(("audit",), None, 60.0, "", "").summary("audit: ") == "(killed at its deadline, 60 s)"
