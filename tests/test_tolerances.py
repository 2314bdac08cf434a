"""The C++ tolerance header agrees with kernels/tolerances.py, and the C++ sources use only its names."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tileproof.records.store import write_generated
from tileproof.records.tolerances import (
    HEADER_FILE,
    TABLE_FILE,
    ToleranceTableError,
    cpp_header,
    has_header,
    load_table,
    render_cpp_header,
)

REPO = Path(__file__).resolve().parents[1]
LOOKUP = re.compile(r'\btol(?:erances)?::get\("([^"]*)"\)')
"""How a C++ program names its check: tol::get("matmul") (a compile-time lookup)."""

FAKE_TABLE = '''
from typing import NamedTuple

class Tolerance(NamedTuple):
    rtol: float
    atol: float

TOLERANCES = {
    "zeta": Tolerance(rtol=1e-5, atol=0.0),
    "alpha": Tolerance(rtol=0.0001, atol=1e-3),
}
'''


def fake_repo(tmp_path: Path, table_source: str = FAKE_TABLE) -> Path:
    """A repository root holding only kernels/tolerances.py (and an empty cpp/)."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "cpp").mkdir()
    (tmp_path / TABLE_FILE).write_text(table_source, encoding="utf-8")
    return tmp_path


def test_committed_header_matches_table() -> None:
    committed = (REPO / HEADER_FILE).read_text(encoding="utf-8")
    rendered = render_cpp_header(load_table(REPO))
    assert committed == rendered, f"{HEADER_FILE} disagrees with {TABLE_FILE}: run nox -s schema"


def test_render_is_deterministic() -> None:
    table = load_table(REPO)
    reordered = dict(reversed(list(table.items())))
    assert render_cpp_header(table) == render_cpp_header(table) == render_cpp_header(reordered)


def test_every_check_name_in_cpp_sources_is_in_table() -> None:
    table = load_table(REPO)
    sources = sorted((REPO / "cpp").glob("*.cu"))
    assert sources, "no C++ programs found under cpp/"
    for source in sources:
        names = LOOKUP.findall(source.read_text(encoding="utf-8"))
        assert names, f"{source.name} looks up no tolerance with tol::get(\"...\")"
        unknown = sorted(set(names) - set(table))
        assert not unknown, f"{source.name} uses checks missing from {TABLE_FILE}: {unknown}"


def test_header_values_round_trip_exactly() -> None:
    table = load_table(REPO)
    rows = re.findall(r'\{"(\w+)",\s*([^,]+),\s*([^}]+)\}', render_cpp_header(table))
    assert {name: (float(r), float(a)) for name, r, a in rows} == table


def test_load_table_does_not_import_cuda_tile_or_kernels(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path, "import sys\nassert 'x' not in sys.modules\n" + FAKE_TABLE)
    before = set(sys.modules)
    table = load_table(repo)
    added = set(sys.modules) - before
    assert table == {"zeta": (1e-5, 0.0), "alpha": (1e-4, 1e-3)}
    assert not {m for m in added if m.startswith(("cuda", "kernels"))}


def test_the_one_writer_writes_the_rendered_header_once(tmp_path: Path) -> None:
    """cpp/tolerances.h is written by ``store.write_generated`` alone (compile's ``authoring.generated``
    and a run's ``runner.builds`` both call it): the table's rendering, atomically, and only when stale."""
    repo = fake_repo(tmp_path)
    assert has_header(repo)
    path = write_generated(repo, HEADER_FILE, cpp_header(repo))
    assert path == repo / HEADER_FILE
    text = path.read_text(encoding="utf-8")
    assert text == render_cpp_header(load_table(repo))
    assert "DO NOT EDIT" in text
    assert "nox -s schema" in text
    assert "kernels/tolerances.py" in text
    assert text.index('"alpha"') < text.index('"zeta"')  # sorted by name
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["tolerances.h"]
    before = path.stat().st_mtime_ns
    assert write_generated(repo, HEADER_FILE, cpp_header(repo)) is None  # current: left untouched
    assert path.stat().st_mtime_ns == before
    assert not has_header(tmp_path / "elsewhere")  # no table, no cpp/: no header to keep current


def test_missing_table_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ToleranceTableError, match="not found"):
        load_table(tmp_path)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ('"bad-name": Tolerance(rtol=1e-5, atol=0.0)', "not usable in C\\+\\+"),
        ('"int": Tolerance(rtol=1e-5, atol=0.0)', "not usable in C\\+\\+"),
        ('"neg": Tolerance(rtol=-1.0, atol=0.0)', "must be finite and >= 0"),
        ('"inf": Tolerance(rtol=1e-5, atol=float("inf"))', "must be finite and >= 0"),
        ('"pair": (1e-5, 0.0)', "needs numeric rtol and atol"),
    ],
    ids=["hyphen", "cpp-keyword", "negative", "infinite", "bare-tuple"],
)
def test_unusable_entries_are_rejected(tmp_path: Path, entry: str, problem: str) -> None:
    source = FAKE_TABLE.replace('"alpha"', entry + ',\n    "alpha"')
    with pytest.raises(ToleranceTableError, match=problem):
        load_table(fake_repo(tmp_path, source))


def test_broken_table_file_is_reported(tmp_path: Path) -> None:
    # The table is parsed, never executed: `1 / 0` is reported as code, not run.
    with pytest.raises(ToleranceTableError, match=r"tolerances\.py:1: TOLERANCES must be a dict literal"):
        load_table(fake_repo(tmp_path, "TOLERANCES = 1 / 0\n"))


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("TOLERANCES = {\n    'a': Tolerance(rtol=RTOL, atol=0.0),\n}\n",
         r":2: TOLERANCES\['a'\] value 'RTOL' is not a literal"),
        ("TOLERANCES = {**BASE}\n", r":1: TOLERANCES: '\*\*' unpacking is not a literal"),
        ("TOLERANCES = {'a': Tolerance(rtol=1e-5)}\n", r":1: TOLERANCES\['a'\] needs numeric rtol and atol"),
        ("TOLERANCES = {'a': Tolerance(rtol='x', atol=0.0)}\n", r"needs numeric rtol and atol \(rtol is 'x'\)"),
        ("X = 1\n", r"no module-level TOLERANCES"),
        ("TOLERANCES = {'a': Tolerance(1e-5, 0.0)}\nTOLERANCES = {}\n", r":2: TOLERANCES is assigned twice"),
        ("def f(:\n", r":1: not valid Python"),
    ],
    ids=["name", "unpacking", "missing-atol", "string", "no-table", "twice", "syntax"],
)
def test_table_that_is_not_a_literal_is_one_line_naming_the_line(tmp_path: Path, source: str, problem: str) -> None:
    with pytest.raises(ToleranceTableError, match=problem) as info:
        load_table(fake_repo(tmp_path, source))
    assert "\n" not in str(info.value)


def test_load_table_executes_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').write('x')\n" + FAKE_TABLE
    assert load_table(fake_repo(tmp_path, source)) == {"zeta": (1e-5, 0.0), "alpha": (1e-4, 1e-3)}
    assert not marker.exists()


def test_positional_and_float_text_entries(tmp_path: Path) -> None:
    source = "TOLERANCES = {'a': Tolerance(1e-5, 0.0), 'b': Tolerance(rtol=float('1e-3'), atol=2)}\n"
    assert load_table(fake_repo(tmp_path, source)) == {"a": (1e-5, 0.0), "b": (1e-3, 2.0)}
