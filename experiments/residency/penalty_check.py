"""KV residency, the wider class W(s): the penalty's zero mean for adaptive rules on many seeds, and their costs as
the slot shrinks.

Replays only (no MILP): for every seed of ``base_seed .. base_seed + seeds - 1`` and every slot length of
``--slots`` (one workload per seed, built once, `priced_instances`), on the priced slot model of
`experiments/residency/bound_wide.py` (source ``--source``, one H200 TP2, first ``--max-pauses`` pauses), each rule
of ``RULES`` is replayed (`replay_adaptive`, prefetch at ``--prefetch-factor`` c_j) and pays the bound's penalty
z = sum Delta (E - h) u[hbm] with the weights ``--lam`` (fixed before the run; any fixed weights give a valid bound)
and the generator's own pause law (exact on the ``full-iid-gaps`` variant). Recorded per seed: each rule's cost
and penalty, and the penalty of keeping every pause in HBM (``keep``: sum of every term).

Why the second number: z(rule) = z(keep) - sum of the terms of the (pause, slot) pairs the rule does not hold in
HBM. z(keep) is the penalty of a non-anticipative tier choice (hold everything), so its mean is 0 exactly when the
law and the features are right; the difference ``z(rule) - z(keep)`` then has mean 0 exactly when the rule's
evictions are non-anticipative, and it has far less spread (only evicted pairs contribute), so it tests the
rule, where the raw z tests the rule and the law together.

Rules: the four rules of `FRESH_RULES` (react to fresh arrivals only: the class the bound covers at every slot
length), ``lru`` and ``lru_prefetch`` (react to every new pause of a slot, = the project's LRU replay: the leak),
and ``peek`` (evicts the pauses that do not resume in the slot: the positive control, its mean must be > 0).
Summaries: Student-t 95% CIs over seeds, and the same at 1 - 0.05 / m (Bonferroni over the m rules of the
class); costs paired by seed against ``lru`` and against the same rule at the smallest slot length.

Output: one compact JSON (``--out``) that ``render`` turns into the notebook's tables and its test re-derives.

Usage: .venv/bin/python experiments/residency/penalty_check.py --slots 30,10,5,2,1 --seeds 500 --out x.json
       .venv/bin/python experiments/residency/penalty_check.py --render x.json   # the tables
"""

from __future__ import annotations

import json
import logging
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from scipy import stats

from optsched.compare.replication import build_replication
from optsched.config_cli import arg, config_parser, parse_config
from optsched.cost import CostModel
from optsched.cost.catalog import load_model
from optsched.models.residency_priced import build_priced_residency
from optsched.output import OutputError, prepare_output
from optsched.pipelines.residency_adaptive import ADAPTIVE_RULES, FRESH_RULES, AdaptiveRule, replay_adaptive
from optsched.pipelines.residency_bound import FEATURES, penalty_terms
from optsched.pipelines.residency_priced_solve import priced_instances
from optsched.replicate import mean_ci, paired_difference
from optsched.revision import git_revision
from optsched.solvers import SolverOptions, solve
from optsched.workload.gen_agentx import AGENTX_VARIANTS, spec_variant
from optsched.workload.spec import parse_generator_spec

logger = logging.getLogger("residency_penalty_check")
DATA = Path(__file__).resolve().parents[2] / "docs" / "notebook" / "data" / "residency"
# the weights of RESULTS' 10-s bound (as experiments/residency/figures.py fixes them for every slot length)
LAM = "0.5942,-0.4127,0.3762,0.0520,-0.3574"
CLASS = tuple(FRESH_RULES)
RULES: dict[str, AdaptiveRule] = {**FRESH_RULES, "lru": ADAPTIVE_RULES["lru"],
                                  "lru_prefetch": ADAPTIVE_RULES["lru_prefetch"],
                                  "peek": AdaptiveRule("lru", peek=True)}


