"""Build: the nvcc command, res-usage parsing, the API inventory, and real compiles of a minimal C++
tile program and a course kernel (CI has PyPI, not a GPU)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tileproof.records.errors import TileproofError
from tileproof.records.models import COMPILE_VERSION, CompileRecord
from tileproof.records.tolerances import load_table
from tileproof.runner.builds import compile_programs, make_header_current
from tileproof.runner.capture import tools as discover
from tileproof.toolchain import build

DATA = Path(__file__).parent / "data" / "nvcc"
REPO = Path(__file__).resolve().parents[1]


def test_nvcc_argv_is_the_documented_command():
    argv = build.nvcc_argv(Path("/x/nvcc"), Path("a.cu"), "sm_90", Path("a"))
    assert argv == ["/x/nvcc", "-std=c++20", "-O3", "-arch=sm_90", "-enable-tile", "a.cu", "-o", "a"]
    assert "--tilefatbin" in build.nvcc_argv(Path("/x/nvcc"), Path("a.cu"), "sm_90", Path("a"), tilefatbin=True)


def test_several_targets_are_one_gencode_each_with_what_arch_means():
    argv = build.nvcc_argv(Path("/x/nvcc"), Path("a.cu"), ["sm_80", "sm_120"], Path("a"), keep_dir=Path("k"))
    assert argv == ["/x/nvcc", "-std=c++20", "-O3",
                    "-gencode", "arch=compute_80,code=[compute_80,sm_80]",
                    "-gencode", "arch=compute_120,code=[compute_120,sm_120]",
                    "-enable-tile", "-keep", "-keep-dir", "k", "a.cu", "-o", "a"]


@pytest.mark.parametrize("value, expected",
                         [("sm_90", "sm_90"), ("90", "sm_90"), ("9.0", "sm_90"), ("SM_120", "sm_120")])
def test_parse_target(value, expected):
    assert build.parse_target(value) == expected


@pytest.mark.parametrize("value, message",
                         [("sm_75", "below sm_80"), ("sm_999", "unknown target"), ("hopper", "unknown target")])
def test_bad_target_is_one_line(value, message):
    with pytest.raises(TileproofError, match=message) as e:
        build.parse_target(value)
    assert "\n" not in str(e.value)


def test_parse_res_usage_real_listing():
    usage = build.parse_res_usage((DATA / "sm90-tilefatbin.res-usage.txt").read_text())
    assert [(u.function, u.registers, u.shared_bytes) for u in usage] == [("_Z4tmaxPKfPf", 15, 1536)]


def test_inventory_classifies_by_signature():
    tools = discover()
    inv = build.inventory(build.header_path(tools), "13.4")
    assert {"reduce_max", "reduce_min", "sum"} <= set(inv.reductions)  # sum is a reduction too
    assert {"partial_sum", "partial_prod"} <= set(inv.scans)
    assert {"mma", "matmul"} <= set(inv.matrix)
    assert not set(inv.reductions) & set(inv.scans)


def test_inventory_on_a_header_without_sum(tmp_path):
    header = tmp_path / "cuda_tile.h"
    header.write_text(
        "template<int D, class T> requires (D >= 0)\n"
        "__tile_builtin__ reduction_result_t<T, D> reduce_max(T a, integral_constant<D> d = {}) noexcept;\n"
        "template<int D, class T>\n"
        "__tile_builtin__ T partial_sum(T a, integral_constant<D> = {}, scan_direction_constant<F> = {}) noexcept;\n"
    )
    inv = build.inventory(header, None)
    assert inv.reductions == ["reduce_max"]
    assert inv.scans == ["partial_sum"]
    assert inv.matrix == []


@pytest.fixture(scope="module")
def tools():
    """The toolchain found once for the module's compiles (``runner.capture.tools``: pip's nvcc, tileiras, ptxas
    and their versions, the same for every test here); the inventory test above finds it on its own."""
    return discover()


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A temp tree: the minimal tile program (tests/data/programs; the course's C++ programs are built by
    ``nox -s compile``, the authoring test builds one that uses the harness) beside the repo's C++ helper
    headers, and a course kernel with its helpers; compiled for sm_90 by the tests."""
    root = tmp_path_factory.mktemp("repo")
    (root / "cpp").mkdir()
    (root / "kernels").mkdir()
    shutil.copy(PROGRAMS / "refuses_sm80.cu", root / "cpp" / "small.cu")
    for name in ("tolerances.h", "harness.h"):
        shutil.copy(REPO / "cpp" / name, root / "cpp" / name)
    for name in ("vector_add.py", "harness.py", "tolerances.py"):
        shutil.copy(REPO / "kernels" / name, root / "kernels" / name)
    return root


