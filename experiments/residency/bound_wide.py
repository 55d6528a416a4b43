"""KV residency, the wider class: H and L over slot lengths, with prefetch, and the penalty's zero mean for adaptive rules.

The class (`optsched.pipelines.residency_adaptive`): at the start of every slot of length s (1 s approaches every
arrival / eviction event) a rule fixes each present pause's tier knowing the pauses seen so far; actions keep,
demote HBM -> DRAM -> none, and prefetch DRAM -> HBM (``--prefetch-factor`` f: a promotion costs f c_j). For every
slot length of ``--slots``, on source ``--source`` (priced slot model, one instance, HBM tight):

1. the penalty weights lam: ``--lam`` (fixed before the run, the same at every slot length: any weights give a
   valid bound, and the penalty's per-slot refund Delta h scales with the slot, so one Delta prices a pause alike
   at every s), or fitted for the wider class (`fit_penalty` with the prefetch model) on ``--bound-train-reps``
   replications of stream "train" of ``--base-seed`` (never evaluated);
2. on seeds ``base_seed .. base_seed + seeds - 1``: H (hindsight optimum, demote only), H_pf (hindsight with
   prefetch; = H when f >= 1, not solved), L (penalized MILP with prefetch, the solver's proven bound: E[L] <=
   E[cost] of every rule of the wider class), L_clip (the same with Delta = max(0, lam . features),
   `penalty_terms` ``nonneg``: also valid for the wider class), L_demote (the demote-only class at this slot
   length, for comparison), and the replayed cost of the rules of ``COST_RULES`` (``ADAPTIVE_RULES``, which evict
   for every new pause of a slot, and ``FRESH_RULES``, the same evicting for fresh arrivals only: the class's
   leak-free rules);
3. on seeds ``base_seed .. base_seed + sim_seeds - 1`` (replays only, no solve): the penalty each adaptive rule
   pays (raw and clipped Delta), and a rule that peeks at the outcome (``peek``): mean 0 for a rule of the class,
   not for ``peek``.

The pause law of the hazards: ``--law generator`` (the AgentX generator's own `gap_cdf`; exact on the
``full-iid-gaps`` variant) or ``empirical`` (the empirical CDF of the training replications' pause lengths, for
sources without a known law: the bound is then approximate, and step 3 says by how much).

Output: one compact JSON (``--out``; per-seed values to 1e-6 s, summaries with Student-t 95% CIs, paired by seed)
that `experiments/residency/figures.py` turns into the notebook's tables and its test re-derives.

Usage: .venv/bin/python experiments/residency/bound_wide.py --slots 10,30 --seeds 4 --sim-seeds 40 --out x.json
       .venv/bin/python experiments/residency/bound_wide.py --merge a.json,b.json --out ab.json  # consecutive seeds
"""

from __future__ import annotations

import json
import logging
import math
import sys
from bisect import bisect_right
from dataclasses import asdict, dataclass
from pathlib import Path

from optsched.compare.replication import build_replication
from optsched.config_cli import arg, config_parser, parse_config
from optsched.cost import CostModel
from optsched.cost.catalog import load_model
from optsched.models.residency_priced import build_priced_residency
from optsched.pipelines.residency_adaptive import ADAPTIVE_RULES, FRESH_RULES, AdaptiveRule, replay_adaptive
from optsched.pipelines.residency_bound import (
    FEATURES,
    fit_penalty,
    parse_lam,
    penalty_terms,
    relaxation_bound,
)
from optsched.pipelines.residency_priced_solve import priced_instance
from optsched.replicate import mean_ci, paired_difference, stream
from optsched.revision import git_revision
from optsched.solvers import SolverOptions, solve
from optsched.workload.gen_agentx import AGENTX_VARIANTS, spec_variant

logger = logging.getLogger("residency_bound_wide")
PEEK = AdaptiveRule("lru", peek=True)
# the rules replayed on the MILP seeds: the four of the penalty check's step 3 (evicting for every new pause of a
# slot: leaky at coarse slots) and the same four evicting for fresh arrivals only (the leak-free rules of the class)
COST_RULES: dict[str, AdaptiveRule] = {**ADAPTIVE_RULES, **FRESH_RULES}
BOUNDS = ("H", "H_pf", "L", "L_clip", "L_demote")


