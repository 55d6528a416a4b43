"""Tool pauses of a workload, the cost fits and the online baseline rules every residency solve starts from
(the constant-price door `optsched.pipelines.residency` and the load-priced solve
`optsched.pipelines.residency_priced_solve`).

Pauses: a call with children and ``think_time_s > 0`` leaves its session's KV (input + output tokens)
paused for the think time; pause start times come from the uncontended closed-loop timeline
(`optsched.workload.timeline.uncontended_timeline`). Transfer and recompute times of a pause are the cost
model's (``CostModel.kv_transfer_time(n, "pcie"/"ssd")``, ``CostModel.recompute_time(n)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from optsched.cost import CostModel
from optsched.models.residency import Pause
from optsched.policies.residency_infercept import InferceptResidency
from optsched.policies.residency_lru import LRUResidency
from optsched.policies.residency_ttl import TTLResidency
from optsched.workload.timeline import uncontended_timeline
from optsched.workload.types import Call, Workload

__all__ = ["NoToolPauses", "cost_coefficients", "pauses_from_workload", "residency_rules"]


class NoToolPauses(ValueError):
    """The workload has no tool pause (no call with children and think time): nothing to decide."""


def pauses_from_workload(wl: Workload, cm: CostModel) -> tuple[list[Pause], list[Call]]:
    """(pauses, call before each pause) on the uncontended timeline (module docstring)."""
    pauses: list[Pause] = []
    calls: list[Call] = []
    times = uncontended_timeline(wl, cm)
    for s in wl.sessions:
        kids = s.children()
        finish = {c.call_id: times[c.call_id][1] for c in s.calls}
        for c in s.calls:
            if kids[c.call_id] and c.think_time_s > 0:
                n = c.input_tokens + c.output_tokens
                pauses.append(Pause(finish[c.call_id], c.think_time_s, n, float(cm.kv_transfer_time(n, "pcie")),
                                    float(cm.kv_transfer_time(n, "ssd")), float(cm.recompute_time(n)), c.tool))
                calls.append(c)
    return pauses, calls


def cost_coefficients(cm: CostModel, max_tokens: int = 1_000_000) -> dict[str, tuple[float, ...]]:
    """Least-squares fits on 64 sizes in [1k, max_tokens]: pcie/ssd linear, recompute quadratic (s)."""
    n = np.linspace(1024, max_tokens, 64)
    lin = np.stack([np.ones_like(n), n], axis=1)
    quad = np.stack([np.ones_like(n), n, n * n], axis=1)

    def fit(a, y):
        return tuple(float(v) for v in np.maximum(np.linalg.lstsq(a, np.asarray(y, float), rcond=None)[0], 0.0))

    return {"pcie_coef_s": fit(lin, cm.kv_transfer_time(n, "pcie")), "ssd_coef_s": fit(lin, cm.kv_transfer_time(n, "ssd")),
            "recompute_coef_s": fit(quad, cm.recompute_time(n))}


def residency_rules(cm: CostModel, durations: Mapping[str, Sequence[float]], block_size: int) -> dict[str, object]:
    """The online baselines compared with the optimum, priced per ``block_size``-token block: LRU keep,
    Continuum-style TTL (same HBM price as the slot model, a hit saves the DRAM round trip, then offload to
    DRAM) and InferCept min-waste (cost-model fit). The optimized TTL rule is added by the solve
    (`optsched.pipelines.residency.solve_workload`, `optsched.pipelines.residency_priced_solve`)."""
    bs = int(block_size)
    return {
        "lru": LRUResidency(),
        "ttl (Continuum-style)": TTLResidency(durations, reload_s_per_block=2.0 * float(cm.kv_transfer_time(bs, "pcie")),
                                              price_s_per_block_s=bs / cm.kv_capacity_tokens(), then="offload_dram"),
        "infercept": InferceptResidency.from_cost_model(cm, bs),
    }