def _compile(root, tools, capsys):
    from tileproof.toolchain.aot import declared_kernels

    py = {p: list(declared_kernels(p)) for p in build.programs(root, "kernels")}
    record = compile_programs(root, tools, ["sm_90"], build.programs(root, "cpp"), py, 2)
    return record, capsys.readouterr().out


@pytest.mark.slow(reason="a real nvcc call and a real cuTile export, then the warm rerun that reuses them")
def test_real_compile_then_warm_rerun(tree, tools, capsys):
    record, out = _compile(tree, tools, capsys)
    assert record is not None, out
    assert record.passed, out
    kinds = {(b.program, b.artifact_kind) for b in record.builds}
    assert kinds == {("cpp/small.cu", "executable"), ("cpp/small.cu", "tilefatbin"),
                     ("kernels/vector_add.py", "cubin")}
    for b in record.builds:
        assert b.verdict == "built", b
        assert b.res_usage, b
        assert (tree / b.step.stdout.path).is_file()
    assert (tree / "runs" / f"{record.run_id}.json").is_file()
    # compile_version 4: each program's own files and the entries it names; never the table or its header whole.
    assert not {s.path for s in record.sources} & {"cpp/tolerances.h", "kernels/tolerances.py"}
    kernel = record.inputs["kernels/vector_add.py"]
    assert kernel.uses == ["kernels/vector_add.py", "kernels/harness.py"]
    assert "vector_add" in kernel.tolerances
    assert record.inputs["cpp/small.cu"].uses[0] == "cpp/small.cu"
    # Warm: nothing changed, so no compiler call and no new record.
    again, out = _compile(tree, tools, capsys)
    assert again is None
    assert "0 compiler calls" in out


def _plan(root, tools, py):
    """Today's build plan of ``root`` for sm_90 (cache keys over each program's own inputs), no compiler call."""
    table = load_table(root)
    cpp = build.programs(root, "cpp")
    owns = {p: build.own_inputs(root, p, table) for p in [*cpp, *py]}
    return build.plan(root, tools, ["sm_90"], cpp, py, owns)


