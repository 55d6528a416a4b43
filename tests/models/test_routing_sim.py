"""The simulator confirms a solved routing window's prediction.

Setup: windows of the shipped Mooncake sample (real prompts and chained block hashes). The first N
sessions are released 8 s apart (each finishes before the next arrives), the next W all at T0, after
the warm-up has drained. `replay_window` replays the warm-up through per-instance PrefixCaches, the
window MILP (`solve_routing`) places the W calls, and the simulator runs the whole workload with
`PlanRouter` following the replay's placement for the warm-up and the MILP's for the window (DRAM tier
off, as the replay has HBM only). Predicted vs simulated:

- recomputed prompt tokens of the window: EXACT (the replay and the simulator's caches hold the same
  blocks; measured equal on all 5 windows tried).
- prefill-bound window (outputs set to 1 token): simulated window makespan / predicted makespan in
  [0.98, 1.02], each instance's simulated busy time within 2% of its predicted load (measured: ratios
  0.998-1.007, per-instance error <= 1.4%). What differs: the simulator packs prefills into 8192-token
  chunked steps with per-step overhead, the MILP sums one ``prefill_time(new, cached)`` per call.
- with the real outputs the MILP UNDER-predicts: ratio 1.40-2.32 measured (bracket asserted: [1.2, 2.5]).
  The MILP prices decode as work amortized over a batch of ⌈W/I⌉ sequences, but in the simulator the
  batch shrinks as calls finish and a long output decodes alone at the end (a per-call latency floor
  the makespan model does not have).
"""

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.pipelines.routing import replay_window, window_decode_batch
from optsched.pipelines.routing_window import routing_instance_from_calls, solve_routing
from optsched.policies.router_plan import PlanRouter, RoutingPlan
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.solvers import SolverOptions
from optsched.workload import load_any
from optsched.workload.types import Session, Workload

MOONCAKE = Path(__file__).resolve().parents[2] / "optsched/data/samples/mooncake/conversation_trace_first2000.jsonl"
GAP_S = 8.0  # seconds between warm-up arrivals (longer than any warm-up call alone)


@pytest.fixture(scope="module")
def mooncake():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_any(MOONCAKE)


def run_window(wl, start: int, n_warm: int, n_win: int, n_inst: int, output_tokens: int | None):
    t0 = GAP_S * n_warm + 200.0
    sessions = []
    for k, s in enumerate(wl.sessions[start:start + n_warm + n_win]):
        t = GAP_S * k if k < n_warm else t0
        kw = {"arrival_s": t} | ({"output_tokens": output_tokens} if output_tokens else {})
        sessions.append(Session(session_id=s.session_id, calls=(dataclasses.replace(s.calls[0], **kw),), start_s=t))
    w = Workload("window", tuple(sessions), wl.block_size, False, "")
    cm = CostModel.from_names("h200", "llama-3-70b", tp=4)
    rep = replay_window(w, cm, n_inst, n_win, n_warm)
    inst = routing_instance_from_calls(rep.calls, rep.resident_tokens, [cm] * n_inst,
                                       [float(cm.kv_capacity_tokens())] * n_inst, home=rep.home,
                                       decode_batch=window_decode_batch(n_win, n_inst))
    # What is checked below (recomputed tokens exact, per-instance busy time = the model's load) holds for any
    # assignment the model scores, so a time-limited incumbent serves as well as the proven optimum: the test
    # does not depend on how fast this machine is (the 20 s limit it had failed under CPU contention).
    sol = solve_routing(inst, SolverOptions(time_limit_s=60, mip_gap=1e-4))
    assert sol.result.status in ("optimal", "feasible")
    plan = sol.plan
    cluster = ClusterConfig((InstanceConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, count=n_inst),),
                            SchedulerConfig(), dram_tier=False)
    df = simulate(w, cluster, router=PlanRouter(RoutingPlan({**rep.warm_assignment, **plan.assignment}),
                                                RoundRobinRouter())).calls
    win = df[df.call_id.isin(set(plan.assignment))]
    assert len(win) == n_win
    assert df[~df.call_id.isin(set(plan.assignment))].finish_s.max() < t0  # warm-up drained: initial load 0
    assert all(win.instance.to_numpy() == [plan.assignment[c] for c in win.call_id])
    busy = np.array([win[win.instance == i].finish_s.max() - t0 if (win.instance == i).any() else 0.0
                     for i in range(n_inst)])
    return plan, rep, win, busy


@pytest.mark.parametrize(("start", "n_warm", "n_win", "n_inst"), [(0, 100, 16, 4), (600, 150, 24, 4),
                                                                   (1000, 100, 16, 2)])
def test_prefill_bound_window_matches_the_milp(mooncake, start, n_warm, n_win, n_inst):
    plan, rep, win, busy = run_window(mooncake, start, n_warm, n_win, n_inst, output_tokens=1)
    assert rep.resident_tokens.max() > 0  # some prompts do hit a replayed prefix
    assert int(win.prefilled_tokens.sum()) == int(plan.recomputed_tokens)
    assert busy.max() / plan.makespan_s == pytest.approx(1.0, abs=0.02)
    used = np.array(plan.load_s) > 0
    assert np.all(np.abs(busy[used] - np.array(plan.load_s)[used]) <= 0.02 * np.array(plan.load_s)[used])


def test_with_real_outputs_the_milp_underpredicts_within_the_stated_bracket(mooncake):
    plan, _, win, busy = run_window(mooncake, 0, 100, 16, 4, output_tokens=None)
    assert int(win.prefilled_tokens.sum()) == int(plan.recomputed_tokens)
    assert 1.2 <= busy.max() / plan.makespan_s <= 2.5  # measured 1.45 on this window
