"""``status``, ``publish --dry-run`` and ``audit`` give one answer.

Each case builds a FIXTURE tree (the day-79 tree of conftest.py with the real lessons as
drafts) and changes one thing. For every lesson in it, through the real CLI
(``tileproof.__main__.main``):

- ``status`` says "ready" exactly when ``publish --dry-run`` exits 0;
- both say the lesson's state (``judge.lesson_state``) in the same words, before and after it is
  published, and publish exits with that state's exit status;
- once the lesson is published (by ``publish`` when it may be, else flipped by hand, as a
  careless author would), the audit has a finding against the lesson's file exactly when
  it was not ready;
- no reason anywhere in the decision is empty, nor the finding's.
"""

from __future__ import annotations

from datetime import timedelta

import fixture_records as fx
import pytest
import yaml

from tileproof import lesson_text
from tileproof.__main__ import main
from tileproof.gather.tree import Tree
from tileproof.judge.lesson_state import LessonState
from tileproof.records import lessons, store
from tileproof.records.models import (
    CLAIMS_SCHEMA_VERSION,
    ClaimResult,
    ClaimsRecord,
    ProbeKind,
    RunRecord,
)

LESSON = "day79-cutile"
PROGRAM = "kernels/tile_matmul_softmax.py"


def newer_copy(root, program: str, n: int, **env_update) -> None:
    """A newer, sealed copy of the program's FIXTURE run record with its environment changed
    (what a rerun on another machine, or a forger who reseals, would write)."""
    old = next(r for r in store.of_kind(store.load_records(root), RunRecord) if r.program == program)
    env = old.environment
    if "gpu_cc" in env_update:
        cc = env_update.pop("gpu_cc")
        env_update["gpu"] = env.gpu.model_copy(update={"compute_capability": cc})
    created = old.created + timedelta(days=n)
    run_id = f"FIXTURE-{created.strftime('%Y%m%dT%H%M%SZ')}-run-{n:08x}"
    store.write_record(root, old.model_copy(update={
        "run_id": run_id, "created": created, "environment": env.model_copy(update=env_update)}))


def all_passing(root) -> None:
    pass


def stale_row(root) -> None:
    (root / "kernels" / "fused.py").write_text("# edited after the run\n")


def claim_refuted(root) -> None:
    claim_id = yaml.safe_load((root / "lessons" / "claims" / f"{LESSON}.claims.yaml").read_text())["claims"][0]["id"]
    created = fx.T0 + timedelta(days=30)
    run_id = f"FIXTURE-{created.strftime('%Y%m%dT%H%M%SZ')}-claims-0000000a"
    result = ClaimResult(id=claim_id, document=LESSON, statement="FIXTURE claim",
                         check=[ProbeKind(role="check", kind="compile")], verdict="refuted",
                         why="wrong: compiles (exit 0)", toolchain="tileiras 13.4.92", steps=[])
    store.write_record(root, ClaimsRecord(
        schema_version=CLAIMS_SCHEMA_VERSION, kind="claims", run_id=run_id, created=created, tileproof_version="0.1.0",
        git=fx.GitState(commit=fx.COMMIT, dirty=False),
        host=fx.HostFacts(system="fixture", release="fixture", machine="x86_64", python="3.11.7", cpu_count=16),
        toolchain=fx.toolchain(), gpu=None, claims_files=[], results=[result]))


def perf_claim_without_bench(root) -> None:
    path = root / "lessons" / f"{LESSON}.md"
    claim = dict(id="matmul-80", statement="tile matmul reaches >= 80% of cuBLAS at 4096³ on sm_90",
                 case="matmul/grouped/4096x4096x4096/*", metric="pct_of_reference", at_least=80,
                 compute_capability="9.0", program="kernels/bench/matmul_bench.py")
    perf = yaml.safe_dump({"performance": [claim]}, sort_keys=False, allow_unicode=True, width=4096)
    path.write_text(path.read_text().replace("\nhardware:\n", "\n" + perf + "hardware:\n", 1))


def mixed_toolchain(root) -> None:
    newer_copy(root, PROGRAM, 1, toolchain=fx.toolchain(tileiras="13.3.1"))


def forged_cc(root) -> None:
    newer_copy(root, PROGRAM, 2, gpu_cc="10.0")  # the nvidia-smi transcript still says 9.0


def shim_path(root) -> None:
    newer_copy(root, PROGRAM, 3, env={"PATH": "/tmp/shim/bin:/usr/bin"})  # where a fake nvidia-smi answers


def shim_path_explained(root) -> None:
    """The author explains it in the front matter, by hand (publish never writes it)."""
    shim_path(root)
    path = root / "lessons" / f"{LESSON}.md"
    entry = ("- signal: shim-path\n  subject: PATH=/tmp/shim/bin\n"
             "  explanation: the runner's CUDA 13 toolkit, unpacked there for each session by its owner\n")
    text = path.read_text()
    if "\nplausibility:\n" in text:  # the lesson explains signals of its own already: this one goes first
        path.write_text(text.replace("\nplausibility:\n", "\nplausibility:\n" + entry, 1))
    else:
        path.write_text(text.replace("\nstatus:", "\nplausibility:\n" + entry + "status:", 1))
    assert lessons.load(root, LESSON).front.plausibility[0].subject == "PATH=/tmp/shim/bin"