@pytest.mark.slow(reason="a real nvcc call for the one program a new entry reaches, the rest reused")
def test_only_the_programs_a_change_reaches_are_built_again(tree, tools, capsys, tmp_path):
    """A real nvcc call for the one program that reads the new entry: that the others are reused, and what the
    record then says of both, is what the compile output and the record attest (no fake build can show it)."""
    _compile(tree, tools, capsys)  # the module's tree, built by the test above (or now, run alone)
    work = tmp_path / "repo"
    shutil.copytree(tree, work)
    # A helper no program includes, and a new tolerance entry no program names: nothing is built again.
    (work / "cpp" / "harness.h").write_text((work / "cpp" / "harness.h").read_text() + "// reworded\n")
    table = work / "kernels" / "tolerances.py"
    table.write_text(table.read_text().replace("TOLERANCES = {", 'TOLERANCES = {\n    "brand_new": '
                                               "Tolerance(rtol=1e-3, atol=1e-3),", 1))
    again, out = _compile(work, tools, capsys)
    assert again is None, out
    assert "compile: regenerated cpp/tolerances.h" in out  # the header changed too, and reaches no program
    assert "up to date: 0 built, 3 reused of 3 artifacts (0 compiler calls)" in out
    # The C++ program now reads the new entry: it alone is built again.
    small = work / "cpp" / "small.cu"
    small.write_text('#include "tolerances.h"\nstatic_assert(tileproof::tolerances::get("brand_new").rtol > 0);\n'
                     + small.read_text())
    built, out = _compile(work, tools, capsys)
    assert built is not None and built.passed, out
    assert {b.program for b in built.builds if b.reused_from is None} == {"cpp/small.cu"}, out
    assert {b.program for b in built.builds if b.reused_from is not None} == {"kernels/vector_add.py"}, out
    assert "compile: 2 built, 1 reused, 0 failed or refused of 3 artifacts" in out
    assert built.inputs["cpp/small.cu"].tolerances.keys() == {"brand_new"}  # what the record attests
    assert "cpp/tolerances.h" not in built.inputs["cpp/small.cu"].uses
    # The Python program's own entry changes: its export alone is due; a hand edit of the header (compile
    # would rewrite it) keys the header whole, so the program including it is due too (fail closed).
    table.write_text(table.read_text().replace('"vector_add": Tolerance(rtol=1.1920928955078125e-07',
                                               '"vector_add": Tolerance(rtol=2.384185791015625e-07'))
    make_header_current(work)  # as compile does first
    capsys.readouterr()
    cpp_jobs, py_jobs = _plan(work, tools, {work / "kernels" / "vector_add.py": ["vector_add"]})
    assert [build.cached(work, j) for j in py_jobs] == [None]
    assert all(build.cached_cpp(work, j) is not None for j in cpp_jobs)
    (work / "cpp" / "tolerances.h").write_text(build.render_cpp_header(load_table(work)) + "// edited\n")
    cpp_jobs, _ = _plan(work, tools, {})
    assert [build.cached_cpp(work, j) for j in cpp_jobs] == [None]


@pytest.mark.slow(reason="a real nvcc failure, read back from its transcript")
def test_failing_source_gives_failed_result_not_a_crash(tree, tools, capsys):
    bad = tree / "cpp" / "broken.cu"
    bad.write_text("#include <cuda_tile.h>\nint main() { return undefined_name; }\n")
    try:
        record = compile_programs(tree, tools, ["sm_90"], [bad], {}, 1)
    finally:
        bad.unlink()
    assert record is not None
    assert not record.passed
    assert {b.verdict for b in record.builds} == {"failed"}
    assert all(b.step.exit_code not in (0, None) for b in record.builds)


PROGRAMS = Path(__file__).parent / "data" / "programs"


@pytest.fixture
def small(tmp_path):
    """A tree holding one minimal tile program that every target but sm_80 compiles."""
    (tmp_path / "cpp").mkdir()
    shutil.copy(PROGRAMS / "refuses_sm80.cu", tmp_path / "cpp" / "small.cu")
    return tmp_path


def _evidence(root, result):
    return [root / t.path for s in (result.step, result.inspect, result.all_targets_step) if s
            for t in (s.stdout, s.stderr)]


@pytest.mark.slow(reason="real nvcc calls: the kept tile fatbin compared byte for byte with --tilefatbin's")
def test_one_nvcc_call_builds_every_target_and_keeps_the_tile_fatbin(small, tools, capsys):
    src = small / "cpp" / "small.cu"
    src.write_text(src.read_text().replace("__CUDA_ARCH__ == 800", "__CUDA_ARCH__ == 1"))  # refuses nothing
    record = compile_programs(small, tools, ["sm_80", "sm_90"], [src], {}, 1)
    assert record is not None, capsys.readouterr().out
    assert record.passed, capsys.readouterr().out
    assert record.compile_version == COMPILE_VERSION, capsys.readouterr().out
    assert [(b.target, b.artifact_kind) for b in record.builds] == [
        ("sm_80", "executable"), ("sm_80", "tilefatbin"), ("sm_90", "executable"), ("sm_90", "tilefatbin")]
    steps = {b.step.stdout.path for b in record.builds}
    assert len(steps) == 1  # one compiler call made all four
    assert len({b.artifact.sha256 for b in record.builds}) == 2  # one executable, one tile fatbin
    for b in record.builds:
        assert b.inspect.argv[1:3] == ["-arch", b.target]
        assert b.res_usage
        assert b.all_targets_step is None
        assert all(p.is_file() for p in _evidence(small, b))
    assert not any(p.name == "keep" for p in (small / "build").rglob("*"))  # nvcc's intermediates are gone
    # The tile fatbin kept from the call is byte for byte what --tilefatbin writes for the same targets.
    tfb = next(b for b in record.builds if b.artifact_kind == "tilefatbin")
    direct = small / "direct.tilefatbin"
    argv = build.nvcc_argv(tools.tool("nvcc"), src, ["sm_80", "sm_90"], direct, tilefatbin=True)
    subprocess.run(argv, check=True, env={**os.environ, "PATH": os.pathsep.join(
        [*map(str, tools.path_dirs()), os.environ.get("PATH", "")])}, capture_output=True)
    assert build.sha256_file(direct) == tfb.artifact.sha256


