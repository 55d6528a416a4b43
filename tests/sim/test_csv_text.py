"""`optsched.sim.csv_text.frame_csv` writes exactly ``DataFrame.to_csv(index=False, float_format="%.9g",
lineterminator="\\n")`` (the reference), and declines the tables it does not handle."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from optsched.sim import simulate
from optsched.sim.csv_text import frame_csv, write_frame_csv
from optsched.sim.result import FLOAT_FORMAT
from tests.sim.helpers import cluster, random_workload


def _ref(df: pd.DataFrame) -> str:
    return df.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")


@pytest.mark.parametrize("seed", [0, 1])
def test_simulated_tables(tmp_path, seed):
    res = simulate(random_workload(np.random.default_rng(seed), n_sessions=6), cluster(2))
    for df in (res.calls, res.timeseries):
        text = frame_csv(df, FLOAT_FORMAT)
        assert text is not None and text == _ref(df)
        write_frame_csv(df, tmp_path / "t.csv", FLOAT_FORMAT)
        assert (tmp_path / "t.csv").read_bytes() == _ref(df).encode()


def test_odd_cells():
    df = pd.DataFrame({
        "s": ["plain", "a,b", 'q"q', "line\nbreak", "tab\tx", "", " lead", "é☃"],
        "f": [math.nan, math.inf, -math.inf, -0.0, 1e-300, 123456789.123, 1.0, 2.5e20],
        "i": [0, -1, 2**62, 7, 8, 9, 10, 11],
        "g": np.arange(8, dtype=np.float64) / 3})
    assert frame_csv(df, FLOAT_FORMAT) == _ref(df)
    assert frame_csv(df.iloc[:0], FLOAT_FORMAT) == _ref(df.iloc[:0])
    odd = df.rename(columns={"s": "a,b"})
    assert frame_csv(odd, FLOAT_FORMAT) == _ref(odd)


@pytest.mark.parametrize("df", [
    pd.DataFrame({"a": [1, 2]}),  # one column: the csv module quotes a lone empty field
    pd.DataFrame({"a": [1, 2], "b": [True, False]}),
    pd.DataFrame({"a": [1, 2], "b": pd.array([1, None], dtype="Int64")}),
    pd.DataFrame({"a": [1, 2], "b": ["x", None]}),
    pd.DataFrame({"a": [1, 2], "b": ["x", "cr\ry"]}),
    pd.DataFrame({"a": [1, 2], "b": [1.5, "x"]}, dtype=object),
    pd.DataFrame({"a": [1, 2], "b": np.array([1, 2], dtype=np.int32)}),
])
def test_declines_other_tables(tmp_path, df):
    assert frame_csv(df, FLOAT_FORMAT) is None
    write_frame_csv(df, tmp_path / "t.csv", FLOAT_FORMAT)  # pandas writes them
    assert (tmp_path / "t.csv").read_bytes() == _ref(df).encode()
