"""Which policies a comparison runs: every baseline router of the registry plus every optimized policy the
project can derive for the workload (kept behind `derive_optimized`, the one function to extend).

Optimized today (routing, from the pipelines' routing door): ``price`` — the price router whose rho
comes from the LP duals of one window MILP of the workload — and ``rolling_milp`` — the rolling-horizon
MILP router on the same prices. They are derived ONCE from a training replication (seed stream
"train" of the comparison's base seed, load 1), never from an evaluated seed, so no evaluated run sees
its own trace in the solve.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["OPTIMIZED", "baseline_specs", "derive_optimized", "select"]

log = logging.getLogger(__name__)

OPTIMIZED = ("price", "rolling_milp")


def baseline_specs() -> list[dict[str, Any]]:
    """``{"name", "kind": "heuristic", "router"}`` for every registry router."""
    from optsched.compare.adapter import policy_names

    return [{"name": n, "kind": "heuristic", "router": n} for n in policy_names("router")]


def derive_optimized(source: str, cluster: dict[str, Any], base_seed: int, sizes: tuple[int, int], window_calls: int,
                     time_limit_s: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(optimized policy specs, solve record) for the workload: the routing Plan solved on the training
    replication. Raises what the routing door raises."""
    from optsched.compare.adapter import price_plan_from_workload
    from optsched.compare.replication import build_replication, stream

    from optsched.cost.catalog import load_model

    train_seed = int(stream(base_seed, "train").integers(2**31))
    wl, _ = build_replication(source, train_seed, 1.0, load_model(cluster["model"]).max_context_tokens, *sizes)
    doc, rec = price_plan_from_workload(wl, cluster["gpu"], cluster["model"], int(cluster["tp"]),
                                        int(cluster["instances"]), window_calls, time_limit_s, train_seed)
    rec = {**rec, "train_seed": train_seed, "rho_s_per_token": doc["parameters"].get("recompute_s_per_token")}
    specs = [{"name": "price", "kind": "optimized", "router": "plan", "plan": doc},
             {"name": "rolling_milp", "kind": "optimized", "router": "rolling", "plan": doc}]
    return specs, rec


def select(names: list[str] | None, baselines: list[dict[str, Any]], optimized: list[dict[str, Any]]
           ) -> list[dict[str, Any]]:
    """The specs named in ``names`` (None: all), in the given order. Raises ValueError for an unknown name."""
    every = {p["name"]: p for p in baselines + optimized}
    if names is None:
        return list(every.values())
    bad = [n for n in names if n not in every]
    if bad:
        raise ValueError(f"--policies: unknown {', '.join(bad)}; known: {', '.join(every)}")
    return [every[n] for n in names]