@dataclass(frozen=True, slots=True)
class Config:
    source: str = arg("agentx:sessions=16,variant=full-iid-gaps", "workload source (an agentx generator spec)")
    slots: str = arg("30,10,5,2,1", "slot lengths (s), comma-separated")
    seeds: int = arg(500, "seeds base_seed .. base_seed + N - 1 (>= 2)")
    base_seed: int = arg(1000, "first seed")
    lam: str = arg(LAM, "penalty weights, comma-separated in FEATURES order, fixed before the run")
    prefetch_factor: float = arg(1.0, "cost of a prefetch DRAM -> HBM as a multiple of the one-way PCIe time c_j")
    max_pauses: int = arg(300, "tool pauses kept per replication (the first N by start time)")
    gpu: str = arg("h200-sxm", "catalog GPU of the cost model")
    model: str = arg("llama-3-70b", "catalog model of the cost model")
    tp: int = arg(2, "tensor-parallel degree of the instance")
    out: str = arg("runs/residency_penalty_check.json", "output JSON file")
    render: str = arg("", "print the tables of this JSON and exit (no run)")
    hindsight_seeds: int = arg(0, "also solve the hindsight MILP H (demote only; = H with prefetch at f >= 1) on the "
                                   "first N seeds at every slot length")
    time_limit_s: float = arg(600.0, "solver time limit per hindsight MILP (s)")
    merge: str = arg("", "comma-separated JSONs of runs on consecutive seed ranges: merge them into --out and exit")


def _problem(cfg: Config) -> str | None:
    if not cfg.source.startswith("agentx") or spec_variant(cfg.source) not in AGENTX_VARIANTS:
        return f"--source must be an agentx source with a known variant (the pause law), got {cfg.source!r}"
    try:
        slots = [float(s) for s in cfg.slots.split(",")]
    except ValueError:
        return f"--slots must be comma-separated numbers (s), got {cfg.slots!r}"
    if not all(math.isfinite(s) and s > 0 for s in slots) or len(set(slots)) != len(slots):
        return f"--slots must be distinct finite numbers > 0 (s), got {cfg.slots!r}"
    if not 0 <= cfg.hindsight_seeds <= cfg.seeds or not cfg.time_limit_s > 0:
        return f"need 0 <= --hindsight-seeds <= --seeds and --time-limit-s > 0, got {cfg.hindsight_seeds}, {cfg.time_limit_s}"
    if cfg.seeds < 2 or cfg.base_seed < 0 or cfg.max_pauses < 1:
        return f"need --seeds >= 2, --base-seed >= 0, --max-pauses >= 1, got {cfg.seeds}, {cfg.base_seed}, {cfg.max_pauses}"
    try:
        lam = [float(x) for x in cfg.lam.split(",")]
    except ValueError:
        lam = []
    if len(lam) != len(FEATURES) or not all(math.isfinite(x) for x in lam):
        return f"--lam must be {len(FEATURES)} finite numbers ({','.join(FEATURES)}), got {cfg.lam!r}"
    if not (math.isfinite(cfg.prefetch_factor) and cfg.prefetch_factor >= 0):
        return f"--prefetch-factor must be a finite number >= 0, got {cfg.prefetch_factor!r}"
    try:  # a bad catalog name, tp or generator key: one line here, not a traceback from the first seed
        CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
        _, kw = parse_generator_spec(cfg.source)
    except ValueError as exc:
        return str(exc)
    if kw.get("sessions", 1) < 1:
        return f"--source: sessions expects an integer >= 1, got {kw['sessions']}"
    return None


def seed_rows(cfg: Config, seed: int, cm: CostModel, ctx: int, cdf) -> list[dict]:
    """One dict per slot length of ``cfg.slots``: keep penalty, and per rule cost and penalty (s, to 1e-6)."""
    lam = [float(x) for x in cfg.lam.split(",")]
    wl, _ = build_replication(cfg.source, seed, 1.0, ctx)
    out = []
    for inst, calls in priced_instances(wl, cm, [float(s) for s in cfg.slots.split(",")], max_pauses=cfg.max_pauses):
        terms = penalty_terms(inst, lam, cdf)
        sessions = [c.session_id for c in calls]
        first = [inst.slots(j)[0] for j in range(len(inst.pauses))]
        row = {"keep": round(sum(terms.values()), 6), "cost": {}, "pen": {}}
        if seed < cfg.base_seed + cfg.hindsight_seeds:
            h = solve(build_priced_residency(inst), SolverOptions(time_limit_s=cfg.time_limit_s, mip_gap=1e-4,
                                                                  threads=1))
            if h.status != "optimal":
                raise RuntimeError(f"seed {seed} slot {inst.slot_s:g}: H MILP ended '{h.status}'; raise --time-limit-s")
            row["H"] = round(float(h.objective), 6)
        for name, rule in RULES.items():
            paths, cost = replay_adaptive(inst, rule, cdf, cfg.prefetch_factor, sessions)
            row["cost"][name] = round(cost, 6)
            row["pen"][name] = round(sum(v for (j, t), v in terms.items() if paths[j][t - first[j]] == 0), 6)
        out.append(row)
    return out


