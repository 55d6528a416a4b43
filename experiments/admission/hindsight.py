"""Hindsight benchmark for prefill admission: online rules vs the proven MILP optimum.

For ``--instances`` random Jaillet-style instances (`optsched.pipelines.admission.jaillet_instance`,
instance k drawn from the named stream "admission_instance" of ``--seed`` spawned k times), every
online rule of `optsched.models.admission_online` is simulated on the unit-round model and the
hindsight MILP (`optsched.models.admission_hindsight`) is solved with HiGHS. Writes to ``--out``:
``results.csv`` (one row per instance: M, n, status, optimum, bound, solve time, each rule's latency),
``summary.json`` (mean / worst ratio per rule over instances with a proven optimum, solve times) and
``provenance.json`` (argv, config, git revision, package versions, seed).

Usage: .venv/bin/python experiments/admission/hindsight.py --instances 50 --requests 7 --out runs/admission_hindsight [--rescore]
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from optsched.config_cli import arg, config_parser, parse_config
from optsched.models.admission_online import (
    DIAGNOSTICS,
    RULES,
    RuleConfig,
    simulate_rounds,
    total_latency,
)
from optsched.models.admission_rounds import RoundState
from optsched.pipelines.admission import compare_rules_to_optimum, jaillet_instance
from optsched.replicate import stream_seed
from optsched.reproduce.provenance import collect_provenance
from optsched.solvers import SolverOptions

logger = logging.getLogger("admission_hindsight")


@dataclass(frozen=True, slots=True)
class Config:
    instances: int = arg(50, "random Jaillet-style instances to generate and solve (instance k: the k-th child "
                             "of stream 'admission_instance' of --seed)")
    requests: int = arg(8, "requests per instance (prompt 1-5 tokens, output 1..M - prompt tokens, KV memory M "
                           "of 30-50 tokens)")
    arrival_model: int = arg(2, "2: Poisson arrivals (rate 0.5-1.5 per round); 1: every request at round 0 "
                                "(Jaillet et al.'s two synthetic arrival models)")
    seed: int = arg(0, "root seed of the instance stream (>= 0)")
    time_limit_s: float = arg(300.0, "HiGHS time limit per hindsight MILP (s)")
    mip_gap: float = arg(1e-4, "relative MIP gap at which HiGHS stops (an instance counts only when proven optimal)")
    out: str = arg("runs/admission_hindsight", "output folder (results.csv, summary.json, provenance.json)")
    rescore: bool = arg(False, "recompute the rule latencies of the existing results.csv in --out on the "
                               "regenerated instances (no MILP solves; --seed/--arrival-model must match the run)")

    def __post_init__(self) -> None:
        if self.instances < 1 or self.requests < 1:
            raise ValueError(f"instances and requests must be >= 1, got {self.instances}, {self.requests}")


def proven_optimal(objective: float | None, bound: float | None) -> bool:
    """Integer objective: optimal iff ceil(bound) >= objective (bound within < 1 of the incumbent)."""
    return objective is not None and bound is not None and math.ceil(bound - 1e-6) >= round(objective)


def decision_rounds(reqs, memory: int, starts) -> int:
    """Rounds at which a rule had a decision to make: some arrived, unstarted request fits next to the
    requests started earlier (the rounds where `simulate_rounds` calls a rule's lookahead)."""
    count = 0
    for t in range(max(starts) + 1):
        state = RoundState(reqs, memory)
        for i, p in enumerate(starts):
            if p < t:
                state.start(i, p)
        waiting = [i for i, r in enumerate(reqs) if r.arrival <= t and starts[i] >= t]
        count += any(state.fits(i, t) for i in waiting)
    return count


def summarize(df: pd.DataFrame, requests: int) -> dict:
    """Mean / worst ratio to the proven optimum per rule and diagnostic, solve-time statistics."""
    good = df[df.proven_optimal]
    summary = {"instances": len(df), "proven_optimal": len(good), "requests": requests,
               "solve_s_mean": float(df.solve_s.mean()), "solve_s_median": float(df.solve_s.median()),
               "solve_s_max": float(df.solve_s.max()), "rules": {}, "diagnostics": {}}
    for group, names in (("rules", RULES), ("diagnostics", DIAGNOSTICS)):
        for name in names:
            if f"lat_{name}" not in good:
                continue
            ratio = good[f"lat_{name}"] / good.optimum
            summary[group][name] = {"mean_ratio": float(ratio.mean()), "worst_ratio": float(ratio.max()),
                                    "optimal_share": float((ratio <= 1 + 1e-9).mean())}
            if f"sim_s_{name}" in good:  # written by --rescore: wall s of the rule's whole online run
                summary[group][name]["run_s_mean"] = float(good[f"sim_s_{name}"].mean())
                summary[group][name]["run_s_max"] = float(good[f"sim_s_{name}"].max())
            if f"decisions_{name}" in good:  # wall ms per decision round, over all instances
                summary[group][name]["decision_ms_mean"] = float(
                    1e3 * good[f"sim_s_{name}"].sum() / max(1.0, good[f"decisions_{name}"].sum()))
    return summary


def _check_stored_config(cfg: Config, out: Path) -> None:
    """Raise ValueError when ``--seed`` / ``--arrival-model`` differ from the run in ``out`` (provenance.json).

    The instances are regenerated from these two, and a wrong arrival model keeps every M (same draws), so
    without this check the rules were rescored on other instances than the stored optima (ratios < 1).
    """
    prov = out / "provenance.json"
    if not prov.is_file():
        raise FileNotFoundError(f"{prov}: not found; --rescore needs the run's provenance (seed, arrival model)")
    stored = json.loads(prov.read_text()).get("config", {})
    for field in ("seed", "arrival_model"):
        if field in stored and stored[field] != getattr(cfg, field):
            flag = "--" + field.replace("_", "-")
            raise ValueError(f"{prov}: the run used {flag} {stored[field]}, got {getattr(cfg, field)}; "
                             f"rescore with {flag} {stored[field]}")


def rescore(cfg: Config) -> dict:
    """Recompute every rule's latency on the regenerated instances of an existing run (same seed and
    arrival model as stored in its provenance.json, else ValueError)."""
    out = Path(cfg.out)
    if not (out / "results.csv").is_file():
        raise FileNotFoundError(f"{out / 'results.csv'}: not found; run without --rescore first")
    _check_stored_config(cfg, out)
    df = pd.read_csv(out / "results.csv")
    seeds = stream_seed(cfg.seed, "admission_instance").spawn(int(df.instance.max()) + 1)
    for idx, row in df.iterrows():
        reqs, memory = jaillet_instance(np.random.default_rng(seeds[int(row.instance)]), int(row.requests),
                                          cfg.arrival_model)
        if memory != row.memory_tokens:
            raise ValueError(f"instance {row.instance}: regenerated M={memory} != stored {row.memory_tokens} (seed?)")
        for name in RULES + DIAGNOSTICS:
            t0 = time.perf_counter()  # decision time of the whole online run of the rule on this instance
            starts = simulate_rounds(reqs, memory, RuleConfig(name))
            df.loc[idx, f"sim_s_{name}"] = time.perf_counter() - t0
            df.loc[idx, f"lat_{name}"] = total_latency(reqs, starts)
            df.loc[idx, f"decisions_{name}"] = decision_rounds(reqs, memory, starts)
    df.to_csv(out / "results.csv", index=False)
    summary = summarize(df, int(df.requests.max()))  # the stored run's size, not this call's --requests
    summary["arrival_model"] = cfg.arrival_model
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def run(cfg: Config) -> dict:
    if cfg.rescore:
        return rescore(cfg)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    opts = SolverOptions(time_limit_s=cfg.time_limit_s, mip_gap=cfg.mip_gap, warm_start=True)
    seeds = stream_seed(cfg.seed, "admission_instance").spawn(cfg.instances)
    prov = collect_provenance(asdict(cfg), sys.argv, cfg.seed, ["admission_instance"])
    (out / "provenance.json").write_text(json.dumps(prov, indent=2))  # first: an interrupted run can be rescored
    rows = []
    for k, ss in enumerate(seeds):
        reqs, memory = jaillet_instance(np.random.default_rng(ss), cfg.requests, cfg.arrival_model)
        cmp_ = compare_rules_to_optimum(reqs, memory, opts, rules=RULES + DIAGNOSTICS)
        r = cmp_.result
        ok = proven_optimal(r.objective, r.bound)
        row = {"instance": k, "memory_tokens": memory, "requests": len(reqs), "status": r.status,
               "proven_optimal": ok, "optimum": r.objective, "bound": r.bound, "solve_s": r.wall_time_s,
               "build_s": cmp_.build_time_s}
        row.update({f"lat_{name}": v for name, v in cmp_.rule_latency.items()})
        rows.append(row)
        pd.DataFrame(rows).to_csv(out / "results.csv", index=False)  # partial results survive an interrupt
        logger.info("instance %d: M=%d %s opt=%s %.1fs", k, memory, r.status, r.objective, r.wall_time_s)
    df = pd.DataFrame(rows)
    df.to_csv(out / "results.csv", index=False)
    summary = summarize(df, cfg.requests)
    summary["arrival_model"] = cfg.arrival_model
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def main(argv: list[str] | None = None) -> int:
    p = config_parser(Config, __doc__.splitlines()[0])
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        summary = run(parse_config(p, Config, argv))
    except (ValueError, FileNotFoundError) as exc:  # bad input: one line, exit 2
        p.error(str(exc))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
