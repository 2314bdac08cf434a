"""Two compiles at once, and two runs at once on an empty build cache.

The fake toolchain's nvcc writes different bytes on every call, as the real one
does; without the lock on build/, the second compile overwrote the artifacts the
first record attests. Both must succeed and every record must match build/."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tileproof.records.models import CompileRecord
from tileproof.records.store import load_records, sha256_file
from tileproof.runner import locate
from tileproof.runner.builds import compile_programs

REPO = Path(__file__).resolve().parents[1]
FAKE = REPO / "tests" / "data" / "fake_toolchain"
sys.path.insert(0, str(FAKE))
import fake_tools  # noqa: E402


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "repo"
    (root / "cpp").mkdir(parents=True)
    for name in ("tile_spike.cu", "tolerances.h", "harness.h"):
        shutil.copy(REPO / "cpp" / name, root / "cpp" / name)
    return root


def assert_records_match_build(root: Path) -> list[CompileRecord]:
    records = [r for r in load_records(root) if isinstance(r, CompileRecord)]
    for record in records:
        for b in record.builds:
            assert b.artifact is not None
            assert sha256_file(root / b.artifact.path) == b.artifact.sha256, (record.run_id, b.artifact.path)
    return records


COMPILE = """
    import sys
    from pathlib import Path
    sys.path.insert(0, {fake!r})
    import fake_tools
    from tileproof.runner.builds import compile_programs
    root = Path(sys.argv[1])
    record = compile_programs(root, fake_tools.tools(root.parent / sys.argv[2]), ["sm_90", "sm_100"],
                              [root / "cpp" / "tile_spike.cu"], {{}}, 2)
    sys.exit(0 if record is None or record.passed else 1)
"""


def test_two_compiles_at_once_both_succeed_and_records_match_build(tree):
    script = tree.parent / "compile_once.py"
    script.write_text(textwrap.dedent(COMPILE.format(fake=str(FAKE))))
    procs = [subprocess.Popen([sys.executable, str(script), str(tree), f"tools{i}"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in (1, 2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    records = assert_records_match_build(tree)
    assert len(records) == 1, "the second compile found the first one's artifacts cached"
    assert any("up to date" in o for o in outs)


def test_run_after_another_built_the_binary_finds_it(tree, monkeypatch, capsys):
    """Two ``run`` on an empty cache: the second waits for build/'s lock, finds nothing to
    build, and must still find the binary the first one's record attests (it used to say
    "no binary built ... from today's source")."""
    fake = fake_tools.tools(tree.parent / "tools")
    program = tree / "cpp" / "tile_spike.cu"
    stale: list[CompileRecord] = locate.compile_records(tree)  # read before the other run built
    assert stale == []
    first = compile_programs(tree, fake, ["sm_90"], [program], {}, 1)  # the other run's build
    monkeypatch.setattr(locate, "find_tools", lambda: fake)
    found = locate.find_binary(tree, program, "sm_90", stale)
    assert found is not None
    assert found.compile_run_id == first.run_id
    assert "up to date" in capsys.readouterr().out