@dataclass(frozen=True, slots=True)
class Config:
    source: str = arg("agentx:sessions=16,variant=full-iid-gaps", "workload source (generator spec)")
    law: str = arg("generator", "pause law of the hazards: generator (AgentX gap_cdf of the spec's variant) or "
                                "empirical (CDF of the training replications' pause lengths)")
    slots: str = arg("1,2,5,10,30", "slot lengths (s), comma-separated")
    seeds: int = arg(6, "seeds with the MILPs (H, L, L_clip, L_demote), base_seed .. base_seed + N - 1 (>= 2; 0: "
                        "the penalty check only)")
    sim_seeds: int = arg(500, "seeds of the replay-only penalty check (>= 2)")
    base_seed: int = arg(1000, "first evaluated seed; its stream 'train' draws the training replications")
    bound_train_reps: int = arg(3, "training replications of the penalty fit")
    fit_iters: int = arg(3, "cutting-plane iterations of the penalty fit")
    lam: str = arg("", "penalty weights, comma-separated in FEATURES order, fixed for every slot length (a bound is "
                       "valid for any weights fixed before the evaluated seeds); empty: fit them per slot length")
    prefetch_factor: float = arg(1.0, "cost of a prefetch DRAM -> HBM as a multiple of the one-way PCIe time c_j")
    max_pauses: int = arg(300, "tool pauses kept per replication (the first N by start time)")
    gpu: str = arg("h200-sxm", "catalog GPU of the cost model")
    model: str = arg("llama-3-70b", "catalog model of the cost model")
    tp: int = arg(2, "tensor-parallel degree of the instance")
    time_limit_s: float = arg(600.0, "solver time limit per MILP (s)")
    out: str = arg("runs/residency_bound_wide.json", "output JSON file")
    merge: str = arg("", "comma-separated JSONs of runs on consecutive seed ranges: merge them into --out and exit")


def empirical_cdf(durations: list[float]):
    """P(d <= x) of the sample ``durations`` (s), a step function."""
    xs = sorted(durations)

    def cdf(x: float) -> float:
        return bisect_right(xs, x + 1e-12) / len(xs)
    return cdf


def _est(xs: list[float]) -> dict:
    d = mean_ci(xs).to_dict()
    return {"mean": d["mean"], "ci95": list(d["ci95"]), "n": len(xs)}


def _diff(x: list[float], y: list[float]) -> dict:
    d = paired_difference(x, y).to_dict()
    return {"mean": d["mean"], "ci95": list(d["ci95"]), "n": len(x)}


def _instances(cfg: Config, seeds: list[int], slot_s: float, cm: CostModel, ctx: int):
    for s in seeds:
        wl, _ = build_replication(cfg.source, s, 1.0, ctx)
        inst, calls = priced_instance(wl, cm, n_instances=1, slot_s=slot_s, max_pauses=cfg.max_pauses)
        yield s, inst, [c.session_id for c in calls]


def run_slot(cfg: Config, slot_s: float, cdf, train_seeds: list[int], cm: CostModel, ctx: int,
             opts: SolverOptions) -> dict:
    """Steps 1-3 of the module docstring for one slot length."""
    f = cfg.prefetch_factor
    if cfg.lam:
        lam, train_bound = parse_lam(cfg.lam), None
    else:
        train = [inst for _, inst, _ in _instances(cfg, train_seeds, slot_s, cm, ctx)]
        fit = fit_penalty(train, cdf, opts, iters=cfg.fit_iters, prefetch_factor=f)
        lam, train_bound = fit.lam, round(fit.mean_bound_s, 6)
    logger.info("slot %g s: lam %s, mean training bound %s s", slot_s, [round(x, 4) for x in lam], train_bound)
    rows = []
    for seed, inst, sessions in _instances(cfg, list(range(cfg.base_seed, cfg.base_seed + cfg.seeds)), slot_s, cm,
                                           ctx):
        h = solve(build_priced_residency(inst), opts)
        # f >= 1: a promotion costs at least the resume from DRAM it saves, so the hindsight optimum with prefetch
        # is H (the model with prefetch contains every demote-only path); solved only when f < 1
        hp = solve(build_priced_residency(inst, prefetch_factor=f), opts) if f < 1 else h
        for name, r in (("H", h), ("H_pf", hp)):
            if r.status != "optimal":
                raise RuntimeError(f"seed {seed} slot {slot_s:g}: {name} MILP ended '{r.status}'; raise --time-limit-s")
        b = relaxation_bound(inst, lam, cdf, opts, f)
        # the clip changes no coefficient where every Delta >= 0: then L_clip is L, not solved again
        raw = penalty_terms(inst, lam, cdf)
        bc = b if raw == penalty_terms(inst, lam, cdf, nonneg=True) else relaxation_bound(inst, lam, cdf, opts, f,
                                                                                          nonneg=True)
        bd = relaxation_bound(inst, lam, cdf, opts)
        row = {"seed": seed, "pauses": len(inst.pauses), "H": round(float(h.objective), 6),
               "H_pf": round(float(hp.objective), 6), "L": round(b.bound_s, 6), "L_status": b.status,
               "L_clip": round(bc.bound_s, 6), "L_demote": round(bd.bound_s, 6),
               "cost": {n: round(replay_adaptive(inst, r, cdf, f, sessions)[1], 6) for n, r in COST_RULES.items()}}
        logger.info("slot %g seed %d: %s", slot_s, seed, {k: v for k, v in row.items() if k != "seed"})
        rows.append(row)
    pen: dict[str, list[float]] = {n: [] for n in [*ADAPTIVE_RULES, "peek"]}
    pen_clip: dict[str, list[float]] = {n: [] for n in [*ADAPTIVE_RULES, "peek"]}
    for _, inst, _ in _instances(cfg, list(range(cfg.base_seed, cfg.base_seed + cfg.sim_seeds)), slot_s, cm, ctx):
        terms = penalty_terms(inst, lam, cdf)  # what penalty_of_paths sums, computed once for every rule
        clip = penalty_terms(inst, lam, cdf, nonneg=True)
        for n, r in [*ADAPTIVE_RULES.items(), ("peek", PEEK)]:
            paths = replay_adaptive(inst, r, cdf, f)[0]
            for tt, out in ((terms, pen), (clip, pen_clip)):
                out[n].append(round(sum(v for (j, t), v in tt.items() if paths[j][t - inst.slots(j)[0]] == 0), 6))
    return {"slot_s": slot_s, "lam": [round(x, 6) for x in lam], "features": list(FEATURES),
            "mean_training_bound_s": train_bound, "per_seed": rows, "penalty_per_seed": pen, "penalty_clip_per_seed": pen_clip,
            "summary": summarize(rows, pen, pen_clip)}


