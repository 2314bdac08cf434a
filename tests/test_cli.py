"""The command line as a user meets it: --help per command, the console script, a closed pipe."""

import argparse
import importlib.metadata as md
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tileproof.__main__ import COMMANDS, SIGPIPE_STATUS, build_parser, main

REPO = Path(__file__).resolve().parents[1]

OPTIONS = {
    "compile": ["--arch", "--system-nvcc", "--jobs", "--root"],
    "run": ["--program", "--device", "--devices", "--timeout", "--session-id", "--record-no-gpu", "--root", "LESSON"],
    "publish": ["--dry-run", "--root", "--trust-root", "LESSON"],
    "status": ["--root", "LESSON"],
    "audit": ["--root", "--trust-root", "--expect-ancestor"],
    "bench": ["--quick", "--program", "--device", "--timeout", "--root"],
    "claims": ["--document", "--list", "--gpu-only", "--jobs", "--root"],
    "schema": ["--check", "--root"],
    "lint-kernels": ["--list-rules", "--root"],
    "keygen": ["--key", "--owner", "--may-sign", "--root"],
    "verify": ["--root", "--trust-root"],
    "sign-registry": ["--root", "--key", "--base"],
    "fleet": ["submit", "task", "finish", "show", "collect", "merge"],
    "check": ["--root"],
    "new-lesson": ["--python", "--cpp", "--title", "--root", "LESSON"],
    "init": ["--key", "--owner", "--root", "DIR"],
    "badge": ["--out", "--root", "--trust-root", "LESSON"],
    "diff": ["BASE", "HEAD", "--format", "--every", "--root"],
    "history": ["PROGRAM[:CASE]", "--gpu", "--root"],
    "reproduce": ["RUN_ID", "--device", "--timeout", "--root"],
}
"""Options each command's --help must list (a hand-written list, not read from the parsers)."""


