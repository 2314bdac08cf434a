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
