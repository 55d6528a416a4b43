"""KV residency: how far online rules are from the best rule of the 10-s slot-start class can do, and from hindsight.

The class of every statement here: rules of the priced slot model (``--slot-s``, 10 s by default) that fix each
pause's tier at slot starts, demotion only. `experiments/residency/bound_wide.py` bounds the wider class (slots down
to 1 s, prefetch DRAM -> HBM, eviction reacting to arrivals).

For the AgentX-like source (the one whose pause law is known: `AgentXParams.gap_cdf`), on the priced slot model
(`optsched.models.residency_priced`, one instance, HBM tight):

1. Training (stream "train" of ``--base-seed``, never an evaluated seed): the load-priced rule and the
   ``load_priced_search`` eviction order, derived as in ``experiments/residency/imitation.py``
   (`solve_priced`, `ordered_plan` on ``--rule-train-reps`` replications); the information-relaxation penalty
   lam (`optsched.pipelines.residency_bound.fit_penalty` on ``--bound-train-reps`` OTHER replications of the
   same stream).
2. Every evaluated seed ``base_seed .. base_seed + seeds - 1``: the hindsight MILP optimum H, the relaxation
   bound L (penalized MILP, its proven lower bound), the replay cost of LRU, load_priced and
   load_priced_search, and the penalty each rule's paths pay (mean 0 for an online rule: the check that the
   hazards' law is the generator's).

Statistics (`optsched.replicate`, Student-t 95% CIs over seeds, differences paired by seed): the mean of
each; ratios of means; L - H (is the relaxation tighter than hindsight?), L - 1.1 H (> 0 beyond the CI proves
that no rule of the class is within 10% of the hindsight optimum in expectation), rule - L and rule - 1.1 L (< 0
beyond the CI: the rule is within 10% of the best online cost). E[L] <= E[cost of every rule of the class].

Usage: .venv/bin/python experiments/residency/bound.py --seeds 40 --out runs/residency_bound
"""

from __future__ import annotations

import logging
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from optsched.compare.replication import build_replication
from optsched.config_cli import arg, config_parser, parse_config
from optsched.cost import CostModel
from optsched.cost.catalog import load_model
from optsched.models.residency_priced import build_priced_residency
from optsched.models.residency_priced_slots import replay_priced
from optsched.pipelines.residency_bound import (
    FEATURES,
    fit_penalty,
    parse_lam,
    penalty_of_paths,
    relaxation_bound,
)
from optsched.pipelines.residency_imitation_fit import ordered_plan
from optsched.pipelines.residency_priced_solve import priced_instance, solve_priced
from optsched.policies.residency_imitation import ImitationEvictionResidency
from optsched.policies.residency_load_priced import LoadPricedResidency
from optsched.policies.residency_lru import LRUResidency
from optsched.policies.residency_ttl import tool_durations_from_calls
from optsched.replicate import mean_ci, paired_difference, stream
from optsched.reproduce.provenance import write_run
from optsched.solvers import SolverOptions, solve
from optsched.workload.gen_agentx import AGENTX_VARIANTS

logger = logging.getLogger("residency_bound")


