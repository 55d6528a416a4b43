"""The session router's derived grid (bucket_s, n_buckets, reprice_s) and move margin:
known answers on hand-built workloads and views, and the direction each moves when the workload changes."""

import dataclasses

import numpy as np
import pytest

from optsched.cost import CostModel
from optsched.pipelines.session_calibrate import (
    _LoggingRouter,
    calibrate_move_margin,
    margin_from_pairs,
    time_grid,
)
from optsched.pipelines.session_routing import make_pricer
from optsched.policies.router_session import SessionPrices, SessionRouterConfig
from optsched.sim import ClusterConfig, InstanceConfig
from optsched.workload import Call
from optsched.workload.gen_agentx import generate_agentx
from optsched.workload.types import Session, Workload

CM = CostModel.from_names("h200-sxm", "llama-3-70b", 4)
DEC = 0.001


def _wl(calls: list[tuple[int, int, int, float, str]]) -> Workload:
    """One session per call: (input, new, output, think_time_s, tool)."""
    return Workload("t", tuple(Session(f"s{k}", (Call(call_id=f"c{k}", session_id=f"s{k}", input_tokens=i,
                                                      new_tokens=n, output_tokens=o, think_time_s=th, tool=tool),))
                               for k, (i, n, o, th, tool) in enumerate(calls)))


def _work(i: int, n: int, o: int) -> float:
    return float(CM.prefill_time(n, i - n)) + o * DEC


def test_time_grid_known_answer():
    # three calls of increasing work: the median is the middle call's prefill + output x decode
    calls = [(1000, 1000, 10, 2.0, "a"), (40_000, 4000, 500, 2.0, "a"), (100_000, 100_000, 2000, 2.0, "b")]
    g = time_grid(_wl(calls), CM, DEC, {"a": 3.0, "b": 50.0}, 7.0, max_buckets=1000)
    bucket = _work(40_000, 4000, 500)
    assert g["bucket_s"] == bucket == g["reprice_s"]
    # forecasts per paused call: 3, 3, 50 -> numpy's linear 0.9 quantile = 3 + 0.8 x 47 = 40.6 s
    assert g["horizon_s"] == pytest.approx(40.6, abs=1e-12)
    assert g["n_buckets"] == int(40.6 // bucket) + 1
    assert (g["n_calls"], g["n_pauses"]) == (3, 3) and g["covered_s"] == g["n_buckets"] * bucket
    # the default solve-budget cap (32 buckets) binds here: the horizon is covered only up to 32 buckets
    g32 = time_grid(_wl(calls), CM, DEC, {"a": 3.0, "b": 50.0}, 7.0)
    assert g["n_buckets"] > 32 and g32["n_buckets"] == 32 and g32["covered_s"] == 32 * bucket
    # a tool class not in the forecasts takes the default; the cap binds
    g2 = time_grid(_wl([(1000, 1000, 10, 1.0, "zz")]), CM, DEC, {}, 7.0, max_buckets=3)
    assert g2["horizon_s"] == 7.0 and g2["n_buckets"] == 3
    with pytest.raises(ValueError, match="horizon_quantile must be in"):
        time_grid(_wl(calls), CM, DEC, {}, 7.0, horizon_quantile=1.5)


def test_time_grid_direction_longer_calls_widen_the_bucket_longer_pauses_lengthen_the_horizon():
    wl = generate_agentx(8, np.random.default_rng(3), variant="256k", max_context_tokens=CM.model.max_context_tokens)
    think = {"bash": 5.0, "edit": 2.0, "read": 9.0, "search": 1.0, "web": 8.0, "task": 0.5}
    g = time_grid(wl, CM, DEC, think, 3.0)
    longer = dataclasses.replace(wl, sessions=tuple(dataclasses.replace(s, calls=tuple(
        dataclasses.replace(c, output_tokens=4 * c.output_tokens) for c in s.calls)) for s in wl.sessions))
    g_long = time_grid(longer, CM, DEC, think, 3.0)
    assert g_long["bucket_s"] > g["bucket_s"] and g_long["reprice_s"] > g["reprice_s"]
    g_pause = time_grid(wl, CM, DEC, {k: 4 * v for k, v in think.items()}, 12.0)
    assert g_pause["bucket_s"] == g["bucket_s"] and g_pause["horizon_s"] == 4 * g["horizon_s"]
    assert g_pause["n_buckets"] > g["n_buckets"]


class _Inst:
    role = "colocated"
    queued_prefill_tokens = 0
    kv_capacity_blocks = 100_000
    active_kv_blocks = 0
    kv_used_blocks = 0
    running_decodes = 0

    def __init__(self, outstanding_tokens: int = 0) -> None:
        self.outstanding_tokens = outstanding_tokens

    def prefix_hit_blocks(self, hashes, tier="hbm"):
        return 0


@dataclasses.dataclass
class _View:
    instances: list
    now_s: float
    home: int = 0
    block_size: int = 16

    def session_home(self, sid):
        return self.home


def test_logged_error_known_answer():
    # fixed prices: forecast backlog of instance 0 is 3, 2, 1 s over 1 s buckets, instance 1 idle. A pause of
    # forecast 2.5 s returns in bucket 2 -> forecast difference B[0,1] - B[1,1] = 2 - 0 = 2 s. At the return
    # instance 0 has 500 decode tokens outstanding x 0.001 s = 0.5 s of wait, instance 1 none -> realized 0.5,
    # error 2 - 0.5 = 1.5 s; a second pause (home 1: forecast 0 - 2 = -2, realized 0 - 0.5 = -0.5) gives -1.5
    b = np.array([[3.0, 2.0, 1.0], [0.0, 0.0, 0.0]])
    prices = SessionPrices(0.0, 1.0, b, np.zeros_like(b), np.zeros_like(b))
    cfg = SessionRouterConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, decode_s_per_token=DEC,
                              think_forecast_s={"bash": 2.5}, reprice_s=100.0)
    call = Call(call_id="c0", session_id="s", input_tokens=1000, output_tokens=10, tool="bash")
    idle = _View([_Inst(), _Inst()], 0.0)
    r2 = _LoggingRouter(dataclasses.replace(cfg, move_margin_s=10.0), lambda *a: prices)
    r2.route(call, idle)
    assert r2.kv_move_on_pause(call, 0, idle) is None  # the 2 s forecast saving is under the 10 s margin
    nxt = Call(call_id="c1", session_id="s", input_tokens=1010, output_tokens=10, tool="bash")
    r2.route(nxt, _View([_Inst(500), _Inst()], 3.0))
    assert r2.pairs == [(2.0, 0.5)]  # error 1.5 s
    r2.kv_move_on_pause(nxt, 1, _View([_Inst(), _Inst()], 3.0))
    r2.route(Call(call_id="c2", session_id="s", input_tokens=1020, output_tokens=10), _View([_Inst(500), _Inst()], 6.0))
    assert r2.pairs == [(2.0, 0.5), (-2.0, -0.5)]  # errors 1.5, -1.5 s


