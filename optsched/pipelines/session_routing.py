"""Session routing door: cost model + paused sessions -> `SessionRoutingInstance` -> MILP / LP -> router.

* ``paused_instance``: decisions = paused sessions (home, KV tokens, forecast return), one option per
  (session, instance): ``stay`` on home (holds its KV on home from now to the return bucket) or
  ``transfer`` to i (the copy overlaps the pause: fixed = max(0, transfer − pause) + prefill; holds KV on
  i), each with the cost model's prefill time of ``new_tokens`` on top of the session's context
  (``CostModel.prefill_time(new, cached)``, attention included) and decode interference
  ``output_tokens · decode_s_per_token`` as work. Capacity: ``bucket_s`` of work per bucket.
* ``make_pricer``: the online router's re-pricing: ``paused_instance`` -> matrix LP
  (`optsched.models.routing_session_lp`) -> SciPy HiGHS -> `SessionPrices` (σ, π from the duals,
  backlog forecast from the primal).
* ``solve_session_routing_ti``: the exact time-indexed model (tight LP bound; the hindsight optimum).
* ``synthetic_session_instance``: AgentX-like random instances for tests and benchmarks.
* ``plan_from_workload``: derives the session router's `Plan` (routing/session) from a workload (median pause per tool class,
  decode cost from the cost model, the pricer's grid and re-pricing period, the pause-move margin from a
  calibration simulation: `optsched.pipelines.session_calibrate`) and records the LP solve that prices a
  snapshot of it and the calibration's numbers (provenance).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np

from optsched.cost import CostModel
from optsched.cost.step_fast import fast_prefill_time
from optsched.models.routing_session_data import MODES, SessionRoutingInstance
from optsched.models.routing_session_lp import build_session_lp
from optsched.pipelines.session_calibrate import calibrate_move_margin, time_grid
from optsched.plan import Plan
from optsched.policies.router_session import SessionPrices, SessionRouter, SessionRouterConfig
from optsched.solvers import SolveResult, SolverOptions, solve
from optsched.solvers.scipy_lp import solve_matrix_lp

__all__ = [
    "build_router",
    "config_from_parameters",
    "make_pricer",
    "paused_instance",
    "plan_from_workload",
    "router_from_parameters",
    "solve_session_routing",
    "solve_session_routing_ti",
    "synthetic_session_instance",
]

logger = logging.getLogger(__name__)
_STAY, _TRANSFER = MODES.index("stay"), MODES.index("transfer")


def paused_instance(cm: CostModel, now_s: float, paused: Sequence[tuple[int, int, float]], backlog_s: np.ndarray,
                    hbm_free_tokens: np.ndarray, bucket_s: float = 2.0, n_buckets: int = 8,
                    new_tokens: int = 2048, output_tokens: int = 400, decode_s_per_token: float = 0.0,
                    link: str = "rdma", weights: Sequence[float] | None = None,
                    spill: str | None = "pcie") -> SessionRoutingInstance:
    """`SessionRoutingInstance` of ``paused`` sessions ``(home, kv_tokens, return_s)`` (module docstring).

    ``spill``: how KV that does not fit in free HBM comes back (elastic ``hbm`` rows, `spill_s_per_token`):
    "pcie" (offloaded to host DRAM, reloaded over PCIe: ``kv_transfer_time(K, "pcie") / K``), "recompute"
    (``prefill_time(K, 0) / K``), K = the paused sessions' mean KV tokens; None: hard rows (infeasible when
    the paused KV cannot fit).

    Raises:
        ValueError: no paused session, or a home outside ``backlog_s``'s instances.
    """
    n_i, n_d = len(backlog_s), len(paused)
    if n_d == 0:
        raise ValueError("paused_instance needs at least one paused session")
    od, oi, om, fixed, work, hold, link_s = [], [], [], [], [], [], []
    buckets = np.zeros(n_d, dtype=int)
    prefill_s = fast_prefill_time(cm)  # the pricer runs inside online decisions: scalar path, same floats
    for d, (home, tokens, ret) in enumerate(paused):
        if not (0 <= home < n_i):
            raise ValueError(f"paused session {d}: home {home} outside 0..{n_i - 1}")
        pause = max(0.0, ret - now_s)
        t = min(n_buckets - 1, int(pause // bucket_s))
        buckets[d] = t
        pre = prefill_s(new_tokens, tokens)
        xfer = float(cm.kv_transfer_time(tokens, link))
        h = np.zeros(n_buckets)
        h[: t + 1] = tokens + new_tokens
        for i in range(n_i):
            od.append(d)
            oi.append(i)
            om.append(_STAY if i == home else _TRANSFER)
            fixed.append(pre + (0.0 if i == home else max(0.0, xfer - pause)))
            work.append(pre + output_tokens * decode_s_per_token)
            hold.append(h)
            link_s.append(0.0 if i == home else xfer)
    k_mean = max(1, round(float(np.mean([k for _, k, _ in paused]))))
    if spill is None:
        spill_s = None
    elif spill == "pcie":
        spill_s = float(cm.kv_transfer_time(k_mean, "pcie")) / k_mean
    elif spill == "recompute":
        spill_s = float(cm.prefill_time(k_mean, 0)) / k_mean
    else:
        raise ValueError(f"paused_instance: spill must be 'pcie', 'recompute' or None, got {spill!r}")
    return SessionRoutingInstance(
        spill_s_per_token=spill_s,
        decision_ids=tuple(f"p{d}" for d in range(n_d)),
        weight=np.ones(n_d) if weights is None else np.asarray(weights, float), bucket=buckets, bucket_s=bucket_s,
        opt_decision=np.array(od), opt_instance=np.array(oi), opt_mode=np.array(om), fixed_s=np.array(fixed),
        work_s=np.array(work), hold_tokens=np.array(hold), link_s=np.array(link_s),
        capacity_s=np.full((n_i, n_buckets), bucket_s), base_work_s=np.zeros((n_i, n_buckets)),
        backlog0_s=np.asarray(backlog_s, float), hbm_free_tokens=np.repeat(np.asarray(hbm_free_tokens, float)[:, None],
                                                                           n_buckets, axis=1))


def make_pricer(cm: CostModel, bucket_s: float = 2.0, n_buckets: int = 8, max_sessions: int = 32,
                build_lp=build_session_lp, **kw):
    """Pricer for `SessionRouter`: LP relaxation of the ``max_sessions`` soonest-returning paused sessions.

    ``bucket_s`` / ``n_buckets``: the LP's time grid; `build_router` passes a plan's derived values
    (`session_calibrate.time_grid`), the defaults 2.0 s / 8 are the earlier hand-set ones. ``max_sessions``
    caps the LP's size (hand-set, not derived).

    Without paused sessions, or when the LP is not optimal (logged), prices are 0 and the backlog forecast
    is the current backlog drained at one second per second. ``build_lp``: the matrix builder
    (`optsched.models.routing_session_lp`; its row-by-row reference gives the same LP, slower). Other keyword
    args go to `paused_instance`.
    """

    def pricer(now_s: float, paused: list, backlog_s: np.ndarray, free: np.ndarray) -> SessionPrices:
        n_i = len(backlog_s)
        drained = np.maximum(0.0, backlog_s[:, None] - bucket_s * (1 + np.arange(n_buckets))[None, :])
        zero = np.zeros((n_i, n_buckets))
        if not paused:
            return SessionPrices(now_s, bucket_s, drained, zero, zero)
        inst = paused_instance(cm, now_s, paused[:max_sessions], backlog_s, free, bucket_s, n_buckets, **kw)
        lp = build_lp(inst)
        res, x, marg = solve_matrix_lp(lp)
        if x is None:
            logger.warning("session pricer LP %s; zero prices", res.status)
            return SessionPrices(now_s, bucket_s, drained, zero, zero)
        n_o = lp.n_options
        backlog = x[n_o: n_o + n_i * n_buckets].reshape(n_i, n_buckets)
        work_price = np.maximum(0.0, -marg[lp.backlog_rows]).reshape(n_i, n_buckets)
        hbm_price = np.maximum(0.0, -marg[lp.hbm_rows]).reshape(n_i, n_buckets)
        return SessionPrices(now_s, bucket_s, backlog, work_price, hbm_price)

    return pricer


def synthetic_session_instance(rng: np.random.Generator, n_instances: int = 8, n_sessions: int = 64,
                               n_buckets: int = 8, bucket_s: float = 2.0, gpu: str = "h200-sxm",
                               model: str = "llama-3-8b", hbm_fill: float = 0.5) -> SessionRoutingInstance:
    """AgentX-like paused sessions: contexts lognormal (median 30K tokens, cap 120K), homes uniform, pauses
    lognormal (median 3.84 s, p95 184.8 s: AgentX gaps), backlogs uniform in [0, 4] s, HBM free such that
    the sessions' KV would fill ``hbm_fill`` of the cluster if spread evenly (tight when > 1/I per home)."""
    cm = CostModel.from_names(gpu, model, 1)
    tokens = np.minimum(120_000, rng.lognormal(math.log(30_000), 0.9, n_sessions)).astype(int)
    homes = rng.integers(0, n_instances, n_sessions)
    pauses = np.minimum(3600.0, rng.lognormal(math.log(3.84), 2.355, n_sessions))
    paused = [(int(h), int(k), float(p)) for h, k, p in zip(homes, tokens, pauses)]
    backlog = rng.uniform(0.0, 4.0, n_instances)
    free = np.full(n_instances, tokens.sum() / (n_instances * hbm_fill))
    return paused_instance(cm, 0.0, paused, backlog, free, bucket_s, n_buckets,
                           decode_s_per_token=float(cm.decode_step_time(32, 32 * 8192)) / 32)