def run(cfg: Config) -> dict:
    cm = CostModel.from_names(cfg.gpu, cfg.model, tp=cfg.tp)
    ctx = load_model(cfg.model).max_context_tokens
    cdf = AGENTX_VARIANTS[spec_variant(cfg.source)].gap_cdf
    slots = [float(s) for s in cfg.slots.split(",")]
    seeds = list(range(cfg.base_seed, cfg.base_seed + cfg.seeds))
    per = {s: {"keep": [], "H": [], "cost": {n: [] for n in RULES}, "pen": {n: [] for n in RULES}} for s in slots}
    for k, seed in enumerate(seeds):
        for s, row in zip(slots, seed_rows(cfg, seed, cm, ctx, cdf), strict=True):
            per[s]["keep"].append(row["keep"])
            if "H" in row:
                per[s]["H"].append(row["H"])
            for n in RULES:
                per[s]["cost"][n].append(row["cost"][n])
                per[s]["pen"][n].append(row["pen"][n])
        if (k + 1) % 50 == 0:
            logger.info("%d / %d seeds", k + 1, len(seeds))
    return {"config": asdict(cfg), "revision": git_revision(), "seeds": seeds, "class_rules": list(CLASS),
            "slots": [{"slot_s": s, **per[s]} for s in slots]}


def merge(parts: list[dict]) -> dict:
    """One result from runs of the same configuration on consecutive seed ranges (in seed order), without H.

    Raises:
        ValueError: the parts differ in anything but their seeds, or their seeds are not consecutive.
    """
    parts = sorted(parts, key=lambda r: r["seeds"][0])
    # the hindsight MILP's options change no replay: they may differ, and the merge keeps no H (a part's H covers
    # its own first seeds only)
    free = ("seeds", "base_seed", "out", "render", "merge", "hindsight_seeds", "time_limit_s")
    strip = [{k: v for k, v in r["config"].items() if k not in free} for r in parts]
    if any(c != strip[0] for c in strip) or any(r["class_rules"] != parts[0]["class_rules"] for r in parts):
        raise ValueError("runs to merge differ in their configuration")
    seeds = [x for r in parts for x in r["seeds"]]
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise ValueError(f"runs to merge do not cover consecutive seeds: {[(r['seeds'][0], r['seeds'][-1]) for r in parts]}")
    slots = []
    for k, s in enumerate(parts[0]["slots"]):
        col = [r["slots"][k] for r in parts]
        slots.append({"slot_s": s["slot_s"], "keep": [x for c in col for x in c["keep"]],
                      **{f: {n: [x for c in col for x in c[f][n]] for n in s[f]} for f in ("cost", "pen")}})
    cfg = {**parts[0]["config"], "seeds": len(seeds), "base_seed": seeds[0], "hindsight_seeds": 0}
    revisions = [r["revision"] for k, r in enumerate(parts) if r["revision"] not in [q["revision"] for q in parts[:k]]]
    return {"config": cfg, "revision": revisions, "seeds": seeds,
            "class_rules": parts[0]["class_rules"], "slots": slots}


def _est(xs: list[float], level: float = 0.95) -> dict:
    m = mean_ci(xs)
    half = float(stats.t.ppf(0.5 + level / 2, len(xs) - 1) * stats.tstd(xs) / math.sqrt(len(xs)))
    return {"mean": m.mean, "ci": [m.mean - half, m.mean + half], "n": len(xs)}


