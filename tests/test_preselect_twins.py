"""Each rule that picks records declares what it reads (``judge.selection.needs``), and ``judge.preselect`` keeps one
twin per need: the two lists are held to each other here, and each twin is shown to matter on the tamper suite's
trees (tests/test_tamper.py, ``AGREEMENT``): with it dropped, the suite's oracle (conftest's
``chosen_records_judge_alike``, which compares every tree ``Tree.load`` gives, and every choice ``Tree.choose`` makes,
with the tree of every record) fails on at least one of them. Each tree is read once; the choices with a twin dropped
are made from it by ``Tree.choose``, which chooses exactly as ``Tree.load`` does (held in the first test). A rule
that starts reading other records without its twin changing fails that oracle on the suite's trees; a twin no rule
needs, or a need without a twin, fails here."""

from __future__ import annotations

import shutil
from datetime import timedelta

import audit_tree
import pytest
import test_tamper

from tileproof.gather.tree import Tree
from tileproof.judge import gate, perf_claims, plausibility, preselect, release_matrix, res_usage  # noqa: F401
from tileproof.judge.selection import Need, declared
from tileproof.records import store

signed_template = test_tamper.signed_template


def test_every_need_a_rule_declares_has_one_twin_and_every_twin_a_rule():
    rules = declared()
    assert set(rules) == set(Need), f"needs no rule declares: {set(Need) - set(rules)}"
    assert set(preselect.TWINS) == set(Need), f"needs without a twin: {set(Need) - set(preselect.TWINS)}"
    assert all(rules[need] for need in Need)


def c_republished_then_a_newer_failure_and_pass(root, info):
    """vector-add republished from a newer run (cited: neither the oldest nor, after it, the newest), then a newer
    failing run and a newer passing one: the cited record and the failure between it and the newest decide."""
    from tileproof.commands.publish import publish

    test_tamper.newer_vector_add_run(root)
    test_tamper.commit(root, "a newer passing session")
    code, lines = publish(root, test_tamper.VECTOR_ADD, republish=True)
    assert code == 0, lines
    test_tamper.newer_vector_add_run(root, passed=False, later=1)
    test_tamper.newer_vector_add_run(root, later=2)
    test_tamper.commit(root, "republished; a newer failing session, then a passing one")


SECOND = test_tamper.new_signer()
"""A second H200 runner's key, registered beside the first from the start (:func:`two_runners`)."""


def two_runners(root):
    """The tamper suite's signed tree, its records signed by the first runner, with both runners registered."""
    from signing_keys import entry, registry_of, write_registry

    info = audit_tree.clean_tree(root)
    test_tamper.git(root, "init", "-q")
    test_tamper.commit(root, "sources", "kernels")
    head = test_tamper.head_of(root)
    for path in store.record_files(root):
        rec = store.load_record(path)
        path.unlink()
        store.write_record(root, test_tamper.at_head(root, rec, head), test_tamper.RUNNER)
    registry = registry_of(entry(test_tamper.RUNNER, owner="lead on the H200 runner"),
                           entry(SECOND, owner="a second H200 runner"))
    write_registry(root, registry.model_copy(update={"policy": "signed-only"}))
    test_tamper.commit(root, "signed records, two runners")
    return info


def c_shim_settled_by_a_second_key(root, info):
    """The second runner on a board of its own: an earlier run (its first), then a passing softmax run that agrees;
    then the first runner's newer softmax run with a shim first on its PATH, settled only by that agreeing run."""
    second = SECOND
    early = test_tamper.LATER - timedelta(hours=1)
    test_tamper.fake_h200_softmax(root, second, when=early, board="H200-second", passed=False)
    test_tamper.commit(root, "the second runner's first session")
    test_tamper.fake_h200_softmax(root, second, when=early + timedelta(minutes=10), board="H200-second")
    test_tamper.commit(root, "the second runner's passing session")
    test_tamper.fake_h200_softmax(root, test_tamper.RUNNER, env=test_tamper.SHIM)
    test_tamper.commit(root, "an H200 run of softmax, /tmp/shim first on its PATH")


CASES = {**{name: case for name, (case, _ready) in test_tamper.AGREEMENT.items()},
         "republished-then-a-newer-failure-and-pass": c_republished_then_a_newer_failure_and_pass}
"""The tamper suite's cases, and one that needs a twin the others keep by another rule too; with
``shim-settled-by-a-second-key`` (on :func:`two_runners`'s tree), the trees :func:`tamper_trees` makes."""


@pytest.fixture(scope="module")
def tamper_trees(signed_template, tmp_path_factory):
    """Each case of :data:`CASES` applied to a copy of the signed tree."""
    template, info = signed_template
    out = []
    for name, case in CASES.items():
        root = tmp_path_factory.mktemp("case") / "repo"
        shutil.copytree(template, root, symlinks=True)
        case(root, info)
        out.append((name, root))
    root = tmp_path_factory.mktemp("case") / "repo"
    root.mkdir()
    c_shim_settled_by_a_second_key(root, two_runners(root))
    out.append(("shim-settled-by-a-second-key", root))
    return out


@pytest.fixture(scope="module")
def every_record_trees(tamper_trees):
    """The tree of every record of each of :func:`tamper_trees` (``Tree.load(root, every=True)``), read once: each
    choice below is made from it (``Tree.choose``, the choice ``Tree.load`` makes, over records already read)."""
    return [(name, Tree.load(root, every=True)) for name, root in tamper_trees]


def _dropped(monkeypatch, need: Need) -> None:
    if need is Need.AGREEING:
        monkeypatch.setattr(preselect, "agreeing", lambda flagged, items: set())
    else:
        monkeypatch.setitem(preselect.CHOOSERS, need, lambda items, fronts: set())


def _diverging(trees) -> list[str]:
    """The cases whose chosen tree the oracle (conftest's ``chosen_records_judge_alike``, on ``Tree.choose``) finds
    judging otherwise than the tree of every record."""
    found = []
    for name, every in trees:
        try:
            every.choose()
        except AssertionError:
            found.append(name)
    return found


@pytest.mark.slow(reason="reads each of the 23 tamper trees as the commands do (Tree.load: git history, every record "
                        "file, the oracle's tree of every record): what ties every twin test's Tree.choose to them")
def test_with_every_twin_the_tamper_suite_judges_alike(tamper_trees, every_record_trees):
    """Each tree as the commands read it (``Tree.load``, the oracle comparing it with the tree of every record)
    judges alike, and holds exactly the records ``Tree.choose`` picks from the tree of every record: the choice the
    tests below make with a twin dropped is the one the commands make."""
    diverging = []
    for (name, root), (_name, every) in zip(tamper_trees, every_record_trees, strict=True):
        try:
            loaded = Tree.load(root)
        except AssertionError:
            diverging.append(name)
            continue
        assert loaded.records == every.choose().records, f"{name}: Tree.load and Tree.choose choose otherwise"
    assert diverging == []
    assert _diverging(every_record_trees) == []


@pytest.mark.parametrize("need", list(Need), ids=[n.value for n in Need])
def test_dropping_a_twin_changes_a_verdict_on_the_tamper_suite(every_record_trees, monkeypatch, need):
    _dropped(monkeypatch, need)
    assert _diverging(every_record_trees), f"{need.value}: no tamper case tells its twin is needed"