def solve_session_routing(inst: SessionRoutingInstance, relax: bool = False,
                          options: SolverOptions | None = None):
    """Build + solve with HiGHS (`optsched.solvers.solve`); returns (SolveResult, solution or None)."""
    from optsched.models.routing_session import build_session_routing, extract_session_routing

    m = build_session_routing(inst, relax=relax)
    res = solve(m, options)
    return res, (extract_session_routing(m) if res.has_solution else None)


def solve_session_routing_ti(inst: SessionRoutingInstance, relax: bool = False,
                             options: SolverOptions | None = None, slots_per_bucket: int = 4,
                             horizon_slots: int | None = None):
    """The exact time-indexed model (`optsched.models.routing_session_ti`, no big-M) with HiGHS; returns
    (SolveResult, `TimeIndexedSolution` or None)."""
    from optsched.models.routing_session_ti import build_session_routing_ti, extract_session_routing_ti

    m = build_session_routing_ti(inst, slots_per_bucket=slots_per_bucket, horizon_slots=horizon_slots, relax=relax)
    res = solve(m, options)
    return res, (extract_session_routing_ti(m) if res.has_solution else None)


def plan_from_workload(workload, gpu: str, model: str, tp: int = 1, options: SolverOptions | None = None,
                       seed: int | None = None, link: str = "rdma", n_instances: int = 4,
                       reprice_s: float | None = None, move_margin_s: float | None = None,
                       cluster=None, incumbent: str = "cache_aware") -> tuple[Plan, SolveResult]:
    """Plan (kind "routing", type "session") for ``workload`` + the LP solve that priced a snapshot of it.

    Derived parameters: ``think_forecast_s[tool]`` = median ``think_time_s`` of the workload's calls of that
    tool class (the forecast of a pause, not the pause itself); ``decode_s_per_token`` =
    ``decode_step_time(32, 32·8192) / 32`` from the cost model; the pricer's grid ``bucket_s`` / ``n_buckets``
    and ``reprice_s = bucket_s`` from the workload and the cost model (`session_calibrate.time_grid`: median
    per-call LP work, horizon = 0.9 quantile of the forecast pauses); ``move_margin_s`` = the 0.9 quantile of the
    forecast error of the LP's backlog difference (`session_calibrate.margin_from_pairs`) measured by a calibration simulation of the router (margin 0) on
    ``workload`` on ``cluster`` (`session_calibrate.calibrate_move_margin`; ``cluster`` default: ``n_instances``
    colocated instances of ``gpu/model/tp`` with the simulator's default scheduler; sessions are cut before
    their first call longer than the model's context, `optsched.workload.context.cap_context`, and the cut is
    recorded; ValueError when every session's first call is too long). ``reprice_s`` /
    ``move_margin_s`` given: used as is (recorded as given; no calibration run for a given margin).
    ``incumbent`` ("cache_aware" by default, "" for none): the heuristic whose decision the router keeps unless an
    option scores better by more than ``incumbent_margin_s`` = the median absolute error of the router's
    predicted TTFT in the same calibration simulation (`session_calibrate.prediction_error`; 0 when the
    margin is given and no calibration runs).

    The snapshot: every session paused after its first call, homes round-robin over ``n_instances``, returns
    at the forecast, on the derived grid; its LP objective, bound and gap go to ``Plan.provenance`` and the
    duals/primals used (HBM price per instance and bucket, work price, backlog forecast) to
    ``parameters["derived"]`` together with the grid's and the calibration's numbers (the online router
    re-prices with the same LP while it runs; these are the snapshot's values). ``Plan.to_policy()`` builds
    the `SessionRouter` with its pricer.
    """
    from optsched.plan import Plan, Provenance
    from optsched.revision import git_revision

    cm = CostModel.from_names(gpu, model, tp)
    by_tool: dict[str, list[float]] = {}
    firsts = []
    for s in workload.sessions:
        for c in s.calls:
            if c.think_time_s > 0:
                by_tool.setdefault(c.tool, []).append(c.think_time_s)
        firsts.append(s.calls[0])
    think = {k: float(np.median(v)) for k, v in sorted(by_tool.items())}
    default = float(np.median(np.concatenate([np.asarray(v) for v in by_tool.values()]))) if by_tool else 3.84
    dec = float(cm.decode_step_time(32, 32 * 8192)) / 32
    grid = time_grid(workload, cm, dec, think, default)
    bucket, n_b = grid["bucket_s"], grid["n_buckets"]
    if reprice_s is not None:
        grid = {**grid, "reprice_s": float(reprice_s), "reprice_s_source": "given (plan_from_workload argument)"}
    paused = [(k % n_instances, c.input_tokens + c.output_tokens, think.get(c.tool, default))
              for k, c in enumerate(firsts)]
    free = np.full(n_instances, float(cm.kv_capacity_tokens()))
    inst = paused_instance(cm, 0.0, paused[:64], np.zeros(n_instances), free, bucket, n_b,
                           decode_s_per_token=dec, link=link)
    res, sol = solve_session_routing(inst, relax=True, options=options)
    cfg = SessionRouterConfig(gpu=gpu, model=model, tp=int(tp), link=link, decode_s_per_token=dec,
                              think_forecast_s=think, default_think_s=default, reprice_s=float(grid["reprice_s"]),
                              bucket_s=bucket, n_buckets=n_b)
    if move_margin_s is None:
        if cluster is None:
            from optsched.sim import ClusterConfig, InstanceConfig

            cluster = ClusterConfig(instances=(InstanceConfig(role="colocated", gpu=gpu, model=model, tp=int(tp),
                                                              count=n_instances),))
        from optsched.workload.context import cap_context

        try:  # the simulator refuses calls longer than the model's context: cut as compare does (end_session)
            fit, cut = cap_context(workload, cm.model.max_context_tokens)
        except ValueError as exc:
            raise ValueError(f"session plan: cannot calibrate move_margin_s on this workload: {exc}") from exc
        margin = calibrate_move_margin(fit, cfg, cluster, build_router(cfg).pricer, seed=seed or 0)
        margin["context_cut"] = cut
        inc_margin = float(margin["prediction"]["incumbent_margin_s"])
    else:
        margin = {"move_margin_s": float(move_margin_s), "source": "given (plan_from_workload argument)"}
        inc_margin = 0.0
    derived = {"solve": "session_routing LP relaxation (snapshot: first calls paused, homes round-robin)",
               "status": res.status, "n_sessions": inst.n_decisions,
               "hbm_price_per_token": sol.hbm_price.tolist() if sol is not None else None,
               "work_price_per_s": sol.work_price.tolist() if sol is not None else None,
               "backlog_forecast_s": sol.backlog_s.tolist() if sol is not None else None,
               "think_forecast_s": "median think_time_s per tool class of the workload",
               "decode_s_per_token": "CostModel.decode_step_time(32, 32*8192) / 32",
               "time_grid": grid, "move_margin": margin}
    params = {"gpu": gpu, "model": model, "tp": int(tp), "link": link, "decode_s_per_token": dec,
              "think_forecast_s": think, "default_think_s": default, "reprice_s": float(grid["reprice_s"]),
              "bucket_s": bucket, "n_buckets": n_b, "move_margin_s": float(margin["move_margin_s"]),
              "incumbent": incumbent, "incumbent_margin_s": inc_margin, "derived": derived}
    from optsched.workload.digest import workload_digest

    prov = Provenance(workload_digest=workload_digest(workload), cost_model=f"{gpu}/{model}/tp{tp}",
                      solver=res.solver, solver_version=getattr(res, "solver_version", "") or "",
                      objective=res.objective if res.has_solution else None,
                      bound=res.bound if res.bound is not None and np.isfinite(res.bound) else None,
                      gap=res.gap if res.gap is not None and np.isfinite(res.gap) else None, seed=seed,
                      git_revision=git_revision()["commit"], objective_units="weighted TTFT s")
    return Plan("routing", "session", params, prov), res


