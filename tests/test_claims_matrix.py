"""The claims matrix: claims records grouped by toolchain release, each claim's verdict per
release and in words, the status table, and the nox session's per-release requirements.

The verdicts and reasons below are the ones the claims matrix gave for nvcc 13.3.73,
13.4.92 and 13.5.37 on this project's claims (warning #20359-D is printed by 13.3 and 13.4,
#20360-D by 13.5; the spike's tile_max_native uses 24 registers with 13.3, 16 since 13.4).
"""

from __future__ import annotations

import textwrap
from datetime import datetime, timezone
from pathlib import Path

import conftest
import pytest

from tileproof.claims import matrix
from tileproof.claims.matrix import Release, claim_matrix, holds_text
from tileproof.records.models import (
    CLAIMS_SCHEMA_VERSION,
    ClaimResult,
    ClaimsRecord,
    GitState,
    HostFacts,
    ProbeKind,
    Toolchain,
)
from tileproof.records.store import write_record

REPO = Path(__file__).resolve().parents[1]
HOST = HostFacts(system="Linux", release="6", machine="x86_64", python="3.11", cpu_count=2)


def _result(claim: str, verdict: str, why: str, document: str = "day79-cutile") -> ClaimResult:
    return ClaimResult(id=claim, document=document, statement=f"{claim} holds.", verdict=verdict, why=why,
                       check=[ProbeKind(role="check", kind="compile")], toolchain=None, steps=[])


def _record(release: str | None, results: list[ClaimResult], when: str, tag: str = "0",
            cuda_tile: str = "1.7.0") -> ClaimsRecord:
    chain = Toolchain(version=1, source="pip", tools=[], packages={"cuda-tile": cuda_tile}, major_minor=release,
                      coherent=release is not None, problems=[] if release else ["nvvm 13.5 beside nvcc 13.4"])
    return ClaimsRecord(schema_version=CLAIMS_SCHEMA_VERSION, kind="claims", run_id=f"{when}-claims-{tag * 8}",
                        created=datetime(2026, 12, 1, tzinfo=timezone.utc), tileproof_version="0",
                        git=GitState(commit=None, dirty=False), host=HOST, toolchain=chain, gpu=None,
                        claims_files=[], results=results)


WARNING_13_3 = "fails (exit 2): cuda_tile.h(172): warning #20359-D: parsing for Tile constructs is not enabled."
WARNING_13_5 = ("fails, but not with /warning #20359-D: parsing for Tile constructs is not enabled/: "
                "cuda_tile.h(2259): error: calling a __tile__ function")


def _three_releases() -> list[ClaimsRecord]:
    return [
        _record("13.4", [_result("warning-20359-d", "confirmed", "fails (exit 2): warning #20359-D"),
                         _result("launch-block-size-1", "confirmed", "observed")], "20261129T122814Z", "a"),
        _record("13.3", [_result("warning-20359-d", "confirmed", WARNING_13_3),
                         _result("launch-block-size-1", "unverifiable-here", "needs a GPU")], "20261201T080644Z", "b"),
        _record("13.5", [_result("warning-20359-d", "refuted", WARNING_13_5),
                         _result("launch-block-size-1", "unverifiable-here", "needs a GPU")], "20261201T080446Z", "c"),
    ]


def test_a_release_is_major_minor_and_sorts_as_numbers():
    assert Release.parse("13.4.92") == Release(13, 4)
    assert str(Release.parse("13.10")) == "13.10"
    assert sorted([Release.parse("13.10"), Release.parse("13.5"), Release.parse("12.9")]) == [
        Release(12, 9), Release(13, 5), Release(13, 10)]
    with pytest.raises(ValueError, match="expected MAJOR.MINOR"):
        Release.parse("13")


def test_the_release_of_a_toolchain_is_the_one_its_pieces_share():
    assert matrix.release_of(_record("13.5", [], "20261201T080446Z").toolchain) == Release(13, 5)
    assert matrix.release_of(_record(None, [], "20261201T080446Z").toolchain) is None


def test_records_group_by_release_and_a_mixed_toolchain_is_kept_apart():
    records = [*_three_releases(), _record(None, [_result("warning-20359-d", "refuted", "x")], "20261201T090000Z", "d")]
    groups, mixed = matrix.by_release(records)
    assert list(groups) == [Release(13, 3), Release(13, 4), Release(13, 5)]
    assert [r.run_id for r in mixed] == ["20261201T090000Z-claims-dddddddd"]
    m = claim_matrix(records)
    assert m.unattributed == ["20261201T090000Z-claims-dddddddd"]
    assert m.cell("day79-cutile", "warning-20359-d", Release(13, 5)).verdict == "refuted"


def test_each_release_has_its_own_verdict_and_the_claim_says_since_when():
    m = claim_matrix(_three_releases())
    assert [m.cell("day79-cutile", "warning-20359-d", r).verdict for r in m.releases] == \
        ["confirmed", "confirmed", "refuted"]
    assert m.cell("day79-cutile", "warning-20359-d", Release(13, 3)).run_id == "20261201T080644Z-claims-bbbbbbbb"
    assert m.holds("day79-cutile", "warning-20359-d") == "confirmed on 13.3-13.4; refuted since 13.5"
    assert m.holds("day79-cutile", "launch-block-size-1") == "confirmed on 13.4; unverifiable-here on 13.3, 13.5"
    assert m.holds("day79-cutile", "never-checked") == "unchecked"
    assert m.cell("day79-cutile", "warning-20359-d", Release(13, 6)) is None


