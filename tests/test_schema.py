from pathlib import Path

from tileproof.commands.schema import rendered, stale

REPO = Path(__file__).resolve().parents[1]


def test_committed_generated_files_match_their_sources():
    bad = stale(REPO)
    assert not bad, f"{', '.join(map(str, bad))} differ from their sources: run nox -s schema"


def test_every_record_kind_has_a_schema():
    names = {p.name for p in rendered(REPO)}
    for kind in ("compile", "session"):
        assert f"{kind}-record.v1.schema.json" in names
    assert "run-record.v2.schema.json" in names  # run records moved to version 2 (per-entry tolerances)
