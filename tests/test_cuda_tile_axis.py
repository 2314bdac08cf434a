"""The cuda-tile version is part of the runtime toolchain (claims and run records), and the
claims matrix shows it where records differ."""

from __future__ import annotations

import importlib.metadata as md

import fixture_records as fx
import pytest

from tileproof.claims import matrix
from tileproof.toolchain import find


def _no_tools(monkeypatch):
    monkeypatch.setattr(find, "pip_bin", lambda: None)
    monkeypatch.setattr(find, "package_versions", dict)


def test_runtime_toolchain_records_the_cuda_tile_version(monkeypatch):
    try:
        installed = md.version("cuda-tile")
    except md.PackageNotFoundError:
        pytest.skip("cuda-tile is not installed here (pip install 'tileproof[toolchain]')")
    _no_tools(monkeypatch)
    tc = find.runtime_tools(None, lambda argv: "", env={"PATH": ""})
    assert tc.packages == {"cuda-tile": installed}
    assert tc.major_minor is None  # cuda-tile is not a piece of the one-release rule


def test_without_cuda_tile_the_toolchain_names_none(monkeypatch):
    _no_tools(monkeypatch)

    def absent(name):
        raise md.PackageNotFoundError(name)
    monkeypatch.setattr(find.md, "version", absent)
    assert "cuda-tile" not in find.runtime_tools(None, lambda argv: "", env={"PATH": ""}).packages


def _claims(n: int, release: str, cuda_tile: str):
    v = f"{release}.90"
    tc = fx.toolchain(nvcc=v, tileiras=v, nvvm=v).model_copy(
        update={"packages": {"cuda-tile": cuda_tile, "nvidia-cuda-nvcc": v}})
    return fx.claims_record(n=n, document="d", claim="c", tc=tc, verdict="confirmed")


def test_the_matrix_shows_cuda_tile_per_column_where_records_differ():
    differ = matrix.claim_matrix([_claims(1, "13.3", "1.6.0"), _claims(2, "13.4", "1.7.0")])
    assert "cuda-tile: 13.3 1.6.0; 13.4 1.7.0" in matrix.lines(differ, [("d", "c")])
    same = matrix.claim_matrix([_claims(1, "13.3", "1.7.0"), _claims(2, "13.4", "1.7.0")])
    assert not any(line.startswith("cuda-tile:") for line in matrix.lines(same, [("d", "c")]))
