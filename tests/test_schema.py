from pathlib import Path

from tileproof.commands.schema import rendered, stale

REPO = Path(__file__).resolve().parents[1]


def test_committed_generated_files_match_their_sources():
    bad = stale(REPO)
    assert not bad, f"{', '.join(map(str, bad))} differ from their sources: run nox -s schema"


def test_every_record_kind_has_a_schema():
    names = {p.name for p in rendered(REPO)}
    for kind in ("compile", "run", "session"):
        assert f"{kind}-record.v1.schema.json" in names


def test_every_schema_names_its_dialect_and_itself():
    import json

    from pydantic.json_schema import GenerateJsonSchema

    ids = set()
    for path in (p for p in rendered(REPO) if p.suffix == ".json"):
        committed = json.loads((REPO / path).read_text())
        assert committed["$schema"] == GenerateJsonSchema.schema_dialect, path
        assert committed["$id"].endswith(path.name) and committed["$id"].startswith("urn:tileproof:"), path
        ids.add(committed["$id"])
    assert len(ids) == len([p for p in rendered(REPO) if p.suffix == ".json"])
