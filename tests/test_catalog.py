"""catalog.Catalog, the catalog's one face: its index is open only inside ``with Catalog.open(...)`` (a nested block
shares the outer one's, closed when the outermost ends), and what a command reads through it is what it reads with
the index switched off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from audit_tree import synthetic_tree

from tileproof.catalog import Catalog
from tileproof.catalog import index as catalog_index
from tileproof.gather.tree import Tree
from tileproof.records.errors import TileproofError
from tileproof.records.trust import runner_keys


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "t"
    synthetic_tree(root, 20)
    return root


def open_here() -> list:
    """This process's open indexes."""
    return [index for (pid, _where), (_ino, index) in catalog_index._SHARED.items() if pid == os.getpid()]


def test_the_index_is_open_inside_the_block_and_closed_after(tree):
    registry = runner_keys.load_registry(tree)
    assert open_here() == []
    with Catalog.open(tree, registry) as outer:
        outer.facts()
        assert len(open_here()) == 1
        with Catalog.open(tree, registry) as inner:
            inner.facts()
        assert len(open_here()) == 1 and open_here()[0].db is not None  # the outer block's, still open
    assert open_here() == []


def test_the_block_closes_the_index_when_a_read_raises(tree):
    (tree / "runs" / "stray.txt").write_text("not a record")
    with pytest.raises(TileproofError, match="stray"), Catalog.open(tree, runner_keys.load_registry(tree)) as cat:
        cat.facts()
    assert open_here() == []


def test_a_loaded_tree_holds_no_index_open_and_judges_as_without_one(tree, monkeypatch):
    warm = Tree.load(tree)
    assert open_here() == []
    monkeypatch.setenv(catalog_index.ENV, "off")
    cold = Tree.load(tree)
    assert sorted(e.record.run_id for e in warm.records) == sorted(e.record.run_id for e in cold.records)
