"""judge.preselect: which records the verdicts can depend on, chosen from their facts.

The proof obligation (a verdict over the chosen records is the verdict over all of them) is checked for every tree
the suite loads by conftest's ``chosen_records_judge_alike``; here: the rules one by one on hand-made facts, the
facts' round trip through the index, and that choosing really leaves records out of a large tree.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from audit_tree import synthetic_tree

from tileproof.catalog import records as indexed
from tileproof.gather import tree as tree_module
from tileproof.judge import preselect
from tileproof.judge.releases import ReleaseKey
from tileproof.records import lessons, store
from tileproof.records.store import Examined
from tileproof.records.trust.runner_keys import UNSIGNED, RunnerRegistry, Verification

REPO = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
PROGRAM = "kernels/p.py"


def item(n: int, program: str = PROGRAM, cc: str | None = "9.0", release: str | None = "1.7.0",
         seal: str = "intact", verification: Verification = UNSIGNED, uuid: str | None = None,
         kind: str = "run", verdict: str = "passed") -> Examined:
    facts = preselect.Facts(kind=kind, run_id=f"r{n:02d}", created=T0 + timedelta(minutes=n), program=program,
                            gpu_uuid=(uuid or f"GPU-{cc}") if cc else None, gpu_cc=cc,
                            release=ReleaseKey(release, True) if release else None, verdict=verdict,
                            program_digest="d")
    return Examined(facts, seal, verification)


def front(*run_ids: str | None, programs: tuple[str, ...] = (PROGRAM,)):
    """A real lesson's front matter (day79-cutile), its rows pointed at ``programs`` and citing ``run_ids``."""
    real = lessons.load(REPO, "day79-cutile").front
    rows = [real.results[0].model_copy(update={"program": p, "run_id": r, "optional": False})
            for p, r in zip(programs, run_ids, strict=True)]
    return real.model_copy(update={"results": rows, "cuda_tile_verified": []})


def test_facts_round_trip_through_json():
    path = next(p for p in store.record_files(REPO) if "-run-" in p.name)
    facts = preselect.facts_of(store.load_record(path))
    assert facts.program and facts.gpu_cc and facts.release is not None
    row = json.loads(json.dumps(facts.to_row()))
    assert preselect.Facts.from_row(row) == facts
    assert len(row) == len(dataclasses.fields(preselect.Facts))  # one value per field: none left out
    for other in (facts.to_row()[:-1], dict(enumerate(row)), "x" * 9):
        with pytest.raises((TypeError, ValueError, IndexError)):
            preselect.Facts.from_row(other)


def test_newest_of_each_group_and_every_record_that_does_not_count():
    items = [item(0, program="kernels/other.py"), item(1), item(2), item(3, cc="7.5"), item(4, cc=None),
             item(5, release="1.6.0"), item(6, seal="broken"), item(7, release="1.6.0", seal="broken"),
             item(8, program="kernels/other.py")]
    got = preselect.needed(items, [front(None)])
    # r02: newest >= 8.0 on 1.7.0; r03 below 8.0; r04 no GPU; r05 the 1.6.0 axis; r06/r07 do not count (named);
    # r00: the first GPU record (of the unsigned records' runner and of its GPU)
    assert preselect.baselines(items) == {"r00", "r03"}
    assert got == {"r00", "r02", "r03", "r04", "r05", "r06", "r07"}  # not r01 (older in its group), nor r08


def test_past_an_unverified_newest_the_group_is_kept_to_the_first_that_is_not():
    """An unverified check decides no row (gate.decide_row looks past it): the records it may look at stay."""
    items = [item(1), item(2, verdict="failed"), item(3), item(4, verdict="unverified"), item(5, verdict="unverified")]
    got = preselect.needed(items, [front(None)])
    assert got == {"r03", "r04", "r05"} | preselect.baselines(items)


def test_a_published_row_keeps_its_cited_record_and_every_newer_one():
    items = [item(n) for n in range(1, 7)]
    got = preselect.needed(items, [front("r03")])
    assert got == {"r03", "r04", "r05", "r06"} | preselect.baselines(items)


def test_baselines_are_each_runner_and_each_gpu_first():
    a, b = Verification("verified", "key-a", ""), Verification("verified", "key-b", "")
    items = [item(3, verification=a, uuid="GPU-1"), item(1, verification=a, uuid="GPU-2"),
             item(2, verification=b, uuid="GPU-1"), item(4, verification=b, uuid="GPU-3"), item(5, cc=None)]
    assert preselect.baselines(items) == {"r01", "r02", "r04"}  # a's first, b's first (GPU-1's), GPU-3's only


def test_choosing_leaves_most_of_a_large_tree_out(tmp_path):
    root = tmp_path / "t"
    synthetic_tree(root, 300)
    chosen, every = tree_module.Tree.load(root), tree_module.Tree.load(root, every=True)
    assert len(chosen.records) < len(every.records) // 4, (len(chosen.records), len(every.records))


@pytest.mark.parametrize("value", [{"facts": 1}, {}, {"plain": True, "seal": "intact"},
                                   {"facts": {"kind": "run"}, "seal": "intact", "trust": "unsigned", "keyid": None,
                                    "reason": ""}])
def test_an_index_entry_this_code_cannot_use_reads_the_record_in_full(value):
    assert indexed._from_fact(value, RunnerRegistry(registry_version=1, runners=[])) is None


def status_text(root: Path, tree) -> list[str]:
    """Every line ``tileproof status`` prints from a tree: the table, the release axis, the bench, claims and
    claims-matrix sections."""
    from tileproof.claims import matrix
    from tileproof.claims import status as claims
    from tileproof.commands import status as status_command
    from tileproof.report import bench_view

    return [*status_command.status(root, [], tree), *bench_view.status_lines(tree.records),
            *claims.status_lines(root, None, tree.records), *matrix.status_lines(root, None, tree.records)]


@pytest.mark.parametrize("which", ["committed", "synthetic"])
def test_status_prints_the_same_from_the_chosen_records(which, committed_tree, tmp_path):
    """The repository as committed (published lessons citing records, signed records, a perf note, claims) and a
    generated fleet tree: every line status prints is the same from the chosen records as from all of them."""
    if which == "committed":
        root = committed_tree
    else:
        root = tmp_path / "t"
        synthetic_tree(root, 300)
    chosen, every = tree_module.Tree.load(root), tree_module.Tree.load(root, every=True)
    assert len(chosen.records) < len(every.records)
    assert status_text(root, chosen) == status_text(root, every)
