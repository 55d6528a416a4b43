"""Time per online routing decision: the session router (LP pricer, incumbent rule) next to cache-aware.

Each router runs a whole simulation of an AgentX-like workload on ``instances`` colocated Llama-3-70B TP-4 H200
instances; every call of its ``route`` is timed with ``time.perf_counter`` (the LP re-pricings it triggers
included), and the report gives the median / P99 / max per decision and the ratio to cache-aware measured in
the same run (machines here are shared: compare ratios, not absolute times). Row ``session_array_path`` is the
same router computed the slower way: the cost model's array-path ``prefill_time`` / ``kv_transfer_time``
(router and pricer) instead of `optsched.cost.step_fast.fast_prefill_time`, and the pricer's LP built row by
row (`build_session_lp_rows`) instead of with numpy. The same floats and the same LP, so the same decisions
(checked: the run fails if the two routers' choices differ), timed in the same run. Writes
``runs/bench_route_decision/summary.json``, ``results.md`` and ``provenance.json``.

Usage: .venv/bin/python experiments/bench/route_decision.py [--sessions 32] [--instances 8] [--quick]
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from optsched.config_cli import arg, config_parser, parse_config


@dataclass(frozen=True, slots=True)
class Config:
    sessions: int = arg(32, "AgentX-like sessions (256k variant, context-capped to the model)", at_least=2)
    instances: int = arg(8, "colocated instances (the decision chooses among them)", at_least=1)
    load: float = arg(8.0, "arrival-rate multiplier of the session starts", at_least=1e-3)
    seed: int = arg(0, "generator and simulation seed", at_least=0)
    quick: bool = arg(False, "small budget for a smoke test (8 sessions)")
    out: str = arg("runs/bench_route_decision", "output folder")


class _Timed:
    """Wraps a router: forwards everything, times ``route`` and records its choices."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.times_s: list[float] = []
        self.cpu_s: list[float] = []  # process CPU time of the same calls: what a loaded machine's waits leave out
        self.choices: list[tuple[str, int]] = []

    def route(self, call, view):
        t, c = time.perf_counter(), time.process_time()
        i = self._inner.route(call, view)
        self.times_s.append(time.perf_counter() - t)
        self.cpu_s.append(time.process_time() - c)
        self.choices.append((call.call_id, i))
        return i

    def __getattr__(self, name):
        return getattr(self._inner, name)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(config_parser(Config, __doc__.splitlines()[0]), Config, argv)
    from optsched.compare.replication import build_replication
    from optsched.pipelines.session_routing import build_router, config_from_parameters, plan_from_workload
    from optsched.policies.router_cache_aware import CacheAwareRouter
    from optsched.reproduce.provenance import write_run
    from optsched.sim import ClusterConfig, InstanceConfig, simulate
    from optsched.solvers import SolverOptions

    n = 8 if cfg.quick else cfg.sessions
    spec = f"agentx:sessions={n},variant=256k"
    wl, _ = build_replication(spec, cfg.seed, cfg.load, 131_072, 0, 6)
    train, _ = build_replication(spec, cfg.seed + 1, cfg.load, 131_072, 0, 6)
    cl = ClusterConfig((InstanceConfig(role="colocated", gpu="h200-sxm", model="llama-3-70b", tp=4,
                                       count=cfg.instances),))
    plan, _ = plan_from_workload(train, "h200-sxm", "llama-3-70b", 4, SolverOptions(threads=1), cfg.seed,
                                 n_instances=cfg.instances, cluster=cl)
    from optsched.cost import CostModel
    from optsched.models.routing_session_lp import build_session_lp_rows
    from optsched.pipelines.session_routing import make_pricer
    from optsched.policies.router_session import SessionRouter

    class _ArrayPathCost(CostModel):
        """A CostModel that `fast_prefill_time` does not recognize: the pricer calls ``prefill_time`` itself."""

    class _ArrayPathSession(SessionRouter):
        def _prefill_s(self, new, cached):
            return float(self.cm.prefill_time(max(new, 1), cached))

        def _move_s(self, tokens, link):
            return float(self.cm.kv_transfer_time(tokens, link)) if tokens > 0 else 0.0

    sc = config_from_parameters(plan.parameters)
    ref_cm = _ArrayPathCost.from_names(sc.gpu, sc.model, sc.tp)
    ref = _ArrayPathSession(sc, make_pricer(ref_cm, bucket_s=sc.bucket_s, n_buckets=sc.n_buckets,
                                            decode_s_per_token=sc.decode_s_per_token, link=sc.link,
                                            build_lp=build_session_lp_rows))
    routers = {"cache_aware": _Timed(CacheAwareRouter()), "session": _Timed(build_router(sc)),
               "session_array_path": _Timed(ref)}
    res = {}
    for name, r in routers.items():
        simulate(wl, cl, router=r, seed=cfg.seed)
        ms = 1e3 * np.asarray(r.times_s)
        res[name] = {"decisions": int(ms.size), "median_ms": float(np.median(ms)), "p99_ms": float(np.quantile(ms, 0.99)),
                     "max_ms": float(ms.max()), "mean_ms": float(ms.mean())}
        cpu = 1e3 * np.asarray(r.cpu_s)
        res[name].update(cpu_median_ms=float(np.median(cpu)), cpu_p99_ms=float(np.quantile(cpu, 0.99)))
    if routers["session"].choices != routers["session_array_path"].choices:
        print("error: the fast and the array-path session routers chose differently", file=sys.stderr)
        return 1
    res["ratio_median_session_over_cache_aware"] = res["session"]["median_ms"] / res["cache_aware"]["median_ms"]
    for q in ("median_ms", "p99_ms", "cpu_median_ms", "cpu_p99_ms"):
        res[f"ratio_{q[:-3]}_array_path_over_session"] = res["session_array_path"][q] / res["session"][q]
    lines = ["| router | decisions | median (ms) | P99 (ms) | max (ms) | CPU median / P99 (ms) |", "|---|---|---|---|---|---|"]
    for name in routers:
        r = res[name]
        lines.append(f"| {name} | {r['decisions']} | {r['median_ms']:.3g} | {r['p99_ms']:.3g} | {r['max_ms']:.3g} | "
                     f"{r['cpu_median_ms']:.3g} / {r['cpu_p99_ms']:.3g} |")
    text = "\n".join(lines) + (f"\n\nsession / cache-aware (median): {res['ratio_median_session_over_cache_aware']:.1f}x; "
                                f"array path / session: median {res['ratio_median_array_path_over_session']:.2f}x, "
                                f"P99 {res['ratio_p99_array_path_over_session']:.2f}x; CPU P99 "
                                f"{res['ratio_cpu_p99_array_path_over_session']:.2f}x (same decisions)\n")
    print(text)
    write_run(Path(cfg.out), res, text, {k: getattr(cfg, k) for k in Config.__dataclass_fields__}, sys.argv[1:] if argv is None else argv,
              cfg.seed, ("workload",))
    return 0


if __name__ == "__main__":
    sys.exit(main())