def summarize(rows: list[dict], pen: dict[str, list[float]], pen_clip: dict[str, list[float]]) -> dict:
    """The summaries of one slot length from its per-seed values: the MILP seeds' ``rows`` and the penalty check's
    per-rule penalties (raw and clipped Delta). The rules' summaries cover the rules every row replayed (runs
    before the fresh-arrival rules were added to ``COST_RULES`` replayed ``ADAPTIVE_RULES`` only)."""
    if not rows:  # --seeds 0: the penalty check only
        return {"penalty": {n: _est(v) for n, v in pen.items()},
                "penalty_clip": {n: _est(v) for n, v in pen_clip.items()}}
    col = {k: [r[k] for r in rows] for k in BOUNDS}
    summary = {k: _est(v) for k, v in col.items()}
    hsum = sum(col["H"])
    for k in ("L", "L_clip", "L_demote"):
        summary[f"{k}_minus_H"] = _diff(col[k], col["H"])
        summary[f"{k}_minus_1.1H"] = _diff(col[k], [1.1 * x for x in col["H"]])
        summary[f"{k}_over_H"] = sum(col[k]) / hsum if hsum > 0 else None
    summary["rules"] = {n: {"cost": _est([r["cost"][n] for r in rows]),
                            "over_H": (sum(r["cost"][n] for r in rows) / sum(col["H"])) if sum(col["H"]) > 0 else None,
                            "minus_L": _diff([r["cost"][n] for r in rows], col["L"]),
                            "minus_L_clip": _diff([r["cost"][n] for r in rows], col["L_clip"])}
                        for n in COST_RULES if all(n in r["cost"] for r in rows)}
    summary["penalty"] = {n: _est(v) for n, v in pen.items()}
    summary["penalty_clip"] = {n: _est(v) for n, v in pen_clip.items()}
    return summary


def merge(parts: list[dict]) -> dict:
    """One result from runs of one configuration on consecutive ranges of MILP seeds (in seed order): per-seed rows
    and penalty-check values concatenated, every summary recomputed from them (`summarize`). The penalty check's
    seeds of each part are its own first ``sim_seeds``: the merged ones are listed in ``penalty_seeds``.

    Raises:
        ValueError: the parts differ in anything but their seeds, or their MILP seeds are not consecutive.
    """
    parts = sorted(parts, key=lambda r: r["config"]["base_seed"])
    free = ("seeds", "base_seed", "sim_seeds", "out", "merge")
    strip = [{k: v for k, v in r["config"].items() if k not in free} for r in parts]
    if any(c != strip[0] for c in strip) or any(r["config"]["seeds"] < 2 for r in parts):
        raise ValueError("runs to merge differ in their configuration or have no MILP seeds")
    seeds = [x for r in parts for x in range(r["config"]["base_seed"], r["config"]["base_seed"] + r["config"]["seeds"])]
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise ValueError(f"runs to merge do not cover consecutive seeds: "
                         f"{[(r['config']['base_seed'], r['config']['seeds']) for r in parts]}")
    slots = []
    for k, first in enumerate(parts[0]["slots"]):
        col = [r["slots"][k] for r in parts]
        rows = [row for c in col for row in c["per_seed"]]
        if [row["seed"] for row in rows] != seeds:
            raise ValueError(f"slot {first['slot_s']:g} s: per-seed rows do not match the runs' seeds")
        pen = {n: [x for c in col for x in c["penalty_per_seed"][n]] for n in first["penalty_per_seed"]}
        pen_clip = {n: [x for c in col for x in c["penalty_clip_per_seed"][n]] for n in first["penalty_clip_per_seed"]}
        slots.append({**{f: first[f] for f in ("slot_s", "lam", "features", "mean_training_bound_s")},
                      "per_seed": rows, "penalty_per_seed": pen, "penalty_clip_per_seed": pen_clip,
                      "summary": summarize(rows, pen, pen_clip)})
    sim = [x for r in parts for x in range(r["config"]["base_seed"], r["config"]["base_seed"] + r["config"]["sim_seeds"])]
    cfg = {**parts[0]["config"], "seeds": len(seeds), "base_seed": seeds[0], "sim_seeds": len(sim)}
    revisions = [r["revision"] for k, r in enumerate(parts) if r["revision"] not in [q["revision"] for q in parts[:k]]]
    return {"config": cfg, "revision": revisions, "train_seeds": parts[0]["train_seeds"], "penalty_seeds": sim,
            "slots": slots}