def summarize(res: dict) -> dict:
    """slot_s -> the summaries of the module docstring, from the per-seed values only."""
    m = len(res["class_rules"])
    level = 1 - 0.05 / m
    out = {}
    smallest = min(res["slots"], key=lambda s: s["slot_s"])
    for s in res["slots"]:
        keep = s["keep"]
        rules = {}
        for n in s["pen"]:
            pen, cost = s["pen"][n], s["cost"][n]
            evicted = [p - k for p, k in zip(pen, keep, strict=True)]
            d_lru = paired_difference(cost, s["cost"]["lru"]).to_dict()
            d_lim = paired_difference(cost, smallest["cost"][n]).to_dict()
            rules[n] = {"pen": _est(pen), "pen_bonf": _est(pen, level), "evicted": _est(evicted),
                        "evicted_bonf": _est(evicted, level), "cost": _est(cost),
                        "minus_lru": {"mean": d_lru["mean"], "ci": list(d_lru["ci95"])},
                        "minus_smallest_slot": {"mean": d_lim["mean"], "ci": list(d_lim["ci95"])}}
        out[s["slot_s"]] = {"keep": _est(keep), "keep_bonf": _est(keep, level), "rules": rules}
    return out


def _ci(e: dict, fmt: str = ".3f") -> str:
    return f"{e['mean']:{fmt}} [{e['ci'][0]:{fmt}}, {e['ci'][1]:{fmt}}]"


def _verdict(e: dict) -> str:
    return "> 0" if e["ci"][0] > 0 else "< 0" if e["ci"][1] < 0 else "0 in CI"


def render(res: dict) -> str:
    """Markdown: the penalty check (raw and evicted part, Bonferroni CIs) and the costs over slot lengths."""
    summ = summarize(res)
    slots = sorted(summ, reverse=True)
    names = [*res["class_rules"], "lru", "lru_prefetch", "peek"]
    n = len(res["seeds"])
    out = [(f"Penalty (s), mean [Bonferroni CI at 1 - 0.05/{len(res['class_rules'])}], n = {n} seeds "
            f"{res['seeds'][0]}-{res['seeds'][-1]}; keep = every pause held in HBM (tests the law):"), "",
           "| slot (s) | part | keep | " + " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
    for s in slots:
        r = summ[s]["rules"]
        out.append(f"| {s:g} | raw | {_ci(summ[s]['keep_bonf'])} | "
                   + " | ".join(f"{_ci(r[k]['pen_bonf'])} {_verdict(r[k]['pen_bonf'])}" for k in names) + " |")
        out.append(f"| {s:g} | rule - keep | 0 | "
                   + " | ".join(f"{_ci(r[k]['evicted_bonf'])} {_verdict(r[k]['evicted_bonf'])}" for k in names) + " |")
    smallest = min(slots)
    costed = [*res["class_rules"], "lru", "lru_prefetch"]
    out += ["", f"Cost (s), mean [95% CI]; paired by seed: vs lru (same slot), vs the same rule at {smallest:g} s:", "",
            "| slot (s) | " + " | ".join(costed) + " |", "|---|" + "---|" * len(costed)]
    for s in slots:
        r = summ[s]["rules"]
        out.append(f"| {s:g} | " + " | ".join(_ci(r[k]["cost"], ".2f") for k in costed) + " |")
    for s in slots:
        r = summ[s]["rules"]
        out.append(f"| {s:g}: vs lru | " + " | ".join(_ci(r[k]["minus_lru"], ".2f") for k in costed) + " |")
    for s in slots:
        if s != smallest:
            r = summ[s]["rules"]
            out.append(f"| {s:g}: vs {smallest:g} s | "
                       + " | ".join(_ci(r[k]["minus_smallest_slot"], ".2f") for k in costed) + " |")
    return "\n".join(out) + "\n"


def committed_hindsight(res: dict, folder: Path = DATA) -> dict[float, dict[int, float]]:
    """slot_s -> seed -> H (s): the run's own ``H`` (``--hindsight-seeds``) and the hindsight optimum of every
    `experiments/residency/bound_wide.py` JSON in ``folder`` with the same source, pause cap and cost model."""
    out: dict[float, dict[int, float]] = {}
    for s in res["slots"]:
        out.setdefault(s["slot_s"], {}).update(zip(res["seeds"], s.get("H", [])))
    same = ("source", "max_pauses", "gpu", "model", "tp")
    for f in sorted(folder.glob("*.json")):
        run = json.loads(f.read_text())
        bound_run = run.get("slots") and all("per_seed" in s for s in run["slots"])
        if bound_run and all(run["config"].get(k) == res["config"][k] for k in same):
            for s in run["slots"]:
                out.setdefault(s["slot_s"], {}).update({r["seed"]: r["H"] for r in s["per_seed"]})
    return out


def _ranges(seeds: list[int]) -> str:
    """``[1000, 1001, 1004, 1005, 1006]`` -> ``"1000-1001, 1004-1006 (n 5)"``: consecutive runs of sorted seeds."""
    runs: list[list[int]] = []
    for x in sorted(seeds):
        if runs and x == runs[-1][1] + 1:
            runs[-1][1] = x
        else:
            runs.append([x, x])
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs) + f" (n {len(seeds)})"