@pytest.mark.slow(reason="real nvcc calls: which target breaks the one call only the compiler says")
def test_a_target_that_breaks_the_one_call_is_found_by_building_each_alone(small, tools, capsys):
    src = small / "cpp" / "small.cu"
    record = compile_programs(small, tools, ["sm_80", "sm_90"], [src], {}, 1)
    out = capsys.readouterr().out
    assert record is not None
    assert not record.passed
    verdicts = {(b.target, b.artifact_kind): b.verdict for b in record.builds}
    assert verdicts == {("sm_80", "executable"): "failed", ("sm_80", "tilefatbin"): "failed",
                        ("sm_90", "executable"): "built", ("sm_90", "tilefatbin"): "built"}, out
    first = {b.all_targets_step.stdout.path for b in record.builds}
    assert len(first) == 1
    assert all(b.all_targets_step.exit_code not in (0, None) for b in record.builds)
    assert all(b.step.argv[3] == f"-arch={b.target}" for b in record.builds)  # each built alone
    assert "refuses sm_80" in out  # the compiler's own error line, printed under the failed target
    for b in record.builds:
        assert all(p.is_file() for p in _evidence(small, b))
    # A rerun tries the one call again, and reuses the target that built alone.
    again = compile_programs(small, tools, ["sm_80", "sm_90"], [src], {}, 1)
    reused = {b.target: b.reused_from for b in again.builds}
    assert reused["sm_90"] == record.run_id
    assert reused["sm_80"] is None


@pytest.fixture
def two_kernels(tmp_path):
    """A tree holding one Python program with two kernels; ``bad_tile`` is refused by cuTile until fixed."""
    (tmp_path / "kernels").mkdir()
    shutil.copy(PROGRAMS / "two_kernels.py", tmp_path / "kernels" / "two_kernels.py")
    return tmp_path, tmp_path / "kernels" / "two_kernels.py"


@pytest.mark.slow(reason="real cuTile exports, every one a real tileiras run")
def test_one_process_exports_every_kernel_and_target_of_a_program_with_cutile_s_cache_off(
        two_kernels, tools, monkeypatch, tmp_path_factory, capsys):
    root, src = two_kernels
    src.write_text(src.read_text().replace("BAD_TILE = 48", "BAD_TILE = 64"))
    cutile_cache = tmp_path_factory.mktemp("cutile-cache")
    monkeypatch.setenv("CUDA_TILE_CACHE_DIR", str(cutile_cache))  # passed on to the child (runner.environment)
    record = compile_programs(root, tools, ["sm_80", "sm_90"], [], {src: ["copy_tile", "bad_tile"]}, 1)
    assert record is not None, capsys.readouterr().out
    assert record.passed, capsys.readouterr().out
    assert record.compile_version == COMPILE_VERSION, capsys.readouterr().out
    assert sorted((b.kernel, b.target) for b in record.builds) == [
        ("bad_tile", "sm_80"), ("bad_tile", "sm_90"), ("copy_tile", "sm_80"), ("copy_tile", "sm_90")]
    assert len({b.step.stdout.path for b in record.builds}) == 1  # one process made all four
    assert len({b.artifact.sha256 for b in record.builds}) == 4
    assert len({b.key for b in record.builds}) == 4
    for b in record.builds:
        assert b.verdict == "built"
        assert b.res_usage
        assert b.all_targets_step is None
        assert b.inspect.argv[-1] == str(root / b.artifact.path)
        assert all(p.is_file() for p in _evidence(root, b))
    assert not any(cutile_cache.iterdir())  # every cubin came from tileiras, none from cuTile's disk cache
    again = compile_programs(root, tools, ["sm_80", "sm_90"], [], {src: ["copy_tile", "bad_tile"]}, 1)
    assert again is None
    assert "0 compiler calls" in capsys.readouterr().out


