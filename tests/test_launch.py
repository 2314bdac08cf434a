"""toolchain/launch.py: a Python program started through it runs as ``python PROGRAM`` would, and the exception
that ends it is written down typed (its class and message), never parsed back out of the traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tileproof.runner.execute import LAUNCHER
from tileproof.toolchain import launch

SEEN = textwrap.dedent("""\
    import json, sys
    print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0], "file": __file__,
                      "tileproof": sorted(m for m in sys.modules if m.split(".")[0] == "tileproof")}))
    """)


def program(folder: Path, text: str, name: str = "prog.py") -> Path:
    path = folder / "kernels" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def launched(tmp_path: Path, prog: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    failure = tmp_path / "failure.json"
    done = subprocess.run([sys.executable, str(LAUNCHER), str(failure), str(prog), *args], capture_output=True,
                          text=True, cwd=tmp_path)
    return done, failure


def test_the_program_sees_what_python_program_would_show_it(tmp_path):
    prog = program(tmp_path, SEEN)
    direct = subprocess.run([sys.executable, str(prog), "--report", "r.json"], capture_output=True, text=True,
                            cwd=tmp_path)
    done, failure = launched(tmp_path, prog, "--report", "r.json")
    assert done.returncode == direct.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(direct.stdout)
    seen = json.loads(done.stdout)
    assert seen["argv"] == [str(prog), "--report", "r.json"]
    assert seen["name"] == "__main__"
    assert seen["path0"] == str(prog.parent)
    assert seen["tileproof"] == []  # nothing of tileproof imported
    assert not failure.exists()


def test_an_exception_at_import_is_written_down_typed_and_python_still_reports_it(tmp_path):
    prog = program(tmp_path, "import json\nraise ImportError('cuda-tile 9.9 refuses\\nsecond line')\n")
    done, failure = launched(tmp_path, prog)
    assert done.returncode == 1
    assert done.stderr.rstrip().endswith("second line")
    assert "Traceback" in done.stderr
    assert json.loads(failure.read_text()) == {"type": "ImportError", "message": "cuda-tile 9.9 refuses\nsecond line"}


def test_an_exception_class_is_named_by_its_module(tmp_path):
    program(tmp_path, "class TileCompilerError(Exception):\n    pass\n", "tilelib.py")
    prog = program(tmp_path, "import tilelib\ndef main():\n    raise tilelib.TileCompilerError('exit 1')\nmain()\n")
    done, failure = launched(tmp_path, prog)
    assert done.returncode == 1
    assert json.loads(failure.read_text())["type"] == "tilelib.TileCompilerError"


def test_the_programs_own_exit_status_passes_and_writes_nothing(tmp_path):
    done, failure = launched(tmp_path, program(tmp_path, "import sys\nsys.exit(3)\n"))
    assert done.returncode == 3
    assert not failure.exists()


def test_failure_of_names_builtins_bare():
    assert launch.failure_of(KeyError("x")) == {"type": "KeyError", "message": "'x'"}
    assert launch.failure_of(json.JSONDecodeError("bad", "", 0))["type"] == "json.decoder.JSONDecodeError"