@dataclass(frozen=True, slots=True)
class Config:
    sessions: int = arg(16, "AgentX-like sessions per replication (source agentx:sessions=N,variant=V)")
    variant: str = arg("full", "AgentX variant, whose pause law gap_cdf the bound uses: full, 256k or full-iid-gaps (independent gaps, on which the bound is exact)")
    seeds: int = arg(40, "evaluated seeds, --base-seed .. --base-seed + N - 1 (>= 2, for a CI)")
    base_seed: int = arg(0, "first evaluated seed; its stream 'train' draws the training replications (>= 0)")
    rule_train_reps: int = arg(6, "training replications of the load-priced rule and the load_priced_search order")
    bound_train_reps: int = arg(12, "other training replications on which the penalty weights lam are fitted")
    fit_iters: int = arg(8, "cutting-plane iterations of the penalty fit (each solves the bound on every "
                            "bound training replication)")
    instances: int = arg(1, "serving instances of the priced slot model (sessions homed round-robin)")
    slot_s: float = arg(10.0, "slot length of the priced residency model (s)")
    max_pauses: int = arg(300, "tool pauses kept per replication (the first N by start time)")
    gpu: str = arg("h200-sxm", "catalog GPU of the cost model")
    model: str = arg("llama-3-70b", "catalog model of the cost model (its context window cuts the sessions)")
    tp: int = arg(2, "tensor-parallel degree of each instance")
    time_limit_s: float = arg(300.0, "solver time limit per LP/MILP (s)")
    lam: str = arg("", "information-relaxation penalty weights, comma-separated in FEATURES order (constant, "
                       "over_subscribed, near_full, demand, first_slot; dimensionless, multiples of a pause's "
                       "eviction cost), e.g. an earlier run's: no fit; empty: fit them on --bound-train-reps")
    rules: int = arg(1, "1: also train and replay the rules (lru, load_priced, load_priced_search); 0: H and L "
                        "only (more seeds for the bound)")
    out: str = arg("runs/residency_bound", "output folder (summary.json, results.md, provenance.json)")


def _est(xs: list[float]) -> dict:
    return mean_ci(xs).to_dict()


def _diff(x: list[float], y: list[float]) -> dict:
    d = paired_difference(x, y)
    lo, hi = d.to_dict()["ci95"]
    return {**d.to_dict(), "sign": "> 0" if lo > 0 else "< 0" if hi < 0 else "CI contains 0"}


def run(cfg: Config) -> dict:
    """Train, evaluate every seed, summarize (module docstring)."""
    source = f"agentx:sessions={cfg.sessions},variant={cfg.variant}"
    cdf = AGENTX_VARIANTS[cfg.variant].gap_cdf
    cm = CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
    ctx = load_model(cfg.model).max_context_tokens
    opts = SolverOptions(time_limit_s=cfg.time_limit_s, mip_gap=1e-4, threads=1)
    kw = {"n_instances": cfg.instances, "slot_s": cfg.slot_s, "max_pauses": cfg.max_pauses}
    train_seeds = [int(s) for s in stream(cfg.base_seed, "train").integers(2**31, size=cfg.rule_train_reps
                                                                            + cfg.bound_train_reps)]
    rule_seeds, bound_seeds = train_seeds[:cfg.rule_train_reps], train_seeds[cfg.rule_train_reps:]
    rules = _train_rules(cfg, source, rule_seeds, cm, ctx, opts, kw) if cfg.rules else dict
    if cfg.lam:
        lam = parse_lam(cfg.lam)
        pen = {"features": list(FEATURES), "lam": list(lam), "fixed": True}
        logger.info("penalty lam %s (%s), fixed by --lam", lam, FEATURES)
    else:
        binst = [priced_instance(build_replication(source, s, 1.0, ctx)[0], cm, **kw)[0] for s in bound_seeds]
        fit = fit_penalty(binst, cdf, opts, iters=cfg.fit_iters)
        lam = fit.lam
        pen = {"features": list(FEATURES), "lam": list(fit.lam), "mean_training_bound_s": fit.mean_bound_s,
               "history": [[list(x), m] for x, m in fit.history], "training_status": list(fit.training_status)}
        logger.info("penalty lam %s (%s), mean training bound %.4f s", fit.lam, FEATURES, fit.mean_bound_s)
    rows = []
    for seed in range(cfg.base_seed, cfg.base_seed + cfg.seeds):
        wl, _ = build_replication(source, seed, 1.0, ctx)
        inst, calls = priced_instance(wl, cm, **kw)
        h = solve(build_priced_residency(inst), opts)
        if h.status != "optimal":
            raise RuntimeError(f"seed {seed}: hindsight MILP ended '{h.status}'; raise --time-limit-s")
        b = relaxation_bound(inst, lam, cdf, opts)
        row = {"seed": seed, "pauses": len(inst.pauses), "hindsight_s": float(h.objective), "bound_s": b.bound_s,
               "bound_status": b.status, "bound_gap": b.gap, "cost_s": {}, "penalty_s": {}}
        for name, rule in rules().items():
            paths, cost = replay_priced(inst, calls, rule, int(wl.block_size))
            row["cost_s"][name] = cost
            row["penalty_s"][name] = penalty_of_paths(inst, paths, lam, cdf)
        logger.info("seed %d: H %.3f L %.3f %s", seed, row["hindsight_s"], row["bound_s"],
                    {k: round(v, 3) for k, v in row["cost_s"].items()})
        rows.append(row)
    H = [r["hindsight_s"] for r in rows]
    L = [r["bound_s"] for r in rows]
    summary = {"hindsight_s": _est(H), "bound_s": _est(L), "bound_minus_hindsight": _diff(L, H),
               "bound_minus_1.1_hindsight": _diff(L, [1.1 * x for x in H]),
               "ratio_of_means_bound_to_hindsight": _ratio(L, H), "rules": {}}
    for name in rules():
        c = [r["cost_s"][name] for r in rows]
        summary["rules"][name] = {
            "cost_s": _est(c), "ratio_of_means_to_hindsight": _ratio(c, H), "ratio_of_means_to_bound": _ratio(c, L),
            "minus_bound": _diff(c, L), "minus_1.1_bound": _diff(c, [1.1 * x for x in L]),
            "penalty_mean_s": _est([r["penalty_s"][name] for r in rows])}
    return {"config": asdict(cfg), "source": source, "rule_train_seeds": rule_seeds, "bound_train_seeds": bound_seeds,
            "penalty": pen, "search_weights": getattr(rules, "search_weights", None), "summary": summary, "per_seed": rows}