@pytest.mark.slow(reason="real cuTile exports: which kernel breaks the one call only the compiler says")
def test_a_kernel_that_breaks_the_one_export_call_is_found_by_exporting_each_alone(two_kernels, tools, capsys):
    root, src = two_kernels
    record = compile_programs(root, tools, ["sm_90"], [], {src: ["copy_tile", "bad_tile"]}, 1)
    out = capsys.readouterr().out
    assert record is not None
    assert not record.passed
    assert {b.kernel: b.verdict for b in record.builds} == {"copy_tile": "built", "bad_tile": "failed"}, out
    first = {b.all_targets_step.stdout.path for b in record.builds}
    assert len(first) == 1
    assert all(b.all_targets_step.exit_code not in (0, None) for b in record.builds)
    for b in record.builds:
        assert b.step.argv[-3:-1] == [b.kernel, b.target]
        assert len(b.step.argv) == 7  # each exported alone
        assert all(p.is_file() for p in _evidence(root, b))
    assert "not a power of two" in out  # cuTile's own error line, printed under the failed export
    # the exception the failed export raised, typed in the record (never read back from its traceback)
    failed = next(b for b in record.builds if b.kernel == "bad_tile")
    assert failed.failure is not None
    assert failed.failure.type.startswith("cuda.tile.")
    assert "not a power of two" in failed.failure.message
    assert f"raised {failed.failure}" in out
    assert next(b for b in record.builds if b.kernel == "copy_tile").failure is None
    # A rerun reuses the export that built alone and tries the other again.
    again = compile_programs(root, tools, ["sm_90"], [], {src: ["copy_tile", "bad_tile"]}, 1)
    assert {b.kernel: b.reused_from for b in again.builds} == {"copy_tile": record.run_id, "bad_tile": None}


@pytest.mark.parametrize("version, kind, refused", [
    (1, "executable", True), (2, "executable", False), (2, "cubin", True), (3, "executable", False),
    (3, "cubin", False)])
def test_only_a_compile_version_that_made_the_one_call_holds_its_failure(tmp_path, version, kind, refused):
    """all_targets_step: C++ builds from compile_version 2, Python kernels from 3 (models.COMPILE_VERSION)."""
    from datetime import datetime, timezone

    import audit_tree  # tests/data/audit, on sys.path through conftest
    from pydantic import ValidationError

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "a.py").write_text("AOT_SIGNATURES = {}\n")
    data = audit_tree.compile_record(tmp_path, ["kernels/a.py"], datetime(2026, 1, 1, tzinfo=timezone.utc)).model_dump()
    build = data["builds"][0]
    build.update(artifact_kind=kind, kernel="a" if kind == "cubin" else None,
                 all_targets_step={**build["step"], "exit_code": 1})
    data["compile_version"] = version
    if refused:
        with pytest.raises(ValidationError, match=f"before compile_version {2 if version == 1 else 3}"):
            CompileRecord.model_validate(data)
    else:
        assert CompileRecord.model_validate(data).builds[0].all_targets_step.exit_code == 1


