"""The suite's temporary folders: on RAM_TEMP (a tmpfs) where it can hold them, else where the system says."""

import os
import tempfile
from pathlib import Path

import conftest
import pytest


def test_an_explicit_tmpdir_or_pytest_temp_root_is_kept(monkeypatch, tmp_path):
    monkeypatch.setattr(conftest, "RAM_TEMP", tmp_path)
    monkeypatch.delenv("PYTEST_DEBUG_TEMPROOT", raising=False)
    monkeypatch.setenv("TMPDIR", "/somewhere/chosen")
    assert conftest.ram_temp_root() is None
    monkeypatch.delenv("TMPDIR")
    monkeypatch.setenv("PYTEST_DEBUG_TEMPROOT", "/somewhere/else")
    assert conftest.ram_temp_root() is None
    monkeypatch.delenv("PYTEST_DEBUG_TEMPROOT")
    assert conftest.ram_temp_root() == tmp_path


def test_a_missing_or_too_small_ram_folder_is_not_used(monkeypatch, tmp_path):
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.delenv("PYTEST_DEBUG_TEMPROOT", raising=False)
    monkeypatch.setattr(conftest, "RAM_TEMP", tmp_path / "absent")
    assert conftest.ram_temp_root() is None
    monkeypatch.setattr(conftest, "RAM_TEMP", tmp_path)
    free = os.statvfs(tmp_path)
    monkeypatch.setattr(conftest, "RAM_TEMP_FREE", free.f_bavail * free.f_frsize * 2)
    assert conftest.ram_temp_root() is None


def test_where_the_ram_folder_was_chosen_every_temporary_folder_is_in_it(tmp_path):
    # Chosen once, by the first process (an xdist worker inherits TMPDIR from it).
    if os.environ.get("TMPDIR") != str(conftest.RAM_TEMP):
        pytest.skip(f"not chosen here (TMPDIR or PYTEST_DEBUG_TEMPROOT set, or {conftest.RAM_TEMP} unusable)")
    assert tmp_path.is_relative_to(conftest.RAM_TEMP)
    assert Path(tempfile.gettempdir()) == conftest.RAM_TEMP
