"""Parsers over real transcripts captured on the H200 (tests/data/gpu/)."""

from pathlib import Path

from tileproof.records.parsers import parse_gpu_query, parse_pip_freeze
from tileproof.runner.capture import env_allowlisted

DATA = Path(__file__).parent / "data" / "gpu"


def test_parse_real_gpu_query():
    rows = parse_gpu_query((DATA / "nvidia-smi-query.csv").read_text())
    assert rows == [{
        "index": 0, "name": "NVIDIA H200", "uuid": "GPU-e38677bf-980e-e26f-594b-2c9764385f1a",
        "compute_capability": "9.0", "driver_version": "580.159.04", "memory_total_mib": 143771,
        "clocks_sm_mhz": 345, "clocks_mem_mhz": 3201,
    }]


def test_parse_gpu_query_without_gpus():
    assert parse_gpu_query("") == []
    assert parse_gpu_query("index, name, uuid, compute_cap\n") == []


def test_parse_real_pip_freeze():
    pk = parse_pip_freeze((DATA / "pip-freeze.txt").read_text())
    assert pk["cuda-tile"] == "1.7.0" and pk["pydantic"] and pk["numpy"]
    assert all("==" not in k for k in pk)


def test_env_allowlist_never_copies_everything():
    env = {"CUDA_HOME": "/usr/local/cuda", "AWS_SECRET_ACCESS_KEY": "x", "PATH": "/bin", "HOME": "/root"}
    assert env_allowlisted(env) == {"CUDA_HOME": "/usr/local/cuda", "PATH": "/bin"}


def test_editable_install_is_read_from_pips_comment():
    text = "# Editable Git install with no remote (tileproof==0.1.0)\n-e /work/main\nnumpy==2.4.6\n"
    assert parse_pip_freeze(text) == {"tileproof": "0.1.0", "numpy": "2.4.6"}


def test_wheel_reference_reads_the_decoded_wheel_version():
    """An offline install's ``name @ file:///...whl``: URL-decoded, version from the wheel's file name."""
    text = ("torch @ file:///tmp/gpu-node/wheels/torch-2.13.0%2Bcpu-cp312-cp312-manylinux_2_28_x86_64.whl"
            "#sha256=0123abcd\n"
            "annotated-types @ file:///w/annotated_types-0.8.0-py3-none-any.whl#sha256=f0\n")
    assert parse_pip_freeze(text) == {"torch": "2.13.0+cpu", "annotated-types": "0.8.0"}


def test_names_are_canonical():
    text = "Typing_Extensions==4.16.0\nzope.interface==7.2\nPyYAML==6.0.4\n"
    assert parse_pip_freeze(text) == {"typing-extensions": "4.16.0", "zope-interface": "7.2", "pyyaml": "6.0.4"}


def test_lines_that_are_not_pins_are_skipped():
    text = ("pkg @ git+https://example.invalid/pkg.git@abc\n-e /work/main\nnot a requirement !!\n"
            "broken @ file:///w/not-a-wheel.tar.gz\nnumpy>=2\nnumpy==2.4.6\n")
    assert parse_pip_freeze(text) == {"numpy": "2.4.6"}


def test_real_freeze_wheel_lines_match_their_wheel_names():
    """Every ``@ file://...whl`` line of the H200 transcript reads the version its wheel file names."""
    text = (DATA / "pip-freeze.txt").read_text()
    pk = parse_pip_freeze(text)
    assert pk["cuda-tile"] == "1.7.0" and pk["annotated-types"] == "0.8.0" and pk["colorlog"] == "6.12.0"
    assert all("%" not in v and "/" not in v for v in pk.values())


def test_installed_packages_are_keyed_by_canonical_name():
    from packaging.utils import canonicalize_name

    from tileproof.runner.capture import installed_packages

    pk = installed_packages()
    assert pk and all(canonicalize_name(name) == name for name in pk)
    assert "pydantic-core" in pk and "typing-extensions" in pk


def test_a_redacted_direct_reference_is_skipped_not_fatal():
    text = "mypkg @ git+https://[REDACTED:url-userinfo]@github.com/o/mypkg.git@0123abc\nnumpy==2.4.6\n"
    assert parse_pip_freeze(text) == {"numpy": "2.4.6"}
