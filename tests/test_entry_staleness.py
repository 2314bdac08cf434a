"""Evidence depends on exactly what it used: a run record of run_version 3 attests the tolerance entries of
its own checks (``RunRecord.tolerances``), so an unrelated new entry stales nothing and a changed
entry stales only the rows whose checks use it. Older records (the committed evidence) are judged
the same way where git history holds the table version they attest, else whole-file."""

import fixture_records as fx

from tileproof.judge.gate import Bound, decide
from tileproof.records.models import (
    FileDigest,
    Hardware,
    LessonFront,
    LessonProgram,
    ResultRow,
)
from tileproof.records.tolerances import entry_digest, entry_digests

PY, CU, HELPER = "kernels/prog.py", "cpp/prog.cu", "kernels/harness.py"
TABLE_PY, TABLE_H = "kernels/tolerances.py", "cpp/tolerances.h"
FRONT = LessonFront(
    lesson_version=1, id="demo", title="Demo", status="draft",
    programs=[LessonProgram(path=PY, checks=["matmul", "softmax"]), LessonProgram(path=CU, checks=["fused"])],
    hardware=Hardware(),
    results=[ResultRow(program=PY, check="matmul", bound="b"), ResultRow(program=PY, check="softmax", bound="b"),
             ResultRow(program=CU, check="fused", bound="b")],
)
TABLE = {"matmul": Bound(1e-4, 1e-3), "softmax": Bound(1e-5, 1e-6), "fused": Bound(1e-4, 1e-3)}
TODAY = {PY: fx.sha("py"), CU: fx.sha("cu"), HELPER: fx.sha("harness"), TABLE_PY: fx.sha("table v1"),
         TABLE_H: fx.sha("header v1")}
GROWN = {TABLE_PY: fx.sha("table v2: one more entry"), TABLE_H: fx.sha("header v2: one more entry")}


def _records(tmp_path, version):
    (tmp_path / "evidence/s").mkdir(parents=True)
    (tmp_path / "evidence/s/q.csv").write_text(fx.query_csv(fx.H200))
    q = fx.transcript("evidence/s/q.csv", fx.query_csv(fx.H200))
    plain = {n: (b.rtol, b.atol) for n, b in TABLE.items()}

    def one(n, program, checks):
        srcs = {program: TODAY[program], HELPER: TODAY[HELPER], "lessons/demo.md": "any"}
        if version == 1:
            table_file = TABLE_H if program == CU else TABLE_PY
            srcs[table_file] = TODAY[table_file]
        return fx.run_record(n=n, program=program, front=FRONT, sources=srcs, query=q,
                             checks=[fx.check(c, *plain[c]) for c in checks],
                             binary=FileDigest(path="build/x/prog", sha256=fx.sha("bin")) if program == CU else None,
                             tolerances=entry_digests(plain, checks) if version == 2 else None)
    return [one(1, PY, ["matmul", "softmax"]), one(2, CU, ["fused"])]


def _outcomes(tmp_path, records, table, today=TODAY):
    read = lambda rel: (tmp_path / rel).read_bytes() if (tmp_path / rel).is_file() else None  # noqa: E731
    return [r.outcome for r in decide(FRONT, records, today, table, read).rows]


def test_entry_digest_is_canonical():
    assert entry_digest("matmul", 1e-4, 1e-3) == entry_digest("matmul", 0.0001, 0.001)
    assert entry_digest("matmul", 1e-4, 1e-3) != entry_digest("matmul", 1e-4, 2e-3)
    assert entry_digest("matmul", 1e-4, 1e-3) != entry_digest("fused", 1e-4, 1e-3)
    assert entry_digests({"a": (0.0, 0.0), "b": (1.0, 1.0)}, ["b", "zz"]) == {"b": entry_digest("b", 1.0, 1.0)}


def test_unrelated_new_entry_stales_nothing(tmp_path):
    records = _records(tmp_path, 2)
    assert _outcomes(tmp_path, records, TABLE) == ["passed"] * 3
    grown = dict(TABLE, new_lesson_check=Bound(0.0, 0.0))
    today = dict(TODAY, **GROWN)  # both files changed; no entry a record used did
    assert _outcomes(tmp_path, records, grown, today) == ["passed"] * 3


def test_changed_entry_stales_only_its_rows(tmp_path):
    records = _records(tmp_path, 2)
    changed = dict(TABLE, softmax=Bound(2e-5, 1e-6))
    read = lambda rel: (tmp_path / rel).read_bytes() if (tmp_path / rel).is_file() else None  # noqa: E731
    rows = decide(FRONT, records, TODAY, changed, read).rows
    # the Python record used 'softmax': both its rows are stale (one record, one program); the C++ one is not
    assert [r.outcome for r in rows] == ["stale", "stale", "passed"]
    assert "tolerance entry 'softmax' changed in kernels/tolerances.py" in rows[0].reason
    removed = {k: v for k, v in TABLE.items() if k != "fused"}
    cu = decide(FRONT, records, TODAY, removed, read).rows[2]
    assert cu.outcome == "stale"
    assert "tolerance entry 'fused' removed" in cu.reason


