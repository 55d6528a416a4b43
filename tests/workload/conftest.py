"""Shared fixtures: the real data folder (skip when absent) per the team BRIEF."""

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
if not DATA.exists():  # tests/workload/ is one level deeper than the BRIEF's tests/<file>
    DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.exists():
        pytest.skip(f"real data not present at {DATA}")
    return DATA
