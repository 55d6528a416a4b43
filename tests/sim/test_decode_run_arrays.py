"""Decode runs keep their step ends as a float64 array (`optsched.sim.fastforward`, docs/notebook/BENCHMARKS.md "Simulator / env speed, fourth
pass"): a run cut by a call routed to its instance (`truncate_run`) and views read mid-run (steps done by
``now``: `routing_rows`, `active_kv_blocks`, `remaining_decode_tokens_at`) must give exactly what one event
per engine step gives. The stepping API routes every call to the instance with the fewest outstanding
tokens as the views report them, so a wrong mid-run count changes the routing and everything after it."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.sim.engine import Simulator
from tests.sim.helpers import cluster, random_workload


class _CountingCuts(Simulator):
    """Counts the decode runs `Simulator._touch` cut (`truncate_run` shortened ``run.steps``). A subclass, not
    a patched module global: the compiled build (`optsched._native`) binds module functions at compile time."""

    cuts = 0

    def _touch(self, inst, t):
        run = inst.run
        steps = run.steps if run is not None else 0
        super()._touch(inst, t)
        type(self).cuts += run is not None and run.steps != steps


def _episode(ff: bool, seed: int, roles: dict | None):
    w = random_workload(np.random.default_rng(seed), n_sessions=12, max_calls=4, max_out=300, open_loop=True)
    sim = _CountingCuts(w, cluster(3, role_counts=roles, max_num_batched_tokens=512, max_num_seqs=8))
    front = [i.iid for i in sim.instances if i.role != "decode"]
    sim.fast_forward = ff
    seen, mid_run = [], 0
    d = sim.run_until_decision()
    while d is not None:
        now = sim.now_s
        rows = sim.view.routing_rows(d.call.block_hashes)
        kv = [v.active_kv_blocks for v in sim.view.instances]
        rem = [i.remaining_decode_tokens_at(now) for i in sim.instances]
        mid_run += sum(1 for i in sim.instances if i.run is not None and i.run.ends[0] <= now)
        seen.append((repr(now), rows, kv, rem))
        sim.apply(min(front, key=lambda j: (rows[j][5], j)))
        d = sim.run_until_decision()
    df = sim.calls_frame().to_csv(index=False, float_format=repr)
    # busy time and the ITL sum are sums of the same durations grouped per run vs per step (last-ulp
    # differences by design, as before this change): compared to 1e-12 below, the rest exactly
    inst = [(i.num_steps, i.dstep, i.itl.total_counts().tolist(), [repr(v) for v in i.itl.stack_v])
            for i in sim.instances]
    sums = [(i.busy_s, i.itl.sum_s) for i in sim.instances]
    return seen, df, inst, mid_run, sums


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("roles", [None, {"prefill": 1, "decode": 2}])
def test_decode_runs_cut_and_read_mid_run_equal_step_by_step(seed, roles):
    _CountingCuts.cuts = 0
    seen_ff, df_ff, inst_ff, mid_ff, sums_ff = _episode(True, seed, roles)
    cuts = _CountingCuts.cuts
    seen_1, df_1, inst_1, _, sums_1 = _episode(False, seed, roles)
    assert mid_ff > 0  # views read runs in progress
    if roles:
        assert cuts > 0  # P/D: KV arrivals cut runs (a release never does: runs stop at the next one)
    assert seen_ff == seen_1
    assert df_ff == df_1
    assert inst_ff == inst_1
    assert np.allclose(sums_ff, sums_1, rtol=1e-12, atol=0)