CASES = {
    "all-passing": (all_passing, {LESSON: True}),
    "one-stale-row": (stale_row, {LESSON: False}),
    "asserted-claim-refuted": (claim_refuted, {LESSON: False}),
    "perf-claim-without-bench-record": (perf_claim_without_bench, {LESSON: False}),
    "mixed-toolchain": (mixed_toolchain, {LESSON: False}),
    "forged-cc": (forged_cc, {LESSON: False}),
    "shim-path": (shim_path, {LESSON: False}),
    "shim-path-explained": (shim_path_explained, {LESSON: True}),
}
"""Case → (what it changes, lesson → whether it may be published); lessons not named: never."""


def both_say(root, lesson_id: str, capsys) -> tuple[str, int, str, str]:
    """``status LESSON``'s line for the lesson, and ``publish LESSON --dry-run``'s exit status, stdout and stderr, of
    the tree as it is now (a ``SystemExit`` from the command line is let through for :data:`LESSON`: its state is
    said, never an exit of the parser)."""
    capsys.readouterr()
    assert main(["status", lesson_id, "--root", str(root)]) == 0
    footer = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(f"{lesson_id}: "))
    try:
        code = main(["publish", lesson_id, "--dry-run", "--root", str(root)])
    except SystemExit as e:  # bad input exits 2 from the CLI
        if lesson_id == LESSON:
            raise
        code = e.code
    out, err = capsys.readouterr()
    return footer, code, out, err


def status_ready(footer: str, lesson_id: str) -> bool:
    return footer.endswith(f"; ready to publish: nox -s publish -- {lesson_id}")


def flip_to_published(root, lesson_id: str) -> None:
    """What a careless author does: status published, without the publish command."""
    lesson = lessons.load(root, lesson_id)
    lesson.path.write_text(lesson_text.render(lesson, lesson.front.model_copy(update={"status": "published"})))


def lesson_findings(root, lesson_id: str, capsys) -> list[str]:
    capsys.readouterr()
    main(["audit", "--root", str(root)])
    out = capsys.readouterr().out
    return [line for line in out.splitlines() if line.startswith(f"lessons/{lesson_id}.md: ")]


def no_empty_reason(tree: Tree, lesson: lessons.Lesson) -> None:
    decision = tree.decide(lesson)
    reasons = [r.reason for r in decision.rows] + [c.reason for c in decision.perf] \
        + [c.reason for c in decision.refuted]
    assert all(r.strip() for r in reasons), reasons
    assert all(b.reason.strip() for b in decision.blockers)
    assert decision.publishable == (not decision.blockers)


def says_one_state(tree: Tree, lesson: lessons.Lesson, said: tuple[str, int, str, str]) -> LessonState | None:
    """``status`` and ``publish --dry-run`` (``said``: :func:`both_say` of the tree ``tree`` was read from) say the
    lesson's one state in the same words, and publish exits with its exit status; returns the state (None: publish
    refused the lesson as bad input, before any state)."""
    state = tree.verdict(lesson).state
    footer, code, out, err = said
    assert f"; {state.message}" in footer, (state, footer)
    if code == 2 and state is not LessonState.INPUT_REFUSED:  # a program the lesson lists is missing
        assert "does not exist (fix: restore" in err, err
        return None
    assert code == state.exit_code, (state, code)
    first = out.splitlines()[0]
    if state is LessonState.READY:  # publish says what it would do
        assert first.startswith(f"{lesson.id}: would publish from "), first
    else:
        assert first.startswith(f"{lesson.id}: {state.message}"), (state, first)
    return state


@pytest.mark.parametrize("change, expected", CASES.values(), ids=CASES.keys())
def test_status_publish_and_audit_agree(tree, capsys, change, expected):
    change(tree)
    for lesson_id in lessons.lesson_ids(tree):
        may = expected.get(lesson_id, False)
        judged, lesson = Tree.load(tree), lessons.load(tree, lesson_id)
        no_empty_reason(judged, lesson)
        said = both_say(tree, lesson_id, capsys)
        ready, dry = status_ready(said[0], lesson_id), said[1]
        assert ready == (dry == 0) == may, (lesson_id, ready, dry)
        if lesson_id == LESSON:  # ready in some cases, not in others: both words, in both commands
            assert says_one_state(judged, lesson, said) is (LessonState.READY if may else LessonState.DRAFT)
        if may:
            assert main(["publish", lesson_id, "--root", str(tree)]) == 0
        else:
            flip_to_published(tree, lesson_id)
        if lesson_id == LESSON:
            said = both_say(tree, lesson_id, capsys)
            published = says_one_state(Tree.load(tree), lessons.load(tree, lesson_id), said)
            assert published is (LessonState.VALID if may else LessonState.WITHOUT_EVIDENCE), published
        found = lesson_findings(tree, lesson_id, capsys)
        assert bool(found) == (not may), found
        for line in found:
            assert "lesson-published-without-evidence" in line or "lesson-front" in line
            assert not line.rstrip().endswith("lacks"), line
            assert line.split("lacks ", 1)[-1].strip(), line
