
import pytest

from tileproof.records.errors import ToolchainError
from tileproof.runner.capture import tools as discover
from tileproof.toolchain.find import (
    coherence,
    major_minor,
    parse_release,
    require_coherent,
)

NVCC_VERSION = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2026 NVIDIA Corporation
Built on Tue_Sep_01_08:45:21_PDT_2026
Cuda compilation tools, release 13.4, V13.4.92
Build cuda_13.4.r13.4/compiler.38855100_0
"""

GOOD_TOOLS = {"nvcc": "13.4.92", "tileiras": "13.4.92", "ptxas": "13.4.92", "cuobjdump": "13.4.92"}
GOOD_PKGS = {"nvidia-cuda-nvcc": "13.4.92", "nvidia-cuda-tileiras": "13.4.92", "nvidia-nvvm": "13.4.92"}


def test_parse_release():
    assert parse_release(NVCC_VERSION) == "13.4.92"
    assert parse_release("garbage") is None
    assert major_minor("13.4.92") == "13.4"
    assert major_minor(None) is None


def test_coherent_toolchain():
    assert coherence(GOOD_TOOLS, GOOD_PKGS, {}) == ("13.4", [])


def test_mixed_packages_are_named():
    shared, problems = coherence(GOOD_TOOLS, {**GOOD_PKGS, "nvidia-nvvm": "13.5.37"}, {})
    assert shared is None
    assert len(problems) == 1
    assert "nvidia-nvvm" in problems[0].detail
    assert "13.5" in problems[0].detail
    assert problems[0].kind == "mixed-releases"


def test_cuda_home_naming_older_toolkit(tmp_path):
    home = tmp_path / "cuda-13.0"
    home.mkdir()
    (home / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "13.0.2"}}')
    _, problems = coherence(GOOD_TOOLS, GOOD_PKGS, {"CUDA_HOME": str(home)})
    assert len(problems) == 1
    assert problems[0].detail.startswith("CUDA_HOME=")
    assert "exit 5" in problems[0].detail
    assert (problems[0].kind, problems[0].subject) == ("hazard-var", "CUDA_HOME")


def test_system_nvcc_too_old_is_refused(tmp_path):
    fake = tmp_path / "nvcc"
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    fake.chmod(0o755)
    with pytest.raises(ToolchainError, match="no tile support"):
        discover(system_nvcc=str(fake))


def test_pip_toolchain_is_found_and_coherent():
    tools = discover()
    assert tools.source == "pip", tools.facts.problems
    assert tools.facts.coherent, tools.facts.problems
    assert tools.tool("nvcc") == tools.tool("nvcc").resolve()  # real path, never a symlink
    require_coherent(tools)