def test_within_a_release_a_newer_unverifiable_does_not_hide_an_older_decision():
    records = [_record("13.4", [_result("p10", "refuted", "a grid of 65536 runs")], "20261129T123104Z", "a"),
               _record("13.4", [_result("p10", "unverifiable-here", "needs a GPU")], "20261201T080000Z", "b")]
    cell = claim_matrix(records).cell("day79-cutile", "p10", Release(13, 4))
    assert (cell.verdict, cell.run_id) == ("refuted", "20261129T123104Z-claims-aaaaaaaa")
    records.append(_record("13.4", [_result("p10", "confirmed", "refused")], "20261201T090000Z", "c"))
    assert claim_matrix(records).cell("day79-cutile", "p10", Release(13, 4)).verdict == "confirmed"


def test_a_column_with_records_of_two_cuda_tile_versions_says_so():
    # cuda-tile 1.5.0 words the math.ceil error differently from 1.6.0 and 1.7.0 (same nvcc 13.4.92)
    records = [_record("13.4", [_result("p04-math-ceil", "refuted", "wrong: fails, but not with /ceil/")],
                       "20261201T081929Z", "a", cuda_tile="1.5.0"),
               _record("13.4", [_result("p04-math-ceil", "confirmed", "wrong: fails (exit 1)")],
                       "20261201T082020Z", "b")]
    m = claim_matrix(records)
    assert m.cuda_tile == {Release(13, 4): ["1.5.0", "1.7.0"]}
    assert matrix.lines(m, [("day79-cutile", "p04-math-ceil")])[-1].startswith(
        "13.4: records of cuda-tile 1.5.0, 1.7.0 share this column")
    assert not any("share this column" in ln for ln in matrix.lines(claim_matrix(_three_releases()), []))


def _cells(*verdicts: str | None) -> tuple[dict, list[Release]]:
    releases = [Release(13, n) for n in range(3, 3 + len(verdicts))]
    row = {r: matrix.Cell(_result("c", v, "-"), "run")
           for r, v in zip(releases, verdicts, strict=True) if v is not None}
    return row, releases


@pytest.mark.parametrize("verdicts, words", [
    (("confirmed", "confirmed", "confirmed"), "confirmed on 13.3-13.5"),
    (("confirmed", "refuted", "refuted"), "confirmed on 13.3; refuted since 13.4"),
    (("confirmed", "refuted", "confirmed"), "confirmed on 13.3; refuted on 13.4; confirmed since 13.5"),
    (("refuted", "confirmed", None), "refuted on 13.3; confirmed on 13.4"),
    (("confirmed", None, "confirmed"), "confirmed on 13.3; confirmed since 13.5"),
    ((None, "refuted", None), "refuted on 13.4"),
    (("unverifiable-here", "error", "unverifiable-here"), "unverifiable-here on 13.3, 13.5; error on 13.4"),
    ((None, None, None), "unchecked"),
])
def test_holds_in_words(verdicts, words):
    assert holds_text(*_cells(*verdicts)) == words


def test_the_table_has_a_column_per_release_and_keeps_claims_no_file_lists():
    m = claim_matrix(_three_releases())
    lines = matrix.lines(m, [("day79-cutile", "warning-20359-d"), ("day79-cutile", "unchecked-one")])
    assert lines[0].split() == ["DOCUMENT", "CLAIM", "13.3", "13.4", "13.5", "HOLDS"]
    assert lines[1].split()[:5] == ["day79-cutile", "warning-20359-d", "confirmed", "confirmed", "REFUTED"]
    assert lines[1].endswith("confirmed on 13.3-13.4; refuted since 13.5")
    assert lines[2].split() == ["day79-cutile", "unchecked-one", "-", "-", "-", "unchecked"]
    assert lines[3].split()[:2] == ["day79-cutile", "launch-block-size-1"]
    assert "(no longer in its claims file)" in lines[3]
    assert matrix.lines(claim_matrix([]), [("d", "c")]) == []


def test_status_lines_read_the_tree(tmp_path):
    folder = tmp_path / "lessons" / "claims"
    folder.mkdir(parents=True)
    (tmp_path / "lessons" / "day79-cutile.md").write_text("A doc.\n")
    (folder / "day79-cutile.claims.yaml").write_text(textwrap.dedent("""\
        claims_version: 1
        document: day79-cutile
        path: lessons/day79-cutile.md
        claims:
        - id: warning-20359-d
          statement: The warning is 20359-D.
          source: {section: Pitfalls}
          check: {kind: not-checkable, reason: an example}
        """))
    assert matrix.status_lines(tmp_path) == []
    for record in _three_releases():
        write_record(tmp_path, record)
    lines = matrix.status_lines(tmp_path)
    assert lines[1].split()[:2] == ["day79-cutile", "warning-20359-d"]
    assert lines[1].endswith("refuted since 13.5")
    assert "launch-block-size-1" in lines[2]


def _noxfile():
    return conftest.noxfile()


def test_the_matrix_session_pins_every_toolchain_package_of_one_release(monkeypatch):
    nox_file = _noxfile()
    monkeypatch.chdir(REPO)
    reqs = nox_file.release_requirements("13.3")
    assert sorted(r for r in reqs if r.endswith("==13.3.*")) == sorted(
        f"{p}==13.3.*" for p in ("nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-cuda-cuobjdump",
                                 "nvidia-cuda-tileiras", "nvidia-nvvm", "nvidia-cuda-runtime", "nvidia-nvjitlink"))
    assert not any("13.4" in r for r in reqs), "no pin of the project's default release is left"
    assert "cuda-tile>=1.5" in reqs, "cuda-tile without its tileiras extra"
    assert not any("[" in r for r in reqs), "cuda-tile without its tileiras extra"
    assert {"13.3", "13.4", "13.5"} <= set(nox_file.sessions.course.load(REPO).toolchain_releases)
