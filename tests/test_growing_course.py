"""A growing course keeps its true lessons green, on the repository as committed at
``conftest.COMMITTED``: its signed H200 and CPU-build records and both lessons published from them.

- A new lesson, scaffolded the way an author does (``new-lesson`` with a Python and a C++ program) plus one
  more tolerance entry, committed or not, stales no other lesson's evidence: the spike note's REG/SHARED table
  rests on compile records that attest the tolerance header as a whole file, and only the entries its program
  names count (read back from git history).
- A newer passing run never makes a published lesson false: ``day79-cutile`` as published at e8c4ebf cites the
  H200 session of 10:41Z; the newer session of 14:22Z passed too. The lesson stays true (the audit re-derives it
  from the records it cites), status notes the newer evidence, and ``--republish`` writes it from the newest.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import COMMITTED, clone_at, git_commit_all

from tileproof import lesson_text
from tileproof.__main__ import main
from tileproof.authoring.generated import make_current
from tileproof.commands import audit as audit_command
from tileproof.gather import audit
from tileproof.judge.audit.result import AuditResult
from tileproof.records import lessons

E8C4EBF = "e8c4ebf359abb7a07915b120a7710561cf87ac63"
"""The commit at which day79-cutile was published from the H200 session 20261201T104112Z (republished since)."""
DAY79, SPIKE = "day79-cutile", "tile-reduction-spike"
EXTRA_ENTRY = '    "growth_other_check": Tolerance(rtol=0.0, atol=0.0),\n'


@pytest.fixture(scope="module")
def audited_clean(tmp_path_factory, committed_tree) -> Path:
    """The control, once for the module's tests: a checkout of the committed tree audits clean (every test's
    ``repo`` is another checkout of the same commit)."""
    control = clone_at(tmp_path_factory.mktemp("control") / "repo", COMMITTED, committed_tree)
    assert [str(f) for f in audit.audit(control).findings] == []
    return control


@pytest.fixture
def repo(tmp_path, committed_tree, audited_clean):
    return clone_at(tmp_path / "repo", COMMITTED, committed_tree)


def cli(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def footer(out: str, lesson_id: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"{lesson_id}: "))


def add_lesson(root) -> None:
    """What a new author does: scaffold a lesson with a Python and a C++ program (an entry each), add one
    more entry for a check of their own, and regenerate the header, as compile would."""
    assert main(["new-lesson", "growth-demo", "--python", "growth_kernel", "--cpp", "growth_cpp",
                 "--root", str(root)]) == 0
    table = root / "kernels" / "tolerances.py"
    text = table.read_text()
    table.write_text(text.replace("TOLERANCES = {\n", "TOLERANCES = {\n" + EXTRA_ENTRY, 1))
    make_current(root)


@pytest.mark.parametrize("committed", [False, True], ids=["uncommitted", "committed"])
@pytest.mark.slow(reason="the committed tree's real records audited before and after a new lesson (committed and not)")
def test_a_new_lesson_and_its_entries_stale_no_other_lesson(repo, capsys, monkeypatch, committed):
    # the control, that the committed tree audits clean before the lesson is added: fixture audited_clean
    add_lesson(repo)
    if committed:
        git_commit_all(repo, "a new lesson with its programs and three tolerance entries")
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True).stdout
    assert ("cpp/tolerances.h" in status) != committed
    assert ("lessons/growth-demo.md" in status) != committed

    audited: list[AuditResult] = []  # what the command's audit found (gather.audit.audit), for the asserts below
    monkeypatch.setattr(audit_command, "audit", lambda *a, **kw: audited.append(audit.audit(*a, **kw)) or audited[-1])
    code, out = cli(capsys, "audit", "--root", str(repo))
    result, = audited
    assert [str(f) for f in result.findings] == []
    assert result.history_checked
    assert code == 0
    assert "0 findings" in out
    code, out = cli(capsys, "status", "--root", str(repo))
    assert footer(out, SPIKE).endswith("; already published, its records hold"), out
    assert footer(out, DAY79).endswith("; already published, its records hold"), out
    for lesson_id in (SPIKE, DAY79):
        assert cli(capsys, "publish", lesson_id, "--dry-run", "--root", str(repo))[0] == 0
    spike = next(lesson for lesson in result.lessons if lesson.id == SPIKE)
    assert spike.decision.res_usage is not None
    assert spike.decision.res_usage.holds
    assert [str(c.release) for c in spike.decision.res_usage.columns] == ["13.3", "13.4", "13.5"]
    code, out = cli(capsys, "publish", "growth-demo", "--dry-run", "--root", str(repo))
    assert code == 1
    assert "stays draft" in out  # the new lesson waits for its GPU runs, and says so


@pytest.mark.slow(reason="the committed tree's real records and history audited with a newer run added")
def test_a_newer_passing_run_leaves_a_published_lesson_true(repo, capsys):
    published_then = subprocess.run(["git", "-C", str(repo), "show", f"{E8C4EBF}:lessons/{DAY79}.md"],
                                    capture_output=True, check=True).stdout
    path = repo / "lessons" / f"{DAY79}.md"
    now = path.read_bytes()
    path.write_bytes(published_then)
    cited = {r.run_id for r in lessons.load(repo, DAY79).front.results if r.run_id}
    assert cited
    assert all(i.startswith("20261201T1041") for i in cited)  # the earlier session's records

    assert [str(f) for f in audit.audit(repo).findings] == []
    code, out = cli(capsys, "status", DAY79, "--root", str(repo))
    assert footer(out, DAY79).endswith("; already published, its records hold; newer evidence: republish to "
                                       f"refresh (nox -s publish -- {DAY79} --republish)"), out
    code, out = cli(capsys, "publish", DAY79, "--dry-run", "--root", str(repo))
    assert code == 0, out
    assert "already published" in out, out
    assert "newer evidence" in out, out
    code, out = cli(capsys, "publish", DAY79, "--republish", "--dry-run", "--root", str(repo))
    assert code == 0
    assert "would republish from NVIDIA H200" in out
    assert path.read_bytes() == published_then
    code, out = cli(capsys, "publish", DAY79, "--republish", "--root", str(repo))
    # exactly what was republished from the newer session, and (since the release axis) the cuda-tile release
    # its Python programs' records were made with, after the results
    republished = lessons.load(repo, DAY79).front
    block = lesson_text.dump_key("cuda_tile_verified", lesson_text.front_values(republished)["cuda_tile_verified"])
    assert [(v.cuda_tile, v.tileiras_in_range) for v in republished.cuda_tile_verified] == [("1.7.0", True)]
    assert code == 0
    assert path.read_bytes().replace(block.encode(), b"", 1) == now
    code, out = cli(capsys, "status", DAY79, "--root", str(repo))
    assert footer(out, DAY79).endswith("; already published, its records hold"), out