def test_the_table_covers_every_command():
    assert set(OPTIONS) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_lists_the_commands_options(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: tileproof {command} ")
    missing = [o for o in OPTIONS[command] if o not in out]
    assert not missing, f"tileproof {command} --help does not list {missing}:\n{out}"


def _parsers(command: str) -> list[argparse.ArgumentParser]:
    """The command's parser, or for a command with subcommands (fleet) each subcommand's."""
    parser = next(a for a in build_parser([command])._actions if isinstance(a, argparse._SubParsersAction))
    own = parser.choices[command]
    subs = [a for a in own._actions if isinstance(a, argparse._SubParsersAction)]
    return list(subs[0].choices.values()) if subs else [own]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_names_the_course_and_its_lessons_alike(command):
    """One spelling per argument: every command works on one course, ``--root DIR``, default the current folder;
    a lesson argument is ``LESSON``."""
    for parser in _parsers(command):
        roots = [a for a in parser._actions if a.dest == "root"]
        if parser.prog.endswith(("fleet task", "fleet finish", "fleet show")):
            assert not roots  # they read the course from their plan
            continue
        assert [(a.option_strings, a.metavar) for a in roots] == [(["--root"], "DIR")], parser.prog
        if command != "init":  # init: DIR or --root DIR, not both
            assert roots[0].default == Path.cwd(), parser.prog
        lessons = [a for a in parser._actions if a.dest in ("lesson", "lessons", "lesson_id")]
        assert all(a.metavar == "LESSON" for a in lessons), parser.prog


def test_init_takes_the_folder_once(tmp_path, capsys):
    assert main(["init", str(tmp_path / "a"), "--root", str(tmp_path / "b")]) == 2
    assert "give the repository once, as DIR or as --root DIR" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_top_level_help_lists_commands_and_imports_none():
    code = ("import sys\nfrom tileproof.__main__ import COMMANDS, main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\n"
            "print('imported:', [m for m, _help in COMMANDS.values() if m in sys.modules])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert all(name in proc.stdout for name in COMMANDS)
    assert "imported: []" in proc.stdout


def test_a_command_imports_only_its_own_module():
    code = ("import sys\nfrom tileproof.__main__ import main\ntry:\n    main(['schema', '--help'])\n"
            "except SystemExit:\n    pass\n"
            "from tileproof.__main__ import COMMANDS\n"
            "print(COMMANDS['schema'][0] in sys.modules, COMMANDS['audit'][0] in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "True False"


@pytest.mark.parametrize("rendering", [False, True], ids=["import", "render-schemas"])
def test_compile_imports_neither_report_nor_fleet(rendering):
    """Building needs no report renderer and no fleet: every model with a schema lives in ``records/``, so
    importing ``compile``, and rendering every generated file as ``compile`` does before it builds
    (``authoring.generated.rendered``), loads neither package."""
    render = "from tileproof.authoring import generated\ngenerated.rendered(pathlib.Path('.'))\n" if rendering else ""
    code = ("import json, pathlib, sys\nimport tileproof.commands.compile\n" + render +
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('tileproof'))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    assert "tileproof.commands.compile" in loaded
    assert "tileproof.records.schemas" in loaded
    if rendering:
        assert "tileproof.records.audit_summary" in loaded
        assert "tileproof.records.cluster" in loaded
    assert [m for m in loaded if m.split(".")[:2] in (["tileproof", "report"], ["tileproof", "fleet"])] == []


def test_console_script_is_declared():
    eps = md.entry_points(group="console_scripts", name="tileproof")
    assert [ep.value for ep in eps] == ["tileproof.__main__:main"]
    assert next(iter(eps)).load() is main


def test_console_script_runs():
    script = Path(sys.executable).parent / "tileproof"
    if not script.is_file():
        pytest.skip(f"no {script}: tileproof is not installed into this interpreter's environment")
    proc = subprocess.run([str(script), "schema", "--help"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "--check" in proc.stdout, proc.stderr


def test_output_into_head_ends_without_a_traceback():
    proc = subprocess.run(f"'{sys.executable}' -m tileproof lint-kernels --list-rules | head -1",
                          shell=True, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0
    assert proc.stdout.startswith("TP")
    assert len(proc.stdout.splitlines()) == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "BrokenPipeError" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("argv", [["lint-kernels", "--list-rules"], ["schema", "--help"], ["--help"],
                                  ["schema", "--check"]])
def test_a_closed_stdout_ends_quietly(argv):
    """The reader is gone before the command writes a byte: no traceback; the CLI's own answer is 141."""
    proc = subprocess.Popen([sys.executable, "-m", "tileproof", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait()
    assert "Traceback" not in err, err
    assert "Exception ignored" not in err, err
    # lint-kernels treats a closed pipe itself and argparse's --help ignores it (the reader chose
    # to stop: 0); elsewhere __main__ answers 128 + SIGPIPE.
    assert code == (0 if argv[0] == "lint-kernels" or "--help" in argv else SIGPIPE_STATUS), err


OLD_ARGPARSE = """import argparse, sys
def _print_message(self, message, file=None):
    if message:
        (file or sys.stderr).write(message)
argparse.ArgumentParser._print_message = _print_message
from tileproof.__main__ import main
sys.exit(main(sys.argv[1:]))
"""
"""``python -c`` this: the CLI under argparse as Python 3.10 and Debian 12's 3.11.2 ship it, whose help and version
writes let a closed stdout's error through (3.11.7 and 3.12 ignore it)."""


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["schema", "--help"]])
def test_help_to_a_gone_reader_ends_quietly_under_an_older_argparse(argv):
    proc = subprocess.Popen([sys.executable, "-u", "-c", OLD_ARGPARSE, *argv],  # -u: the write itself fails
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert (proc.wait(), err) == (0, "")


def test_schema_ends_with_one_summary_line():
    proc = subprocess.run([sys.executable, "-m", "tileproof", "schema", "--check", "--root", str(REPO)],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from tileproof.commands.schema import rendered

    assert proc.stdout.strip().splitlines()[-1] == f"schema: 0 stale, {len(rendered(REPO))} up to date"
