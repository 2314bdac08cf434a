"""Known failures are recognised from the real error text in tests/data/nvcc/."""

from pathlib import Path

import pytest

from tileproof.toolchain.build import has_tile_code
from tileproof.toolchain.diagnose import diagnose

DATA = Path(__file__).parent / "data" / "nvcc"


def transcript(name: str) -> tuple[str, int]:
    text = (DATA / name).read_text()
    code = int(text.rsplit("[exit ", 1)[1].split("]")[0])
    return text, code


@pytest.mark.parametrize(
    "fixture, expected",
    [
        ("cxx17.txt", "cxx17"),
        ("no_enable_tile.txt", "no-enable-tile"),
        ("symlink.txt", "nvcc-symlink"),
        ("no_tileiras.txt", "tileiras-missing"),
        ("check_not_in_table.txt", "check-not-in-table"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_failure_is_named(fixture, expected):
    text, code = transcript(fixture)
    assert code != 0
    assert [d.id for d in diagnose(text, code)] == [expected]


def test_successful_builds_get_no_diagnosis():
    for name in ("sm75.txt", "no_arch.txt", "cuda_home_old_nvcc.txt"):
        text, code = transcript(name)
        assert code == 0
        assert diagnose(text, code) == []


def test_sm75_build_exits_0_but_holds_no_tile_code():
    # The real listing of an sm_75 build: exit 0, no tile IR section, no functions.
    assert not has_tile_code((DATA / "sm75.res-usage.txt").read_text(), "executable")
    assert has_tile_code((DATA / "sm90-executable.res-usage.txt").read_text(), "executable")
    assert has_tile_code((DATA / "sm90-tilefatbin.res-usage.txt").read_text(), "tilefatbin")


def test_tileiras_failure_at_run_time_real_transcript():
    # Captured on the H200: CUDA_HOME=/usr/local/cuda-13.0 with the 13.4 tileiras on PATH.
    text = (Path(__file__).parent / "data" / "run" / "cuda_home_old_run.txt").read_text()
    assert "exit status 5" in text
    assert [d.id for d in diagnose(text, 1)] == ["cuda-home-old"]


def test_failed_build_prints_first_errors_transcript_and_diagnosis(tmp_path):
    """A failed compile shows the compiler's own error lines, where the transcript is and the named cause."""
    from datetime import datetime, timezone

    from tileproof.records.models import BuildResult, Step, Transcript
    from tileproof.runner.builds import failure_lines

    text, code = transcript("check_not_in_table.txt")
    err = tmp_path / "evidence" / "r" / "build.stderr.txt"
    err.parent.mkdir(parents=True)
    err.write_text(text)
    (tmp_path / "evidence" / "r" / "build.stdout.txt").write_text("")
    now = datetime.now(timezone.utc)
    t = lambda name: Transcript(path=f"evidence/r/{name}", sha256="0" * 64, bytes=0)  # noqa: E731
    step = Step(step_version=1, name="build", argv=["nvcc"], started=now, ended=now, duration_s=1.0, exit_code=code,
                stdout=t("build.stdout.txt"), stderr=t("build.stderr.txt"))
    result = BuildResult(program="cpp/x.cu", target="sm_90", artifact_kind="executable", key="k", reused_from=None,
                         step=step, artifact=None, res_usage=[], diagnoses=diagnose(text, code), verdict="failed")
    lines = failure_lines(tmp_path, result)
    assert "error: expression must have a constant value" in lines[0]
    assert any(ln.strip() == "transcript: evidence/r/build.stderr.txt (exit 2)" for ln in lines)
    assert any("diagnosis check-not-in-table" in ln and "kernels/tolerances.py" in ln for ln in lines)
