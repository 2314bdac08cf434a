"""runner.query: a short question to a tool, with a deadline; a missing or silent tool is one line."""

import sys
import time
from pathlib import Path

import pytest

from tileproof.__main__ import main
from tileproof.runner import worktree
from tileproof.runner.query import QueryError, ask


def test_the_answer_is_the_tool_s_exit_status_and_both_streams(tmp_path):
    done = ask([sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read().upper());"
                "sys.stderr.write('warn\\nlast words\\n'); sys.exit(3)"], stdin=b"abc", cwd=tmp_path)
    assert (done.exit_code, done.stdout, done.text()) == (3, b"ABC", "ABC")
    assert done.last_error() == "last words"
    assert ask([sys.executable, "-c", "pass"]).last_error() == "exit 0"


def test_a_query_reads_no_terminal_input():
    """Without ``stdin`` the tool reads an empty input, never this process's terminal."""
    assert ask([sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"], timeout=30).text() == "''\n"


def test_a_missing_tool_is_one_line_with_the_fix():
    with pytest.raises(QueryError) as e:
        ask(["no-such-tool-here", "--version"], fix="install no-such-tool")
    assert str(e.value) == "no-such-tool-here: cannot start: No such file or directory (fix: install no-such-tool)"


def test_a_tool_that_does_not_answer_is_stopped_at_its_deadline(tmp_path):
    t0 = time.perf_counter()
    with pytest.raises(QueryError, match=r"no answer in 0\.5 s, so it was stopped") as e:
        ask([sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5)
    assert time.perf_counter() - t0 < 10
    assert "\n" not in str(e.value)


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(QueryError, match="cannot run in .*nowhere"):
        ask([sys.executable, "-c", "pass"], cwd=tmp_path / "nowhere")


def test_git_for_fleet_tasks_goes_through_the_query(tmp_path, monkeypatch, capsys):
    """Without git on PATH, the fleet's worktree helpers stop with one line (was: a traceback or a hang)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(QueryError, match=r"^git: cannot start: .* \(fix: install git\)$"):
        worktree.head(tmp_path)
    out = tmp_path / "out"
    assert main(["fleet", "collect", "--out", str(out), "--root", str(Path(tmp_path))]) == 2
    assert capsys.readouterr().err.strip() == "tileproof fleet: git: cannot start: No such file or directory " \
                                               "(fix: install git)"