def _train_rules(cfg: Config, source: str, rule_seeds: list[int], cm: CostModel, ctx: int, opts: SolverOptions,
                 kw: dict):
    """A factory of fresh rules (LRU, load_priced, load_priced_search) trained on ``rule_seeds``; its
    ``search_weights`` attribute records the search's weights."""
    trains = [build_replication(source, s, 1.0, ctx)[0] for s in rule_seeds]
    derived = solve_priced(trains[0], cm, opts, seed=rule_seeds[0], cost_model_id=f"{cfg.gpu}/{cfg.model}/tp{cfg.tp}",
                           durations=tool_durations_from_calls(trains[0].calls()), **kw)
    splan = ordered_plan(derived, trains, cm, opts, rule="load_priced_search", max_pauses=cfg.max_pauses,
                         seeds=rule_seeds)
    if splan is None:
        raise RuntimeError("the training LP of the load-priced rule has no optimum")

    def rules() -> dict:
        return {"lru": LRUResidency(), "load_priced": LoadPricedResidency.from_parameters(derived.plan.parameters),
                "load_priced_search": ImitationEvictionResidency.from_parameters(dict(splan.parameters))}
    rules.search_weights = splan.parameters["eviction_weights"]
    return rules


def _ratio(a: list[float], b: list[float]) -> float | None:
    return sum(a) / sum(b) if sum(b) > 0 else None


def _r(x: float | None) -> str:
    return "n/a (denominator 0)" if x is None else f"{x:.3f}"


def _f(e: dict) -> str:
    return f"{e['mean']:.4g} [{e['ci95'][0]:.4g}, {e['ci95'][1]:.4g}]"