def test_version_2_record_must_attest_its_rows_entry(tmp_path):
    records = _records(tmp_path, 2)
    front = FRONT.model_copy(update={"results": [*FRONT.results, ResultRow(program=CU, check="softmax", bound="b")]})
    read = lambda rel: (tmp_path / rel).read_bytes() if (tmp_path / rel).is_file() else None  # noqa: E731
    row = decide(front, records, TODAY, TABLE, read).rows[3]
    assert row.outcome == "stale"
    assert "does not attest the tolerance entry of check 'softmax'" in row.reason


def test_version_1_records_stay_whole_file_dependent(tmp_path):
    records = _records(tmp_path, 1)
    assert _outcomes(tmp_path, records, TABLE) == ["passed"] * 3
    # documented (docs/records-and-staleness.md, "Records written before"): old records list the whole table file
    assert _outcomes(tmp_path, records, dict(TABLE, other=Bound(0.0, 0.0)), dict(TODAY, **GROWN)) == ["stale"] * 3


def test_a_check_without_a_tolerance_entry_blocks_publish(tmp_path):
    """status and publish print the one decision's blockers: an unlisted check is one of its kinds."""
    records = _records(tmp_path, 2)
    table = {k: v for k, v in TABLE.items() if k != "fused"}
    read = lambda rel: (tmp_path / rel).read_bytes() if (tmp_path / rel).is_file() else None  # noqa: E731
    d = decide(FRONT, records, TODAY, table, read)
    assert not d.publishable
    kinds = [(b.kind, b.subject) for b in d.blockers]
    assert ("no-tolerance-entry", "cpp/prog.cu fused") in kinds
    blocker = next(b for b in d.blockers if b.kind == "no-tolerance-entry")
    assert "kernels/tolerances.py" in blocker.reason
    assert blocker.command.startswith('add "fused": Tolerance(')
    assert "1 check(s) have no tolerance entry" in d.lacking()


# --- the committed evidence (records before run_version 3) against a grown table, in a temp git repository ---

import shutil  # noqa: E402
import subprocess  # noqa: E402

import pytest  # noqa: E402
from conftest import clone_at, git_commit_all  # noqa: E402

from tileproof.authoring.generated import make_current  # noqa: E402
from tileproof.gather.tree import Tree  # noqa: E402
from tileproof.records import lessons  # noqa: E402

NEW_ENTRY = 'TOLERANCES = {\n    "brand_new_check": Tolerance(rtol=0.0, atol=0.0),\n'


@pytest.fixture
def committed(tmp_path):
    """The repository's records, evidence, lessons and programs as committed at ``conftest.COMMITTED``,
    committed once in a fresh git repository (whose history holds that one version of the table)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    source = clone_at(tmp_path / "source")
    root = tmp_path / "repo"
    for part in ("runs", "evidence", "lessons", "kernels", "cpp", "schema"):
        shutil.copytree(source / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True)
    git_commit_all(root, "as committed")
    return root


def _statuses(root):
    tree = Tree.load(root)
    return {(lid, r.row.program, r.row.check): r.outcome
            for lid in lessons.lesson_ids(root) for r in tree.decide(lessons.load(root, lid)).rows}


def _edit_table(root, old, new):
    table = root / "kernels" / "tolerances.py"
    text = table.read_text()
    assert old in text
    table.write_text(text.replace(old, new, 1))
    make_current(root)  # cpp/tolerances.h too, as compile would


def test_an_unrelated_new_entry_leaves_every_committed_row_as_it_was(committed):
    before = _statuses(committed)
    assert "passed" in before.values()
    _edit_table(committed, "TOLERANCES = {\n", NEW_ENTRY)
    assert _statuses(committed) == before


def test_a_changed_entry_stales_only_the_committed_rows_that_use_it(committed):
    before = _statuses(committed)
    _edit_table(committed, '"fused": Tolerance(rtol=1e-4, atol=1e-3)', '"fused": Tolerance(rtol=2e-4, atol=1e-3)')
    after = _statuses(committed)
    moved = {k for k in before if before[k] != after[k]}
    assert moved == {k for k in before if k[2] == "fused" and before[k] == "passed"}
    assert moved
    assert all(after[k] == "stale" for k in moved)


def test_without_history_a_version_1_record_stays_whole_file_dependent(committed):
    shutil.rmtree(committed / ".git")
    # Only the version-1 records (written before 2026-12-01, unsigned), in a tree that counts unsigned records.
    for path in (committed / "runs").glob("2026120*.json"):
        path.unlink()
    (committed / "lessons" / "runners.yaml").write_text("registry_version: 1\nrunners: []\n")
    before = _statuses(committed)
    assert "passed" in before.values()
    _edit_table(committed, "TOLERANCES = {\n", NEW_ENTRY)
    after = _statuses(committed)
    assert all(after[k] == "stale" for k in before if before[k] == "passed" and k[2] != "gate")
