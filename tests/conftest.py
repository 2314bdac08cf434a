"""Shared test setup: the repository root, and the FIXTURE record builders on sys.path."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "tests" / "data" / "records"
sys.path.insert(0, str(RECORDS))  # fixture_records: builders for FIXTURE run records


@pytest.fixture
def repo_root() -> Path:
    return REPO