def render(res: dict) -> str:
    """Markdown tables of the summary."""
    s = res["summary"]
    lines = [f"### {res['source']}: {len(res['per_seed'])} evaluated seeds", "",
             (f"penalty lam {[round(x, 4) for x in res['penalty']['lam']]} ({', '.join(res['penalty']['features'])}); "
             + ("fixed by --lam" if res["penalty"].get("fixed") else
                f"mean training bound {res['penalty']['mean_training_bound_s']:.4g} s on "
                f"{len(res['bound_train_seeds'])} replications")), "",
             "| quantity | mean (s) [95% CI] | ratio of means to H | ratio to L |", "|---|---|---|---|",
             f"| hindsight optimum H | {_f(s['hindsight_s'])} | 1 | |",
             (f"| relaxation bound L (every rule of the class >= L in expectation) | {_f(s['bound_s'])} | "
             f"{_r(s['ratio_of_means_bound_to_hindsight'])} | 1 |")]
    for name, r in s["rules"].items():
        lines.append(f"| {name} | {_f(r['cost_s'])} | {_r(r['ratio_of_means_to_hindsight'])} | "
                     f"{_r(r['ratio_of_means_to_bound'])} |")
    lines += ["", "| paired difference (s) | mean [95% CI] | sign beyond the CI |", "|---|---|---|",
              f"| L - H | {_f(s['bound_minus_hindsight'])} | {s['bound_minus_hindsight']['sign']} |",
              f"| L - 1.1 H | {_f(s['bound_minus_1.1_hindsight'])} | {s['bound_minus_1.1_hindsight']['sign']} |"]
    for name, r in s["rules"].items():
        lines += [f"| {name} - L | {_f(r['minus_bound'])} | {r['minus_bound']['sign']} |",
                  f"| {name} - 1.1 L | {_f(r['minus_1.1_bound'])} | {r['minus_1.1_bound']['sign']} |"]
    lines += ["", "penalty paid by each rule's paths (validity check, mean 0 expected): "
              + ", ".join(f"{n} {_f(r['penalty_mean_s'])}" for n, r in s["rules"].items()), ""]
    return "\n".join(lines)


def _problem(cfg: Config) -> str | None:
    """What is wrong with ``cfg`` (one line), checked before any training; None when it can run."""
    import math

    if cfg.variant not in AGENTX_VARIANTS:
        return f"--variant must be one of {', '.join(sorted(AGENTX_VARIANTS))}, got {cfg.variant!r}"
    if cfg.seeds < 2:
        return f"--seeds must be >= 2 (a CI needs spread), got {cfg.seeds}"
    for f in ("rule_train_reps", "bound_train_reps"):
        if getattr(cfg, f) < 1:
            return f"--{f.replace('_', '-')} must be >= 1, got {getattr(cfg, f)}"
    if cfg.rules not in (0, 1):
        return f"--rules must be 0 (H and L only) or 1 (also the rules), got {cfg.rules}"
    small = [f"--{f.replace('_', '-')}" for f in ("sessions", "fit_iters", "instances", "max_pauses")
             if getattr(cfg, f) < 1]
    if small or cfg.base_seed < 0:
        return f"need {', '.join(small) or '--base-seed'} >= {1 if small else 0}"
    for f in ("slot_s", "time_limit_s"):
        if not (math.isfinite(getattr(cfg, f)) and getattr(cfg, f) > 0):
            return f"--{f.replace('_', '-')} must be a finite number > 0 (s), got {getattr(cfg, f)!r}"
    if cfg.lam:
        try:
            parse_lam(cfg.lam)
        except ValueError as exc:
            return str(exc)
    try:
        CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
    except (ValueError, FileNotFoundError) as exc:
        return str(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(config_parser(Config, __doc__.splitlines()[0]), Config, argv, check=_problem)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in ("pyomo", "optsched.solvers", "optsched.pipelines.residency_priced_solve"):
        logging.getLogger(name).setLevel(logging.WARNING)
    out = Path(cfg.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"residency_bound: --out {cfg.out!r} cannot be created: {exc.strerror or exc}", file=sys.stderr)
        return 2
    res = run(cfg)
    text = render(res)
    write_run(out, res, text, asdict(cfg), sys.argv, cfg.base_seed, ["train", "arrivals"])
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