def config_from_parameters(params) -> SessionRouterConfig:
    """`SessionRouterConfig` from a session plan's ``parameters`` (``derived`` becomes its provenance). Keys a
    plan written before their derivation lacks (``bucket_s``, ``n_buckets``, ``move_margin_s``) take the
    config's defaults, the earlier hand-set values (2.0 s, 8, 0.5 s), so old plans behave as before. Raises
    TypeError for a key that is none of these (nor ``derived``): a misspelt field is refused, not dropped."""
    keys = ("gpu", "model", "tp", "link", "decode_s_per_token", "think_forecast_s", "default_think_s",
            "reprice_s", "move_margin_s", "bucket_s", "n_buckets", "incumbent", "incumbent_margin_s", "deviate")
    for k in params:  # a misspelt key (e.g. "devaite": false) would otherwise be dropped and the router deviate
        if k not in keys and k != "derived":
            raise TypeError(f"session router plan: unexpected keyword argument {str(k)!r} (parameters: "
                            f"{', '.join(keys)}, derived)")
    return SessionRouterConfig(**{k: params[k] for k in keys if k in params},
                               provenance=dict(params.get("derived", {})))


def build_router(config: SessionRouterConfig, **pricer_kw) -> SessionRouter:
    """`SessionRouter` with the LP pricer (``pricer_kw`` to `make_pricer`; its grid defaults to the config's
    ``bucket_s`` / ``n_buckets``)."""
    cm = CostModel.from_names(config.gpu, config.model, config.tp)
    pricer_kw.setdefault("bucket_s", config.bucket_s)
    pricer_kw.setdefault("n_buckets", config.n_buckets)
    pricer_kw.setdefault("decode_s_per_token", config.decode_s_per_token)
    pricer_kw.setdefault("link", config.link)
    return SessionRouter(config, make_pricer(cm, **pricer_kw))


def router_from_parameters(params) -> SessionRouter:
    """The policy a ``routing/session`` Plan stands for (`optsched.plan.policy_targets`, entry point
    ``routing/session``): `build_router` of `config_from_parameters`."""
    return build_router(config_from_parameters(params))