def render_hindsight(res: dict, hindsight: dict[float, dict[int, float]]) -> str:
    """Markdown: H and every rule's cost over H (ratio of sums) and minus H (paired 95% CI), on the seeds of
    ``res`` that have an H in ``hindsight`` (slot_s -> seed -> H)."""
    costed = [*res["class_rules"], "lru", "lru_prefetch"]
    out = ["| slot (s) | seeds | H (s) | " + " | ".join(f"{k} / H" for k in costed) + " | lru_fresh - H (s) | "
           "lru_fresh - lru (s) |", "|---|---|---|" + "---|" * (len(costed) + 2)]
    for s in sorted(res["slots"], key=lambda x: -x["slot_s"]):
        idx = [k for k, seed in enumerate(res["seeds"]) if seed in hindsight.get(s["slot_s"], {})]
        if len(idx) < 2:
            continue
        h = [hindsight[s["slot_s"]][res["seeds"][k]] for k in idx]
        cost = {n: [s["cost"][n][k] for k in idx] for n in costed}
        d = [paired_difference(cost["lru_fresh"], x).to_dict() for x in (h, cost["lru"])]
        out.append(f"| {s['slot_s']:g} | {_ranges([res['seeds'][k] for k in idx])} | {_ci(_est(h), '.2f')} | "
                   + " | ".join(f"{sum(cost[n]) / sum(h):.3f}" if sum(h) > 0 else "-" for n in costed) + " | "
                   + " | ".join(_ci({"mean": x["mean"], "ci": x["ci95"]}, ".2f") for x in d) + " |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = config_parser(Config, " ".join(__doc__.split("\n\n")[0].split()))  # the first sentence, whole
    cfg = parse_config(parser, Config, argv)
    if cfg.render:
        try:
            res = json.loads(Path(cfg.render).read_text())
        except (OSError, ValueError) as exc:
            print(f"{parser.prog}: error: {cfg.render}: {exc}", file=sys.stderr)
            return 2
        try:
            text = render(res) + "\n" + render_hindsight(res, committed_hindsight(res))
        except (KeyError, TypeError, AttributeError) as exc:
            print(f"{parser.prog}: error: {cfg.render}: not a penalty-check result (missing or malformed "
                  f"field {exc})", file=sys.stderr)
            return 2
        print(text, end="")
        return 0
    if cfg.merge:
        try:
            res = merge([json.loads(Path(f).read_text()) for f in cfg.merge.split(",")])
        except (OSError, ValueError) as exc:
            print(f"{parser.prog}: error: --merge: {exc}", file=sys.stderr)
            return 2
        except KeyError as exc:
            print(f"{parser.prog}: error: --merge: not a penalty-check result (missing field {exc})",
                  file=sys.stderr)
            return 2
        Path(cfg.out).write_text(json.dumps(res, separators=(",", ":"), sort_keys=True) + "\n")
        print(render(res), end="")
        return 0
    problem = _problem(cfg)
    if problem:
        parser.error(problem)  # usage and one error line, exit 2, before any work (as the other residency scripts)
    try:  # an --out that cannot be written: one line now, not a traceback after every seed has run
        prepare_output(cfg.out)
    except OutputError as exc:
        parser.error(f"--out: {exc}")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    res = run(cfg)
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, separators=(",", ":"), sort_keys=True) + "\n")
    logger.info("wrote %s", out)
    print(render(res), end="")
    print("\n" + render_hindsight(res, committed_hindsight(res)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
