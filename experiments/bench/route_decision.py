"""Time per online routing decision: the session router (LP pricer, incumbent rule) next to cache-aware.

Each router runs a whole simulation of an AgentX-like workload on ``instances`` colocated Llama-3-70B TP-4 H200
instances; every call of its ``route`` is timed with ``time.perf_counter`` (the LP re-pricings it triggers
included), and the report gives the median / P99 / max per decision and the ratio to cache-aware measured in
the same run (machines here are shared: compare ratios, not absolute times). Writes
``runs/bench_route_decision/summary.json``, ``results.md`` and ``provenance.json``.

Usage: .venv/bin/python experiments/bench_route_decision.py [--sessions 32] [--instances 8] [--quick]
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
    """Wraps a router: forwards everything, times ``route``."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.times_s: list[float] = []

    def route(self, call, view):
        t = time.perf_counter()
        i = self._inner.route(call, view)
        self.times_s.append(time.perf_counter() - t)
        return i

    def __getattr__(self, name):
        return getattr(self._inner, name)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(config_parser(Config, __doc__.splitlines()[0]), Config, argv)
    from optsched.compare.replication import build_replication
    from optsched.pipelines.session_routing import build_router, plan_from_workload
    from optsched.policies.router_cache_aware import CacheAwareRouter
    from optsched.reproduce.provenance import write_run
    from optsched.sim import ClusterConfig, InstanceConfig, simulate
    from optsched.solvers import SolverOptions

    from optsched.pipelines.session_routing import config_from_parameters

    n = 8 if cfg.quick else cfg.sessions
    spec = f"agentx:sessions={n},variant=256k"
    wl, _ = build_replication(spec, cfg.seed, cfg.load, 131_072, 0, 6)
    train, _ = build_replication(spec, cfg.seed + 1, cfg.load, 131_072, 0, 6)
    cl = ClusterConfig((InstanceConfig(role="colocated", gpu="h200-sxm", model="llama-3-70b", tp=4,
                                       count=cfg.instances),))
    plan, _ = plan_from_workload(train, "h200-sxm", "llama-3-70b", 4, SolverOptions(threads=1), cfg.seed,
                                 n_instances=cfg.instances, cluster=cl)
    routers = {"cache_aware": _Timed(CacheAwareRouter()),
               "session": _Timed(build_router(config_from_parameters(plan.parameters)))}
    res = {}
    for name, r in routers.items():
        simulate(wl, cl, router=r, seed=cfg.seed)
        ms = 1e3 * np.asarray(r.times_s)
        res[name] = {"decisions": int(ms.size), "median_ms": float(np.median(ms)), "p99_ms": float(np.quantile(ms, 0.99)),
                     "max_ms": float(ms.max()), "mean_ms": float(ms.mean())}
    res["ratio_median_session_over_cache_aware"] = res["session"]["median_ms"] / res["cache_aware"]["median_ms"]
    lines = ["| router | decisions | median (ms) | P99 (ms) | max (ms) |", "|---|---|---|---|---|"]
    for name in routers:
        r = res[name]
        lines.append(f"| {name} | {r['decisions']} | {r['median_ms']:.3g} | {r['p99_ms']:.3g} | {r['max_ms']:.3g} |")
    text = "\n".join(lines) + f"\n\nsession / cache-aware (median): {res['ratio_median_session_over_cache_aware']:.1f}x\n"
    print(text)
    write_run(Path(cfg.out), res, text, {k: getattr(cfg, k) for k in Config.__dataclass_fields__}, sys.argv[1:] if argv is None else argv,
              cfg.seed, ("workload",))
    return 0


if __name__ == "__main__":
    sys.exit(main())
