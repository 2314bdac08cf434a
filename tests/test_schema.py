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
    import shutil

    import pytest
    from conftest import cli_args

    from tileproof.commands import compile as compile_cmd
    from tileproof.records.errors import TileproofError

    for part in ("kernels", "cpp", "schema", "lessons"):
        shutil.copytree(REPO / part, tmp_path / part)
    table = tmp_path / "kernels" / "tolerances.py"
    entry = '    "brand_new": Tolerance(rtol=0.0, atol=0.0),\n'
    table.write_text(table.read_text().replace("TOLERANCES = {\n", "TOLERANCES = {\n" + entry))
    assert [p.as_posix() for p in stale(tmp_path)] == ["cpp/tolerances.h"]
    args = cli_args("compile", "--root", str(tmp_path), "--arch", "sm_90", "--system-nvcc",
                    str(tmp_path / "no-such-nvcc"), "--jobs", "1")
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
        assert f"| `{name}` |" in guide, name
        assert info.description, name
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
        assert committed["$id"].endswith(path.name), path
        assert committed["$id"].startswith("urn:tileproof:"), path
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
    assert line.endswith(f"in that order, then run {generated.COMMAND})")
    assert guide.END in line


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
        assert str(e.value).startswith(f"AUTHORING.md: {problem}"), problem
        assert "\n" not in str(e.value), problem


def _joining_modules(package: Path) -> set[str]:
    """Modules of ``package`` (a folder) in which a model joins ``records.schemas`` (``@schema(...)``)."""
    import ast

    found = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(d, ast.Call) and getattr(d.func, "id", getattr(d.func, "attr", None)) == "schema"
                    for d in node.decorator_list):
                found.add(".".join(path.relative_to(package.parent).with_suffix("").parts))
    return found


def test_every_model_that_joins_the_schema_registry_is_rendered(tmp_path):
    """``authoring.generated`` imports the modules whose models join; a model joining anywhere else would
    never be rendered. The finder itself sees a made-up joining module."""
    assert _joining_modules(REPO / "tileproof") == set(generated.SCHEMA_MODULES)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "extra.py").write_text("@schemas.schema('x', 1)\nclass X(Model):\n    pass\n")
    (tmp_path / "pkg" / "plain.py").write_text("@dataclass\nclass Y:\n    pass\n")
    assert _joining_modules(tmp_path / "pkg") == {"pkg.extra"}
    assert {p.name for p in rendered(REPO) if p.parent == Path("schema")} == set(generated.every_schema())


def test_a_file_name_joins_the_registry_once():
    from pydantic import BaseModel

    from tileproof.records import schemas

    class Twice(BaseModel):
        pass

    with pytest.raises(ValueError, match="run-record.v1.schema.json: joined by both RunRecord and"):
        schemas.schema("run-record", 1)(Twice)
    assert schemas.JOINED["run-record.v1.schema.json"].__name__ == "RunRecord"


def test_compile_and_a_run_s_builds_write_the_header_through_the_one_writer(tmp_path, monkeypatch, capsys):
    """``authoring.generated`` (compile, schema) and ``runner.builds`` (a build a run starts) both make
    cpp/tolerances.h current through ``store.write_generated``, the one writer of every generated file."""
    from tileproof.records import store
    from tileproof.records.tolerances import HEADER_FILE
    from tileproof.runner import builds

    for part in ("kernels", "cpp"):
        shutil.copytree(REPO / part, tmp_path / part)
    table = tmp_path / "kernels" / "tolerances.py"
    original = table.read_text()
    calls: list[tuple[str, bool]] = []
    real = store.write_generated

    def spy(root, rel, text):
        written = real(root, rel, text)
        calls.append((Path(rel).as_posix(), written is not None))
        return written

    monkeypatch.setattr(store, "write_generated", spy)

    def add(name: str) -> None:
        entry = f'    "{name}": Tolerance(rtol=0, atol=0),\n'
        table.write_text(original.replace("TOLERANCES = {\n", "TOLERANCES = {\n" + entry))

    add("one")
    builds.make_header_current(tmp_path)
    assert calls == [(HEADER_FILE.as_posix(), True)]
    assert "compile: regenerated cpp/tolerances.h" in capsys.readouterr().out
    assert generated.make_current(tmp_path, present_only=True) == []  # what the build wrote is current
    add("two")
    calls.clear()
    assert generated.make_current(tmp_path, present_only=True) == [HEADER_FILE]
    assert calls == [(HEADER_FILE.as_posix(), True)]
    assert '"two"' in (tmp_path / HEADER_FILE).read_text()
    builds.make_header_current(tmp_path)
    assert calls[-1] == (HEADER_FILE.as_posix(), False)
    assert capsys.readouterr().out == ""
