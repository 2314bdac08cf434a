import json
from datetime import datetime, timezone

import pytest

from tileproof.records import store
from tileproof.records.errors import RecordError, TileproofError
from tileproof.records.models import GitState, HostFacts, SessionRecord


def session(run_id="20261129T000000Z-session-00000000"):
    return SessionRecord(
        schema_version=1, kind="session", run_id=run_id, created=datetime(2026, 11, 29, tzinfo=timezone.utc),
        tileproof_version="0.1.0", git=GitState(commit=None, dirty=True),
        host=HostFacts(system="Linux", release="6", machine="x86_64", python="3.11", cpu_count=2),
        session_id=run_id, runs=[], verdict_counts={},
    )


def test_run_id_shape():
    rid = store.new_run_id("run", datetime(2026, 11, 29, 1, 2, 3, tzinfo=timezone.utc))
    assert rid.startswith("20261129T010203Z-run-")
    assert len(rid.split("-")[-1]) == 8


def test_write_once_then_refuse(tmp_path):
    path = store.write_record(tmp_path, session())
    loaded = store.load_record(path)
    assert loaded.seal
    assert loaded.seal == store.seal_of(loaded)
    with pytest.raises(TileproofError, match="never overwritten"):
        store.write_record(tmp_path, session())
    assert store.load_record(path) == loaded
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [path.name]  # no temp files left


def test_evidence_reference(tmp_path):
    t = store.write_evidence(tmp_path, "r1", "x.txt", "hello\n")
    assert t.path == "evidence/r1/x.txt"
    assert t.bytes == 6
    assert t.sha256 == store.sha256_file(tmp_path / t.path)


@pytest.mark.parametrize(
    "content, field",
    [
        ("{not json", "line 1"),
        (json.dumps({"schema_version": 9}), "schema_version"),
        (json.dumps({"schema_version": 1, "kind": "session"}), "session"),
    ],
    ids=["malformed", "future-version", "missing-fields"],
)
def test_bad_record_is_one_line(tmp_path, content, field):
    p = tmp_path / "r.json"
    p.write_text(content)
    with pytest.raises(RecordError) as e:
        store.load_record(p)
    msg = str(e.value)
    assert "\n" not in msg
    assert str(p) in msg
    assert field in msg
    assert "fix:" in msg


def test_future_version_names_both_versions(tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"schema_version": 2}))
    with pytest.raises(RecordError, match="has version 2; this tileproof reads 1"):
        store.load_record(p)


