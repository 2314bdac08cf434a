import shutil
from pathlib import Path

import pytest

from tileproof.authoring import generated
from tileproof.authoring.generated import rendered, stale

REPO = Path(__file__).resolve().parents[1]


def test_committed_generated_files_match_their_sources():
    bad = stale(REPO)
    assert not bad, f"{', '.join(map(str, bad))} differ from their sources: run nox -s schema"


def test_every_record_kind_has_a_schema():
    names = {p.name for p in rendered(REPO)}
    for kind in ("compile", "run", "session"):
        assert f"{kind}-record.v1.schema.json" in names


def test_compile_makes_the_generated_header_current_before_any_compiler(tmp_path, capsys):
    """A new tolerance entry needs no `nox -s schema` by hand: compile rewrites cpp/tolerances.h first."""
    import argparse
    import shutil

    import pytest

    from tileproof.commands import compile as compile_cmd
    from tileproof.records.errors import TileproofError

    for part in ("kernels", "cpp", "schema", "lessons"):
        shutil.copytree(REPO / part, tmp_path / part)
    table = tmp_path / "kernels" / "tolerances.py"
    entry = '    "brand_new": Tolerance(rtol=0.0, atol=0.0),\n'
    table.write_text(table.read_text().replace("TOLERANCES = {\n", "TOLERANCES = {\n" + entry))
    assert [p.as_posix() for p in stale(tmp_path)] == ["cpp/tolerances.h"]
    args = argparse.Namespace(root=tmp_path, arch=["sm_90"], system_nvcc=str(tmp_path / "no-such-nvcc"), jobs=1)
    with pytest.raises(TileproofError):  # no compiler here: it stops after the header was made current
        compile_cmd.run(args)
    assert stale(tmp_path) == []
    assert '"brand_new"' in (tmp_path / "cpp" / "tolerances.h").read_text()
    assert "compile: regenerated cpp/tolerances.h" in capsys.readouterr().out


def test_the_guides_front_matter_reference_is_generated_from_the_model(tmp_path):
    """AUTHORING.md's reference lists every LessonFront field with its docstring; an edit there is stale."""
    import shutil

    from tileproof.records.models import LessonFront

    guide = (REPO / "AUTHORING.md").read_text()
    for name, info in LessonFront.model_fields.items():
        assert f"| `{name}` |" in guide and info.description, name
    shutil.copytree(REPO / "schema", tmp_path / "schema")
    shutil.copytree(REPO / "kernels", tmp_path / "kernels")
    (tmp_path / "cpp").mkdir()
    shutil.copy(REPO / "cpp" / "tolerances.h", tmp_path / "cpp" / "tolerances.h")
    (tmp_path / "AUTHORING.md").write_text(guide.replace("| `title` |", "| `heading` |"))
    assert [p.as_posix() for p in stale(tmp_path)] == ["AUTHORING.md"]


def test_every_schema_names_its_dialect_and_itself():
    import json

    from pydantic.json_schema import GenerateJsonSchema

    ids = set()
    for path in (p for p in rendered(REPO) if p.suffix == ".json"):
        committed = json.loads((REPO / path).read_text())
        assert committed["$schema"] == GenerateJsonSchema.schema_dialect, path
        assert committed["$id"].endswith(path.name) and committed["$id"].startswith("urn:tileproof:"), path
        ids.add(committed["$id"])
    assert len(ids) == len([p for p in rendered(REPO) if p.suffix == ".json"])


@pytest.mark.parametrize("argv", [["schema", "--check"], ["compile", "--arch", "sm_90", "--jobs", "1"]])
def test_a_guide_without_its_end_marker_is_one_line_and_exit_2(tmp_path, argv):
    """``schema --check`` and ``compile`` read AUTHORING.md's markers: one line naming the file, what is
    wrong and the fix; exit 2, never a traceback."""
    import subprocess
    import sys

    from tileproof.records import guide

    for part in ("kernels", "cpp", "schema", "lessons"):
        shutil.copytree(REPO / part, tmp_path / part)
    (tmp_path / "AUTHORING.md").write_text((REPO / "AUTHORING.md").read_text().replace(guide.END, ""))
    proc = subprocess.run([sys.executable, "-m", "tileproof", *argv, "--root", str(tmp_path)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"tileproof {argv[0]}: AUTHORING.md: no end marker line of the generated front-matter")
    assert line.endswith(f"in that order, then run {generated.COMMAND})") and guide.END in line


def test_each_broken_marker_says_what_is_wrong():
    from tileproof.records import guide
    from tileproof.records.errors import RecordError

    text = (REPO / "AUTHORING.md").read_text()
    cases = {"no begin marker line": text.replace(guide.BEGIN, ""),
             "no begin and no end marker line": text.replace(guide.BEGIN, "").replace(guide.END, ""),
             "the end marker of the generated front-matter reference comes before its begin":
                 text.replace(guide.BEGIN, "@@").replace(guide.END, guide.BEGIN).replace("@@", guide.END)}
    for problem, broken in cases.items():
        with pytest.raises(RecordError) as e:
            guide.with_reference(broken)
        assert str(e.value).startswith(f"AUTHORING.md: {problem}") and "\n" not in str(e.value), problem