def test_only_compile_version_5_names_a_cuda_tile_release_or_an_export_failure(tmp_path):
    from datetime import datetime, timezone

    import audit_tree  # tests/data/audit, on sys.path through conftest
    from pydantic import ValidationError

    from tileproof.records.models import CUDA_TILE_COMPILE_VERSION

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "a.py").write_text("AOT_SIGNATURES = {}\n")
    data = audit_tree.compile_record(tmp_path, ["kernels/a.py"], datetime(2026, 1, 1, tzinfo=timezone.utc)).model_dump()
    data["inputs"] = {"kernels/a.py": {"uses": ["kernels/a.py"], "tolerances": {}}}  # compile_version 4 and up
    release = {"version": "1.5.0", "requires": None, "tileiras": "13.4.92", "in_range": None,
               "outside_range_allowed": True}
    failure = {"type": "TypeError", "message": "x"}
    assert COMPILE_VERSION == CUDA_TILE_COMPILE_VERSION == 5
    for version, ok in ((4, False), (COMPILE_VERSION, True)):
        for change in ({"cuda_tile": release}, {"builds": [{**data["builds"][0], "failure": failure}]}):
            given = {**data, "compile_version": version, **change}
            if ok:
                CompileRecord.model_validate(given)
            else:
                with pytest.raises(ValidationError, match="before compile_version 5"):
                    CompileRecord.model_validate(given)


def test_a_changed_exporter_builds_every_cubin_again_and_nothing_else(tmp_path, monkeypatch):
    """A cubin's cache key covers toolchain/aot.py (how tileproof exports), a C++ build's does not."""
    (tmp_path / "kernels").mkdir()
    src = tmp_path / "kernels" / "k.py"
    src.write_text("AOT_SIGNATURES = {}\n")
    export = build.export_argv(src, [("k", "sm_90", Path("OUT"))])[:-1]
    nvcc = build.nvcc_argv(Path("/x/nvcc"), src, "sm_90", Path("/OUT"))[:-2]

    own = build.own_inputs(tmp_path, src, None)

    def keys():
        return (build.cache_key(tmp_path, own, export, "sm_90", "cubin", {}),
                build.cache_key(tmp_path, own, nvcc, "sm_90", "executable", {}))

    before = keys()
    other = tmp_path / "aot.py"
    other.write_text(build.EXPORTER.read_text() + "\n# changed\n")
    monkeypatch.setattr(build, "EXPORTER", other)
    after = keys()
    assert after[0] != before[0]
    assert after[1] == before[1]


def test_the_kernel_index_imports_only_the_programs_a_change_reaches(tmp_path, monkeypatch):
    """A new tolerance entry, or an entry another program names, re-imports no program for its kernel names; a
    change to an entry the program names, or to a helper it imports, does (``builds.kernel_index``)."""
    from tileproof.runner import builds

    (tmp_path / "kernels").mkdir()
    for name in ("vector_add.py", "harness.py", "tolerances.py"):
        shutil.copy(REPO / "kernels" / name, tmp_path / "kernels" / name)
    (tmp_path / "kernels" / "other.py").write_text('AOT_SIGNATURES = {}\nCHECK = "other_check"\n')
    imported: list[str] = []
    monkeypatch.setattr(builds, "declared_behind_wall", lambda root, src: imported.append(src.name) or ["k"])
    sources = build.programs(tmp_path, "kernels")
    table = tmp_path / "kernels" / "tolerances.py"

    def index() -> list[str]:
        imported.clear()
        builds.kernel_index(tmp_path, sources)
        return sorted(imported)

    assert index() == ["other.py", "vector_add.py"]
    assert index() == []
    table.write_text(table.read_text().replace("TOLERANCES = {", 'TOLERANCES = {\n    "other_check": '
                                               "Tolerance(rtol=0.0, atol=0.0),", 1))
    assert index() == ["other.py"]  # the entry its file names; vector_add.py names none of it
    table.write_text(table.read_text().replace("TOLERANCES = {", 'TOLERANCES = {\n    "nobody_s": '
                                               "Tolerance(rtol=0.0, atol=0.0),", 1))
    assert index() == []
    harness = tmp_path / "kernels" / "harness.py"
    harness.write_text(harness.read_text() + "\n# reworded\n")
    assert index() == ["vector_add.py"]  # other.py imports no harness
