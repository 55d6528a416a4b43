"""Which eviction order could bring the residency rules within 10% of the hindsight optimum? Replays eviction
orders on the priced slot model of each evaluated seed (`optsched.models.residency_priced_slots`), every one
with the load-priced rule's keep / offload / drop decisions, against the optimum that
``experiments/residency_hindsight.py`` solved (read from its ``summary.json``; no MILP is solved here).

Orders (smaller key evicted first; whole pauses, ties by earliest start):

- ``lru``: earliest pause start (the prefix cache's LRU); the load-priced rule as shipped.
- ``priced (median)`` / ``priced (mean)``: `PricedEvictionResidency`'s static key
  (c0 + c1 n)/n - pi_full (s0 + E[D_c]), E[D_c] the median / mean training pause of tool class c.
- ``priced (residual life)``: the same price with the empirical mean residual pause of the class given
  the time already paused, E[D - e | D > e], e = now - s0 (training pauses of the class, pooled when
  a class has none; 0 when no training pause is as long): a dynamic key (`eviction_key_at`).
- ``oracle order``: the pause's TRUE end s0 + D (Belady's order with hindsight; not an online rule), the
  bound on what any eviction order alone can reach with these decisions.

The training pauses, price table and pi_full = pi(1.0) come from the hindsight run's training solve
(``derived`` in the summary; ``train_seed`` rebuilds its replication). Prints a table of cost / optimum.

Usage: .venv/bin/python experiments/residency_eviction_orders.py --summary runs/residency/summary.json
       --source agentx:sessions=16 --instances 1 --tp 2 --max-pauses 300 --slot-s 10
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import ClassVar

import numpy as np
from optsched.models.residency_priced_slots import replay_priced

from optsched.compare.replication import build_replication
from optsched.cost import CostModel
from optsched.cost.catalog import load_model
from optsched.pipelines.residency import cost_coefficients
from optsched.pipelines.residency_priced_solve import priced_instance
from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.policies.residency_priced_evict import PricedEvictionResidency
from optsched.policies.residency_ttl import tool_durations_from_calls


class ResidualLifeEviction(PricedEvictionResidency):
    """Dynamic key (c0 + c1 n)/n - pi_full * E[D_c - e | D_c > e] from sorted training pauses ``samples``."""

    samples: ClassVar[dict] = {}

    def eviction_key_at(self, call, n_tokens: int, start_s: float, now_s: float) -> float:
        xs = self.samples[call.tool] if call.tool in self.samples else self.samples["*"]
        e = max(0.0, now_s - start_s)
        tail = xs[xs > e]
        rem = float(np.mean(tail) - e) if len(tail) else 0.0
        c0, c1 = self.pcie_coef_s
        return (c0 + c1 * n_tokens) / n_tokens - self.eviction_price_s_per_token_s * rem


class OracleOrder(LoadPricedResidency):
    """Evicts the pause with the latest TRUE end first (hindsight; a bound, not an online rule)."""

    truth: ClassVar[dict] = {}

    def eviction_order(self) -> str:
        return "priced"

    def eviction_key(self, call, n_tokens: int, start_s: float) -> float:
        return -(start_s + self.truth[call.call_id])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--summary", required=True, help="summary.json of an experiments/residency_hindsight.py run")
    p.add_argument("--source", default="agentx:sessions=16",
                   help="which source of that run to replay (its --sources entry; default agentx:sessions=16)")
    same = "; the same as the hindsight run's"
    p.add_argument("--instances", type=int, default=1, help=f"instances of the priced slot model (default 1{same})")
    p.add_argument("--tp", type=int, default=2,
                   help=f"tensor-parallel degree of the llama-3-70b H200 cost model (default 2{same})")
    p.add_argument("--max-pauses", type=int, default=300,
                   help=f"tool pauses kept per seed, the first N by start (default 300{same})")
    p.add_argument("--slot-s", type=float, default=10.0,
                   help=f"slot length of the priced residency model in s (default 10{same})")
    a = p.parse_args(argv)
    try:
        run = next(r for r in json.loads(Path(a.summary).read_text()) if r["source"] == a.source)
    except (OSError, ValueError, StopIteration) as exc:
        print(f"residency_eviction_orders: {a.summary}: no readable result for source {a.source!r} ({exc})",
              file=sys.stderr)
        return 2
    cm = CostModel.from_names("h200-sxm", "llama-3-70b", tp=a.tp)
    ctx = load_model("llama-3-70b").max_context_tokens
    train, _ = build_replication(a.source, run["train_seed"], 1.0, ctx)
    dur = {k: np.sort(np.asarray(v, float)) for k, v in tool_durations_from_calls(train.calls()).items() if len(v)}
    dur["*"] = np.sort(np.concatenate(list(dur.values())))
    table = tuple(tuple(r) for r in run["derived"]["duals_used"]["price_table"])
    coef = cost_coefficients(cm)
    base = {"price_table": table, "pcie_coef_s": coef["pcie_coef_s"], "recompute_coef_s": coef["recompute_coef_s"],
            "block_size": 16}
    median = {k: float(np.median(v)) for k, v in dur.items()}
    mean = {k: float(np.mean(v)) for k, v in dur.items()}
    p_full = LoadPricedResidency(table).price(1.0)
    print(f"pi_full = {p_full:.4g} s/token-s; training pauses {len(dur['*'])}")
    names = ["lru", "priced (median)", "priced (mean)", "priced (residual life)", "oracle order"]
    print("| seed | optimum (s) | " + " | ".join(names) + " |\n" + "|---" * (2 + len(names)) + "|")
    for h in run["hindsight"]:
        wl, _ = build_replication(a.source, h["seed"], 1.0, ctx)
        inst, calls = priced_instance(wl, cm, n_instances=a.instances, slot_s=a.slot_s, max_pauses=a.max_pauses)
        rl = ResidualLifeEviction(expected_pause_s=median, eviction_price_s_per_token_s=p_full, **base)
        rl.samples = dur
        orc = OracleOrder(expected_pause_s=median, **base)
        orc.truth = {c.call_id: q.duration_s for c, q in zip(calls, inst.pauses, strict=True)}
        rules = [LoadPricedResidency(expected_pause_s=median, **base),
                 PricedEvictionResidency(expected_pause_s=median, eviction_price_s_per_token_s=p_full, **base),
                 PricedEvictionResidency(expected_pause_s=mean, eviction_price_s_per_token_s=p_full, **base), rl, orc]
        ratios = [replay_priced(inst, calls, r, 16)[1] / h["optimum_s"] for r in rules]
        print(f"| {h['seed']} | {h['optimum_s']:.4g} | " + " | ".join(f"{x:.3f}" for x in ratios) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
