"""Smoke test of ``experiments/routing/router_table.py`` at a tiny budget: it writes the table and provenance."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "routing" / "router_table.py"


@pytest.fixture(scope="module")
def router_table():
    spec = importlib.util.spec_from_file_location("router_table", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_router_table_tiny_run(router_table, tmp_path):
    rc = router_table.main(["--out", str(tmp_path), "--workloads", "mooncake,lmcache", "--max-calls", "40",
                            "--routers", "round_robin,cache_aware", "--instances", "2"])
    assert rc == 0
    df = pd.read_csv(tmp_path / "router_table.csv")
    assert list(df["router"]) == ["round_robin", "cache_aware"] * 2
    assert list(df["calls"]) == [40, 40, 44, 44]
    assert ((df["HBM hit rate"] >= 0) & (df["HBM hit rate"] <= 1)).all()
    md = (tmp_path / "router_table.md").read_text()
    assert md.count("\n") == 2 + 4 and "| mooncake | cache_aware |" in md
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert {"argv", "git_revision", "numpy", "cluster"} <= set(prov)


def test_router_table_rejects_unknown_names(router_table, tmp_path):
    with pytest.raises(ValueError, match="--routers"):
        router_table.main(["--out", str(tmp_path), "--workloads", "lmcache", "--routers", "nope"])
    with pytest.raises(ValueError, match="--workloads"):
        router_table.main(["--out", str(tmp_path), "--workloads", "azure"])