def test_a_field_added_later_keeps_old_seals(tmp_path):
    """A committed bench record written before BenchCase had ``tiles_per_sm`` and
    ``resources`` still reads as sealed; deleting a field it was written with does not."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    old = repo / "runs" / "20261129T121531Z-bench-2397a91b.json"
    raw = json.loads(old.read_text())
    assert "resources" not in raw["cases"][0], "the fixture is a record from before the new fields"
    rec = store.load_record(old)
    assert store.seal_of(rec) == rec.seal
    del raw["cases"][0]["key"]  # a field with a default, present when it was written
    edited = tmp_path / old.name
    edited.write_text(json.dumps(raw))
    assert store.seal_of(store.load_record(edited)) != rec.seal


def test_an_environment_captured_before_slurm_jobs_reads_as_version_1_and_names_none():
    """A committed, signed H200 run record (its environment has no ``environment_version``) reads as version 1,
    sealed as written; a version-1 environment naming a Slurm job is refused, a version-2 one holds it."""
    import base64
    from pathlib import Path

    from pydantic import ValidationError

    from tileproof.records.models import Environment

    old = Path(__file__).resolve().parents[1] / "runs" / "20261201T142252Z-run-3f340aa3.json"
    rec = store.load_record(old)
    payload = json.loads(base64.b64decode(json.loads(old.read_text())["payload"]))  # the signed statement
    assert "environment_version" not in payload["predicate"]["environment"], "the fixture predates the field"
    assert (rec.environment.environment_version, rec.environment.slurm) == (1, None)
    assert store.seal_status(rec) == "intact"
    job = {"job_id": "12", "array_job_id": "11", "array_task_id": 0, "cluster": "c", "node": "n", "job_gpus": [0],
           "step_gpus": None, "cuda_visible_devices": "0"}
    with pytest.raises(ValidationError, match="before environment_version 2 name no Slurm job"):
        Environment.model_validate({**rec.environment.model_dump(), "slurm": job})
    origin = {"kind": "distribution", "version": "0.1.0", "commit": None, "sources_sha256": "1" * 64}
    newer = Environment.model_validate({**rec.environment.model_dump(), "environment_version": 2, "slurm": job,
                                        "tileproof": origin})
    assert newer.slurm.array_job_id == "11"
    assert newer.slurm.job_gpus == [0]


def test_an_environment_before_version_3_names_no_bus_id_and_no_topology():
    """The committed H200 record (version 1) reads with neither; a version-2 environment claiming either is refused,
    a version-3 one holds both."""
    from pathlib import Path

    from pydantic import ValidationError

    from tileproof.records.models import Environment

    rec = store.load_record(Path(__file__).resolve().parents[1] / "runs" / "20261201T142252Z-run-3f340aa3.json")
    assert rec.environment.nvidia_smi_topo is None
    assert rec.environment.gpu.pci_bus_id is None
    origin = {"kind": "distribution", "version": "0.1.0", "commit": None, "sources_sha256": "1" * 64}
    base = {**rec.environment.model_dump(), "tileproof": origin}
    topo = {"path": "evidence/s/nvidia-smi-topo.txt", "sha256": "2" * 64, "bytes": 10}
    bus = {**base["gpu"], "pci_bus_id": "00000000:00:06.0"}
    for claim in ({"nvidia_smi_topo": topo}, {"gpu": bus}):
        with pytest.raises(ValidationError, match="before environment_version 3 name no PCI bus id"):
            Environment.model_validate({**base, "environment_version": 2, **claim})
    newer = Environment.model_validate({**base, "environment_version": 3, "nvidia_smi_topo": topo, "gpu": bus})
    assert (newer.gpu.pci_bus_id, newer.nvidia_smi_topo.path) == ("00000000:00:06.0", topo["path"])


def test_records_and_transcripts_are_readable_by_everyone(tmp_path):
    """0644, not tempfile's 0600: a checkout's records are readable by the other users of the machine."""
    record = store.write_record(tmp_path, session())
    transcript = store.write_evidence(tmp_path, "r1", "stdout.txt", "hello\n")
    for path in (record, tmp_path / transcript.path):
        assert path.stat().st_mode & 0o777 == 0o644, oct(path.stat().st_mode)


def test_a_record_written_before_its_version_counters_reads_in_the_current_fields_as_written():
    """A committed run record and a committed compile record that name no run_version / compile_version (nor
    environment_version, bench's...): read back, each counter is 1 and the judges' properties say what that
    means (the tolerance table attested whole); the counters stay out of what the record dumps, so the seal
    still covers exactly the bytes written."""
    from pathlib import Path

    from tileproof.records.models import CompileRecord, RunRecord

    runs = Path(__file__).resolve().parents[1] / "runs"
    run = runs / "20261129T122955Z-run-78254821.json"
    compiled = next(p for p in sorted(runs.glob("*-compile-*.json")) if '"compile_version"' not in p.read_text()
                    and '"payload"' not in p.read_text())
    for path, kind, field in ((run, RunRecord, "run_version"), (compiled, CompileRecord, "compile_version")):
        raw = json.loads(path.read_text())
        assert field not in raw, f"{path.name}: the fixture predates {field}"
        rec = store.load_record(path)
        assert isinstance(rec, kind)
        assert getattr(rec, field) == 1
        assert rec.attests_table_whole
        assert field not in rec.model_dump(exclude_unset=True)
        assert store.seal_status(rec) == "intact"
        assert store.seal_of(rec) == store.seal_of_json(raw)
        assert store.record_of_json(path.read_bytes()) == rec  # the audit's fast path reads it the same
    assert store.load_record(run).environment.environment_version == 1
    assert not store.load_record(run).names_release


def test_a_writer_that_names_no_version_writes_the_current_one(tmp_path):
    """Models built in code (a writer) take the version written now; only a file read back without the
    counter reads as 1 (``models.AS_READ``)."""
    from tileproof.records.models import AS_READ, STEP_VERSION, TOOLCHAIN_VERSION, Step, Toolchain

    t = {"path": "evidence/r/a.txt", "sha256": "0" * 64, "bytes": 0}
    fields = dict(name="echo", argv=["echo"], started=datetime(2026, 1, 1, tzinfo=timezone.utc),
                  ended=datetime(2026, 1, 1, tzinfo=timezone.utc), duration_s=0.0, exit_code=0, stdout=t, stderr=t)
    step = Step(**fields, containment="pid-namespace", isolation="separate-user")
    assert step.step_version == STEP_VERSION == 3
    assert json.loads(step.model_dump_json())["step_version"] == STEP_VERSION
    chain = Toolchain(source="pip", tools=[], packages={}, major_minor=None, coherent=False, problems=[])
    assert chain.version == TOOLCHAIN_VERSION
    assert Step.model_validate(fields, context=AS_READ).step_version == 1
    assert Step.model_validate({**fields, "step_version": 2, "containment": "cgroup"},
                               context=AS_READ).step_version == 2  # a counter the file names is read as named


def test_only_an_error_that_keeps_nothing_removes_what_the_session_wrote(tmp_path):
    """``store.whole``: a full disk (``DiskFull``, a ``NotKept``) removes the session's records and
    evidence folders, and only those; any other error (an interruption) leaves what was written."""
    from signing_keys import real_run

    from tileproof.records.errors import DiskFull, NotKept

    earlier = store.write_evidence(tmp_path, "20261101T000000Z-run-00000000", "kept.txt", "from before\n")
    with pytest.raises(TileproofError, match="interrupted"), store.whole(tmp_path):
        store.write_evidence(tmp_path, "20261101T000000Z-run-00000001", "a.txt", "x\n")
        raise TileproofError("interrupted")
    assert (tmp_path / "evidence" / "20261101T000000Z-run-00000001" / "a.txt").is_file()
    run = real_run()
    with pytest.raises(NotKept, match=r"\(No space left on device\).*; the 3 file\(s\) this session had written "
                                      r"were removed$"), store.whole(tmp_path):
        store.write_evidence(tmp_path, run.run_id, "a.txt", "x\n")
        store.write_evidence(tmp_path, run.run_id, "b.txt", "y\n")
        store.write_record(tmp_path, run)
        raise DiskFull(tmp_path / "evidence" / run.run_id / "c.txt", "No space left on device")
    assert not (tmp_path / "evidence" / run.run_id).exists()
    assert not (tmp_path / "runs" / f"{run.run_id}.json").exists()
    assert (tmp_path / earlier.path).read_text() == "from before\n"
