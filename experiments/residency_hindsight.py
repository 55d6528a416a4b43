"""KV residency on an agentic workload: hindsight optimum vs LRU / TTL / InferCept-style / ski-rental rules.

AgentX-like sessions (`optsched.workload.gen_agentx.generate_agentx`, test stream "residency_test" of
``--seed``) give the tool pauses (`optsched.pipelines.residency.pauses_from_workload`); the hindsight
slot MILP (`optsched.models.residency`) is solved with HiGHS and every policy is replayed on the same
slot model (`optsched.models.residency_slots`). The optimized TTL rule's think-time samples come from a
separate training workload (stream "residency_train"), so its thresholds are not fitted to the test
pauses. Baseline parameters: Continuum-style TTL (`residency_ttl.TTLResidency`) with the same HBM price
and a hit saving the DRAM round trip (then = offload_dram); InferCept (`residency_infercept`, cost-model
fit, oracle pause length as in its paper); LRU = keep until HBM pressure evicts (then drop).
Writes ``summary.json`` and ``provenance.json`` to ``--out``.

Usage: .venv/bin/python experiments/residency_hindsight.py --sessions 6 --slot-s 2 --out runs/residency_hindsight
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from optsched.models.residency_slots import path_cost
from optsched.pipelines.residency import solve_workload, ttl_opt_policy
from optsched.reproduce.provenance import collect_provenance, stream_seed
from optsched.solvers import SolverOptions

from optsched.cost import CostModel
from optsched.policies.base import ResidencyDecision
from optsched.policies.residency_infercept import InferceptResidency
from optsched.policies.residency_lru import LRUResidency
from optsched.policies.residency_ttl import TTLResidency, tool_durations_from_calls
from optsched.workload.gen_agentx import generate_agentx

logger = logging.getLogger("residency_hindsight")


class LRUOffloadResidency:
    """LRU whose HBM evictions go to DRAM (vLLM CPU offload / LMCache style) instead of being dropped."""

    name = "lru_offload"

    def on_pause(self, call, kv_blocks, view) -> ResidencyDecision:
        return ResidencyDecision("keep", then="offload_dram")


@dataclass(frozen=True, slots=True)
class Config:
    sessions: int = 6
    train_sessions: int = 20
    seed: int = 0
    slot_s: float = 2.0
    hbm_share: float = 0.5
    gpu: str = "h200-sxm"
    model: str = "llama-3-70b"
    tp: int = 4
    time_limit_s: float = 600.0
    out: str = "runs/residency_hindsight"


def clairvoyant_uncapacitated(inst) -> float:
    """sum over pauses of the cheapest single-tier path knowing the pause length, ignoring capacities
    (a lower bound on the MILP optimum; with ample capacity equal to it)."""
    total = 0.0
    for j in range(len(inst.pauses)):
        n = len(inst.slots(j))
        total += min(path_cost(inst, j, [k] * n) for k in range(4))
    return total


def run(cfg: Config) -> dict:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    cm = CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
    test = generate_agentx(cfg.sessions, np.random.default_rng(stream_seed(cfg.seed, "residency_test")))
    train = generate_agentx(cfg.train_sessions, np.random.default_rng(stream_seed(cfg.seed, "residency_train")))
    durations = tool_durations_from_calls(train.calls())
    bs = test.block_size  # the workload's own block (AgentX-like: 512 tokens), as the door uses
    pcie_block = 2.0 * float(cm.kv_transfer_time(bs, "pcie"))
    policies = {
        "lru": LRUResidency(),
        "lru_offload_dram": LRUOffloadResidency(),
        "ttl_continuum": TTLResidency(durations, reload_s_per_block=pcie_block,
                                      price_s_per_block_s=bs / cm.kv_capacity_tokens(), then="offload_dram"),
        "infercept": InferceptResidency.from_cost_model(cm, bs),
        "ski_break_even": ttl_opt_policy(durations, cm, bs, mode="break_even"),
        "ski_randomized": ttl_opt_policy(durations, cm, bs, mode="randomized", seed=cfg.seed),
        "ttl_opt_slotted": ttl_opt_policy(durations, cm, bs, mode="optimized", slot_s=cfg.slot_s),
    }
    # the door adds the optimized rule ("ttl_opt") to these and solves the hindsight MILP on the same pauses
    out_ = solve_workload(test, cm, SolverOptions(time_limit_s=cfg.time_limit_s, mip_gap=1e-6),
                          cost_model_id=f"{cfg.gpu}/{cfg.model}/tp{cfg.tp}", seed=cfg.seed, slot_s=cfg.slot_s,
                          hbm_share=cfg.hbm_share, durations=durations, rules=policies, ttl_opt_name="ttl_opt")
    cmp_, inst = out_.comparison, out_.instance
    r = cmp_.result
    summary = {"pauses": len(out_.pauses), "block_size": bs, "status": r.status, "optimum_s": r.objective, "bound_s": r.bound, "gap": r.gap,
               "solve_s": r.wall_time_s, "clairvoyant_uncapacitated_s": clairvoyant_uncapacitated(inst),
               "capacity_tokens": list(inst.capacity_tokens), "policies": {}}
    for name, cost in cmp_.policy_cost_s.items():
        summary["policies"][name] = {"cost_s": cost, "ratio": cost / r.objective if r.objective else None}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    prov = collect_provenance(asdict(cfg), sys.argv, cfg.seed, ["residency_test", "residency_train"])
    (out / "provenance.json").write_text(json.dumps(prov, indent=2))
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f, d in asdict(Config()).items():
        p.add_argument(f"--{f.replace('_', '-')}", type=type(d), default=d)
    cfg = Config(**vars(p.parse_args(argv)))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("pyomo").setLevel(logging.WARNING)
    print(json.dumps(run(cfg), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
