"""`simulate`'s summary comes from numpy columns (`RawCalls.summary_columns` + `summarize_columns`) and its
tables are built only when read. Both must equal the reference: `summarize` of the pandas table
(`calls_frame`), on the same runs, to the last bit; and a run that only reads the summary imports no pandas."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import SLO, Simulator, simulate
from optsched.sim.metrics import SUMMARY_COLUMNS, summarize, summarize_columns
from optsched.sim.result import RawCalls, calls_frame
from tests.sim.test_fast_paths import CASES, TRACE

SLOS = (None, SLO(ttft_s=0.5, tpot_s=0.03))


def _sim(case: str, slo=None) -> tuple[Simulator, object]:
    w, cl, kw = CASES[case]()
    kw = dict(kw)
    sim = Simulator(w, cl, router=kw.pop("router", RoundRobinRouter()), slo=slo, **kw)
    sim.run()
    return sim, cl


def _dump(summary: dict) -> str:
    return json.dumps(summary, sort_keys=True, default=repr)


@pytest.mark.parametrize("case", sorted(CASES))
def test_columns_and_summary_equal_the_table(case):
    sim, cl = _sim(case)
    raw = RawCalls(sim._seqs, sim._driver.calls)
    df = raw.frame()
    assert df.equals(calls_frame(sim._seqs, sim._driver.calls))
    cols = raw.summary_columns()
    assert cols is not None and set(cols) == set(SUMMARY_COLUMNS)
    for k in SUMMARY_COLUMNS:
        ref = df[k].to_numpy()
        assert cols[k].dtype == ref.dtype and np.array_equal(cols[k], ref, equal_nan=True), k
    for slo in SLOS:
        got = summarize_columns(cols, raw.cols["session_id"], raw.boundary, sim.instances, cl.num_gpus, slo, {"x": 1})
        assert _dump(got) == _dump(summarize(df, sim.instances, cl.num_gpus, slo, {"x": 1}))


def test_simulate_result_equals_the_table_path():
    w, cl, kw = CASES["shared_prefix_dram"]()
    res = simulate(w, cl, slo=SLOS[1], **kw)
    assert callable(res._calls) and callable(res._timeseries)  # nothing built yet
    df = res.calls
    assert res.calls is df  # built once
    sim, _ = _sim("shared_prefix_dram", SLOS[1])
    ref = sim.calls_frame()
    assert df.equals(ref)
    extra = {k: res.summary[k] for k in ("residency_actions", "seed", "block_size", "concurrency")}
    assert _dump(res.summary) == _dump(summarize(ref, sim.instances, cl.num_gpus, SLOS[1], extra))


def test_columns_decline_what_the_table_would_infer():
    sim, _ = _sim("vidur_1x")
    raw = RawCalls(sim._seqs, sim._driver.calls)
    assert raw.summary_columns() is not None
    raw.cols["hit_ssd_tokens"][3] = None  # from_records would make the column float64 / object
    assert raw.summary_columns() is None
    raw.cols["hit_ssd_tokens"][3] = 0
    raw.cols["finish_s"][0] = float("nan")  # unfinished: pandas' min/max skip NaN, numpy's do not
    assert raw.summary_columns() is None


def test_summary_only_run_imports_no_pandas():
    if not TRACE.is_file():
        pytest.skip(f"{TRACE} is absent")
    code = ("import sys; from tests.sim.test_fast_paths import CASES; from optsched.sim import simulate; "
            "w, cl, kw = CASES['vidur_1x'](); r = simulate(w, cl, **kw); assert r.summary['num_calls'] == 400; "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True, text=True, capture_output=True).stdout
    assert out.strip() == "False"


def test_sample_array_equals_array_of_tuples():
    from optsched.sim.metrics import _sample_array

    sim, _ = _sim("vidur_4x")
    for inst in sim.instances:
        ref = np.array(inst.samples, dtype=np.float64).reshape(-1, 4)
        got = _sample_array(inst)
        assert got.dtype == ref.dtype and np.array_equal(got, ref)