def run(cfg: Config) -> dict:
    cm = CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
    ctx = load_model(cfg.model).max_context_tokens
    opts = SolverOptions(time_limit_s=cfg.time_limit_s, mip_gap=1e-4, threads=1)
    train_seeds = [int(s) for s in stream(cfg.base_seed, "train").integers(2**31, size=cfg.bound_train_reps)]
    if cfg.law == "generator":
        cdf = AGENTX_VARIANTS[spec_variant(cfg.source)].gap_cdf
    else:
        cdf = empirical_cdf([p.duration_s for _, inst, _ in _instances(cfg, train_seeds, 10.0, cm, ctx)
                             for p in inst.pauses])
    slots = [run_slot(cfg, float(s), cdf, train_seeds, cm, ctx, opts) for s in cfg.slots.split(",")]
    return {"config": asdict(cfg), "revision": git_revision(), "train_seeds": train_seeds, "slots": slots}


def _problem(cfg: Config) -> str | None:
    try:  # an unknown catalog GPU / model or a TP the heads do not split by: one usage line, before any work
        CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
    except ValueError as exc:
        return str(exc)
    if cfg.law not in ("generator", "empirical"):
        return f"--law must be generator or empirical, got {cfg.law!r}"
    known = cfg.source.startswith("agentx") and spec_variant(cfg.source) in AGENTX_VARIANTS
    if cfg.law == "generator" and not known:
        return f"--law generator needs an agentx source with a known variant, got {cfg.source!r}"
    try:
        slots = [float(s) for s in cfg.slots.split(",")]
    except ValueError:
        return f"--slots must be comma-separated numbers (s), got {cfg.slots!r}"
    if not all(math.isfinite(s) and s > 0 for s in slots):
        return f"--slots must be finite numbers > 0 (s), got {cfg.slots!r}"
    if cfg.seeds == 1 or cfg.seeds < 0 or cfg.sim_seeds < 2:
        return (f"--seeds must be 0 (penalty check only) or >= 2 and --sim-seeds >= 2 (a CI needs spread), got "
                f"{cfg.seeds}, {cfg.sim_seeds}")
    if min(cfg.bound_train_reps, cfg.fit_iters, cfg.max_pauses) < 1 or cfg.base_seed < 0:
        return "need --bound-train-reps, --fit-iters, --max-pauses >= 1 and --base-seed >= 0"
    if cfg.lam:
        try:
            parse_lam(cfg.lam)
        except ValueError as exc:
            return str(exc)
    if not (math.isfinite(cfg.prefetch_factor) and cfg.prefetch_factor >= 0):
        return f"--prefetch-factor must be a finite number >= 0, got {cfg.prefetch_factor!r}"
    return None


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(config_parser(Config, __doc__.splitlines()[0]), Config, argv, check=_problem)
    if cfg.merge:
        try:
            res = merge([json.loads(Path(f).read_text()) for f in cfg.merge.split(",")])
        except (OSError, ValueError, KeyError) as exc:
            print(f"residency_bound_wide: error: --merge: {exc}", file=sys.stderr)
            return 2
        Path(cfg.out).write_text(json.dumps(res, separators=(",", ":"), sort_keys=True) + "\n")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in ("pyomo", "optsched.solvers", "optsched.pipelines.residency_bound"):
        logging.getLogger(name).setLevel(logging.WARNING)
    res = run(cfg)
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, separators=(",", ":"), sort_keys=True) + "\n")
    logger.info("wrote %s", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