def test_margin_from_pairs_known_answer():
    # errors F - R = 1.5, -1.5, 0, 3 -> sorted -1.5, 0, 1.5, 3; numpy's linear 0.9 quantile: 1.5 + 0.7 x 1.5 = 2.55
    m = margin_from_pairs([(2.0, 0.5), (-2.0, -0.5), (1.0, 1.0), (0.0, -3.0)])
    assert m["move_margin_s"] == pytest.approx(2.55, abs=1e-12) and m["n_pairs"] == 4
    assert m["rms_s"] == pytest.approx((13.5 / 4) ** 0.5, abs=1e-12) and m["mean_s"] == 0.75
    # a forecast that only ever understates the saving: margin 0, not negative
    assert margin_from_pairs([(0.0, 1.0), (1.0, 3.0)])["move_margin_s"] == 0.0
    assert margin_from_pairs([])["move_margin_s"] == 0.0
    with pytest.raises(ValueError, match="quantile must be in"):
        margin_from_pairs([], 2.0)


def _cluster(n: int) -> ClusterConfig:
    return ClusterConfig(instances=(InstanceConfig(role="colocated", gpu="h200-sxm", model="llama-3-70b", tp=4,
                                                   count=n),))


def _cfg() -> SessionRouterConfig:
    return SessionRouterConfig(gpu="h200-sxm", model="llama-3-70b", tp=4, decode_s_per_token=DEC,
                               think_forecast_s={}, default_think_s=3.0, reprice_s=1.0)


def _chains(n: int, gap_s: float) -> Workload:
    """``n`` sessions of 5 chained calls (contexts 20K..100K, 300 output tokens, 3 s pauses), session k starting at
    k x ``gap_s`` (1000 s: no two sessions overlap)."""
    out = []
    for k in range(n):
        calls, parent = [], ()
        for j in range(5):
            c = Call(call_id=f"s{k}-{j}", session_id=f"s{k}", input_tokens=20_000 * (j + 1), new_tokens=2000,
                     output_tokens=300, parents=parent, think_time_s=3.0 if j < 4 else 0.0, tool="x", turn=j)
            calls.append(c)
            parent = (c.call_id,)
        out.append(Session(f"s{k}", tuple(calls), start_s=k * gap_s))
    return Workload("chains", tuple(out))


def _margin(wl: Workload, n_instances: int) -> dict:
    return calibrate_move_margin(wl, _cfg(), _cluster(n_instances), make_pricer(CM, 1.0, 8, decode_s_per_token=DEC))


def test_margin_is_zero_with_nothing_to_compare_or_nothing_to_mis_forecast():
    # one instance: no (home, other) pair is ever logged
    m = _margin(_chains(4, 0.0), 1)
    assert (m["n_pairs"], m["move_margin_s"]) == (0, 0.0)
    # sessions one after another: at each return every instance is idle, as the LP forecast it -> error 0 exactly
    m = _margin(_chains(4, 1000.0), 2)
    assert m["n_pairs"] == 4 * 4 and m["move_margin_s"] == 0.0


def test_margin_direction_competing_sessions_larger_margin():
    # the same sessions all at once: the LP forecasts the paused sessions' returns, not the other sessions'
    # calls in flight, so the realized waits differ from the forecast and the margin grows above 0
    alone, together = _margin(_chains(4, 1000.0), 2), _margin(_chains(4, 0.0), 2)
    assert together["n_pairs"] == alone["n_pairs"] == 16
    assert together["move_margin_s"] > alone["move_margin_s"] == 0.0
