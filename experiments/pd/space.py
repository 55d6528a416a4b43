"""P/D sizing against its whole search space: every plan the pool MILP can choose, simulated at each load.

Space (16 H200 GPUs, Llama-3-70B, P90 TTFT 10 s, TPOT 0.1 s, round-robin): every candidate pool of
`optsched.pipelines.pd_pool_plan.pool_instance` (TP 2/4/8; TP1 leaves no KV room) makes one colocated plan, and every
(prefill pool, decode pool) pair within the GPU budget one disaggregated plan: 85 plans at these settings. When the
space has more than ``max_plans`` plans (``max_plans`` > 0) the rule is: every colocated plan and every baseline's
pick, then disaggregated plans drawn uniformly without replacement by the seed-0 stream "plans" up to
``max_plans``. Each plan is simulated on every scored replication (seeds 0 .. ``seeds``−1) at every load.

Out of sample: the pool MILP's coefficients (and the md1 baseline's profile) come from training replications
(seeds 100 .. 100 + ``train_seeds`` − 1) of a part of the workload that shares no call with the scored part:

| workload | scored part | training part | load 1 |
|---|---|---|---|
| mooncake | sample calls 0 .. calls−1 | sample calls 1000 .. 1000+calls−1 | the trace's rate |
| mooncake_w8001 | window calls 0 .. calls−1 | window calls 300 .. 300+calls−1 | the window's rate |
| lmcache | head of each agent session | tail of each session (`optsched.workload.split`) | 16 sessions |
| agentx | ``agentx:sessions=N`` seeds 0.. | the generator at seeds 100.. (other sessions) | N sessions |
| agentx256k | ``agentx:sessions=N,variant=256k`` | as agentx | N sessions |

mooncake = the shipped sample (first 2,000 lines of the Mooncake FAST'25 conversation trace); mooncake_w8001 =
the shipped lines 8,001-8,600 of the same trace (a window disjoint from the sample, an open-loop trace of the
same family). Open loop: load = arrival-rate multiplier, a seed permutes the arrival gaps
(`optsched.compare.replication`). lmcache: load L = round(16·L) concurrent sessions (copies of the two), a seed
staggers the starts over [0, 2) s. agentx: load L = round(N·L) generated sessions arriving L times as often.

Picks, each simulated whatever it picks: ``pool`` (the pool MILP, `optsched.pipelines.pd_pool_plan`), ``md1`` (the
per-instance M/D/1 MILP, goodput objective, on the first training replication), ``fixed-2:1@tp2`` (DistServe's
2P1D ratio at TP2 scaled to the budget: 4P2D, 12 GPUs) and ``colocated@tp2`` (all 16 GPUs as 8 colocated TP2
instances). Regret of a pick = mean over scored seeds of (best plan's goodput − pick's goodput), paired by seed,
Student-t 95% CI; the best plan is the space's highest mean simulated goodput (a max over N noisy means: biased up,
so a regret CI that covers 0 is a tie with the best of N plans). Predictor error per plan = predicted (training
coefficients) − simulated mean goodput; ``predicted_in`` is the same predictor on the scored replications
themselves (the model's error without the out-of-sample shift).

Predicted goodput of a plan: the pool MILP's coefficient (a colocated pool's, or a (prefill, decode) pair's as one
pipeline, `optsched.cost.pool_queue.predict_pd`).

Simulations are cached in ``out``/sims.jsonl keyed by workload digest, plan and seed (a changed simulator needs a
fresh ``out``); predictions are always recomputed. Writes results.json, plans.csv (per workload, load, plan),
summary.csv (per workload, load, pick), predictor.csv (held-out error per workload and load), regret.png,
predicted_vs_simulated.png, provenance.json.

Usage: .venv/bin/python experiments/pd/space.py --workloads mooncake --loads 0.5 1 1.5 2 --seeds 3
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from optsched.compare.replication import build_replication
from optsched.config_cli import arg, config_parser, parse_config
from optsched.cost.catalog import load_model
from optsched.policies.router_round_robin import RoundRobinRouter
from optsched.replicate import mean_ci, paired_difference, stream
from optsched.reproduce.provenance import collect_provenance
from optsched.sim import SLO, ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload.digest import workload_digest

logger = logging.getLogger("pd_space")

GPU, MODEL = "h200-sxm", "llama-3-70b"
SAMPLES = Path(__file__).resolve().parents[2] / "optsched/data/samples"
WORKLOADS = ("mooncake", "mooncake_w8001", "lmcache", "agentx", "agentx256k")
SHORT = {"prefill": "P", "decode": "D", "colocated": "C"}


@dataclass(frozen=True, slots=True)
class Config:
    workloads: tuple[str, ...] = arg(WORKLOADS, "workloads to run (module docstring's table)", choices=WORKLOADS)
    loads: tuple[float, ...] = arg((0.5, 1.0, 1.5, 2.0), "load multipliers of each workload's load 1 (> 0)", above=0)
    seeds: int = arg(3, "scored replications 0 .. N-1 per plan and load (>= 2, for a CI)", at_least=2)
    train_seeds: int = arg(2, "training replications 100 .. 100+N-1 of the disjoint part (>= 1)", at_least=1)
    calls: int = arg(250, "open-loop traces: calls per scored / training window (>= 10)", at_least=10)
    agentx_sessions: int = arg(6, "agentx: generated sessions at load 1 (>= 1)", at_least=1)
    agentx256k_sessions: int = arg(3, "agentx256k: generated sessions at load 1 (>= 1)", at_least=1)
    max_plans: int = arg(0, "simulate at most this many plans of the space (0 = all; sampling rule in the "
                         "module docstring)", at_least=0)
    gpu_budget: int = arg(16, "GPUs of a plan (>= 2)", at_least=2)
    ttft_s: float = arg(10.0, "P90 TTFT SLO (s)", above=0)
    tpot_s: float = arg(0.1, "TPOT SLO (s)", above=0)
    out: str = arg("runs/pd_space", "output folder (module docstring lists the files)")


# ---- workloads (module docstring's table) ----

def _lmcache(part: str, seed: int, load: float):
    from optsched.replicate import scale_load
    from optsched.reproduce.stages.workloads import align_session_starts
    from optsched.workload import Session, samples
    from optsched.workload.split import session_part

    wl = session_part(align_session_starts(samples.lmcache_sample(load=True)), part)
    wl = scale_load(wl, max(1, round(16 * load)) / len(wl.sessions))
    g = stream(seed, "arrivals")
    return dataclasses.replace(wl, sessions=tuple(Session(s.session_id, s.calls, start_s=float(g.uniform(0, 2.0)))
                                                  for s in wl.sessions))


def _window(path: Path, first: int, calls: int, seed: int, load: float):
    from optsched.compare.replication import cap_context, permute_arrivals
    from optsched.replicate import scale_load
    from optsched.workload.spec import workload_from_spec
    from optsched.workload.split import call_window

    wl = call_window(workload_from_spec(str(path)), first, calls)
    wl, _ = cap_context(wl, load_model(MODEL).max_context_tokens)
    return scale_load(permute_arrivals(wl, stream(seed, "arrivals")), load)


def workload(cfg: Config, name: str, train: bool, seed: int, load: float):
    """Replication ``seed`` of the scored (``train`` False) or training part of workload ``name`` at ``load``."""
    if name == "mooncake":
        return _window(SAMPLES / "mooncake/conversation_trace_first2000.jsonl", 1000 if train else 0, cfg.calls,
                       seed, load)
    if name == "mooncake_w8001":
        return _window(SAMPLES / "mooncake_lines8001/conversation_trace_lines8001-8600.jsonl", 300 if train else 0,
                       cfg.calls, seed, load)
    if name == "lmcache":
        return _lmcache("tail" if train else "head", seed, load)
    spec = (f"agentx:sessions={cfg.agentx_sessions}" if name == "agentx"
            else f"agentx:sessions={cfg.agentx256k_sessions},variant=256k")
    return build_replication(spec, seed, load, load_model(MODEL).max_context_tokens)[0]


# ---- plans ----

def label(rows) -> str:
    """"7P1D@tp2" for one TP, "6P@tp2+1D@tp4" otherwise."""
    if len({tp for _, tp, _ in rows}) == 1:
        return "".join(f"{n}{SHORT[r]}" for r, _, n in rows) + f"@tp{rows[0][1]}"
    return "+".join(f"{n}{SHORT[r]}@tp{tp}" for r, tp, n in rows)


def space(inst, cfg: Config) -> dict[str, dict]:
    """Every plan of the pool MILP's space: {label: {rows, predicted}} (module docstring)."""
    plans = {}
    for o in inst.options:
        if o.role == "colocated":
            rows = (("colocated", o.tp, o.size),)
            plans[label(rows)] = {"rows": rows, "predicted": predicted(inst, rows)}
    for p in inst.options:
        for d in inst.options:
            if p.role == "prefill" and d.role == "decode" and p.gpus + d.gpus <= cfg.gpu_budget:
                rows = (("prefill", p.tp, p.size), ("decode", d.tp, d.size))
                plans[label(rows)] = {"rows": rows, "predicted": predicted(inst, rows)}
    return plans


def predicted(inst, rows) -> float:
    """The pool MILP's predicted goodput of plan ``rows`` (the pair's when the instance has pair coefficients,
    else min over the pools); NaN for a plan outside its space (no pick, or several pools in one role)."""
    idx = {(o.tp, o.role, o.size): i for i, o in enumerate(inst.options)}
    if not rows or len({r for r, _, _ in rows}) != len(rows) or any((tp, r, n) not in idx for r, tp, n in rows):
        return float("nan")
    if len(rows) == 2 and inst.pair_goodput_rps is not None:
        return inst.pair_goodput_rps.get((idx[rows[0][1], "prefill", rows[0][2]], idx[rows[1][1], "decode", rows[1][2]]),
                                         float("nan"))
    return min(inst.options[idx[tp, r, n]].goodput_rps for r, tp, n in rows)


def simulate_plan(wl, rows, seed: int, cfg: Config) -> dict:
    cl = ClusterConfig(tuple(InstanceConfig(role=r, gpu=GPU, model=MODEL, tp=tp, count=n) for r, tp, n in rows),
                       SchedulerConfig(max_num_batched_tokens=8192))
    s = simulate(wl, cl, router=RoundRobinRouter(), slo=SLO(ttft_s=cfg.ttft_s, tpot_s=cfg.tpot_s), seed=seed).summary
    return {"goodput": float(s["goodput_calls_s"]), "ttft_p90_s": float(s["ttft_p90_s"]),
            "tpot_p90_s": float(s["tpot_p90_s"]), "attainment": float(s["slo_attainment"])}


def picks(train, inst, cfg: Config) -> dict[str, dict]:
    """Each named method's plan rows (module docstring), with the pool MILP's solve record."""
    from optsched.pipelines.pd import plan_from_workload
    from optsched.pipelines.pd_pool_plan import solve_pool

    sol = solve_pool(inst)
    tps = {o.config: o.tp for o in inst.options}
    rows = tuple((r, tps[k], n) for (k, r), n in sorted(sol.plan.counts.items(), key=lambda x: x[0][1] != "prefill"))
    out = {"pool": {"rows": rows, "status": sol.result.status, "objective": sol.result.objective,
                    "bound": sol.result.bound, "gap": sol.result.gap}}
    try:
        base, _ = plan_from_workload(train[0], GPU, MODEL, 2, gpu_budget=cfg.gpu_budget, ttft_p90_s=cfg.ttft_s,
                                     tpot_s=cfg.tpot_s, tps=(2, 4, 8), objective="goodput")
        out["md1"] = {"rows": tuple((c["role"], c["tp"], c["instances"]) for c in sorted(
            base.parameters["counts"], key=lambda c: (c["role"] != "prefill", c["role"] != "colocated", c["tp"])))}
    except ValueError as exc:  # the mean request cannot meet the SLO: md1 picks nothing (goodput 0)
        out["md1"] = {"rows": (), "error": str(exc)}
    k = cfg.gpu_budget // 6
    out["fixed-2:1@tp2"] = {"rows": (("prefill", 2, 2 * k), ("decode", 2, k))}
    out["colocated@tp2"] = {"rows": (("colocated", 2, cfg.gpu_budget // 2),)}
    return out


def choose(plans: dict, must: set[str], cfg: Config) -> list[str]:
    """Plans to simulate: all, or the module docstring's sampling rule past ``max_plans``."""
    names = list(plans)
    if not cfg.max_plans or len(names) <= cfg.max_plans:
        return names
    keep = [n for n in names if plans[n]["rows"][0][0] == "colocated" or n in must]
    rest = [n for n in names if n not in keep]
    g = stream(0, "plans")
    take = max(0, cfg.max_plans - len(keep))
    return keep + [rest[i] for i in sorted(g.choice(len(rest), size=min(take, len(rest)), replace=False))]


class SimCache:
    """Simulated results in a JSON-lines file, keyed by (workload digest, plan rows, seed, SLO)."""

    def __init__(self, path: Path) -> None:
        self.path, self.rows = path, {}
        if path.exists():
            for ln in path.read_text().splitlines():
                r = json.loads(ln)
                self.rows[r["key"]] = r["result"]

    def get(self, wl, rows, seed: int, cfg: Config) -> dict:
        key = json.dumps([workload_digest(wl), [list(r) for r in rows], seed, cfg.ttft_s, cfg.tpot_s])
        if key not in self.rows:
            self.rows[key] = simulate_plan(wl, rows, seed, cfg) if rows else \
                {"goodput": 0.0, "ttft_p90_s": float("nan"), "tpot_p90_s": float("nan"), "attainment": 0.0}
            with self.path.open("a") as f:
                f.write(json.dumps({"key": key, "result": self.rows[key]}) + "\n")
        return self.rows[key]


def run_load(cfg: Config, name: str, load: float, cache: SimCache) -> dict:
    from optsched.pipelines.pd_pool_plan import pool_instance

    configs = [(GPU, MODEL, tp) for tp in (2, 4, 8)]
    train = [workload(cfg, name, True, 100 + s, load) for s in range(cfg.train_seeds)]
    scored = [workload(cfg, name, False, s, load) for s in range(cfg.seeds)]
    inst = pool_instance(train, configs, cfg.gpu_budget, cfg.ttft_s, cfg.tpot_s)
    inst_in = pool_instance(scored, configs, cfg.gpu_budget, cfg.ttft_s, cfg.tpot_s)
    plans = space(inst, cfg)
    pk = picks(train, inst, cfg)
    for p in pk.values():
        p["label"] = label(p["rows"]) if p["rows"] else "none"
    sim_names = choose(plans, {p["label"] for p in pk.values()}, cfg)
    for p in pk.values():
        if p["label"] not in plans and p["rows"]:
            plans[p["label"]] = {"rows": p["rows"], "predicted": predicted(inst, p["rows"]), "outside_space": True}
            sim_names.append(p["label"])
    for n in sim_names:
        pl = plans[n]
        pl["predicted_in"] = predicted(inst_in, pl["rows"])
        pl["goodput"] = [cache.get(wl, pl["rows"], s, cfg)["goodput"] for s, wl in enumerate(scored)]
        pl["detail"] = [cache.get(wl, pl["rows"], s, cfg) for s, wl in enumerate(scored)]
    simulated = {n: plans[n] for n in sim_names}
    in_space = [n for n in sim_names if not plans[n].get("outside_space")]
    best = max(in_space, key=lambda n: float(np.mean(plans[n]["goodput"])))
    zero = [0.0] * cfg.seeds
    for p in pk.values():
        gp = plans[p["label"]]["goodput"] if p["rows"] else zero
        d = paired_difference(plans[best]["goodput"], gp)
        p.update(goodput=float(np.mean(gp)), regret=d.mean, regret_ci=list(d.ci95),
                 tie=bool(p["label"] == best or d.ci95[0] <= 0.0))
    logger.info("%s %.2fx: best of %d plans %s %.3f; pool %s regret %.3f [%.3f, %.3f]", name, load, len(in_space),
                best, np.mean(plans[best]["goodput"]), pk["pool"]["label"], pk["pool"]["regret"],
                *pk["pool"]["regret_ci"])
    return {"load": load, "space": len(plans) - sum(1 for p in plans.values() if p.get("outside_space")),
            "simulated": len(in_space), "best": best, "best_goodput": float(np.mean(plans[best]["goodput"])),
            "picks": pk, "plans": simulated, "calls": [wl.num_calls for wl in scored],
            "train_calls": [wl.num_calls for wl in train]}


def tables(res: dict) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(plans, summary, predictor) tables of the results."""
    prow, srow, erow = [], [], []
    for w, by_load in res.items():
        for r in by_load:
            for n, p in r["plans"].items():
                m = mean_ci(p["goodput"])
                prow.append({"workload": w, "load": r["load"], "plan": n, "predicted": p["predicted"],
                             "predicted_in": p["predicted_in"], "simulated": m.mean, "ci_lo": m.ci95[0],
                             "ci_hi": m.ci95[1], "outside_space": bool(p.get("outside_space")),
                             "picked_by": ",".join(k for k, v in r["picks"].items() if v["label"] == n)})
            for k, v in r["picks"].items():
                srow.append({"workload": w, "load": r["load"], "method": k, "pick": v["label"], "goodput": v["goodput"],
                             "best": r["best"], "best_goodput": r["best_goodput"], "n_plans": r["simulated"],
                             "regret": v["regret"], "regret_lo": v["regret_ci"][0], "regret_hi": v["regret_ci"][1],
                             "verdict": (f"regret to the best of {r['simulated']} plans "
                                         f"{v['regret']:.3f} [{v['regret_ci'][0]:.3f}, {v['regret_ci'][1]:.3f}]: "
                                         + ("within the CI" if v["tie"] else "MISS"))})
    pl = pd.DataFrame(prow)
    for (w, load), grp in pl[~pl.outside_space].groupby(["workload", "load"], sort=False):
        err = grp.predicted - grp.simulated
        err_in = grp.predicted_in - grp.simulated
        worst = grp.loc[err.abs().idxmax()]
        erow.append({"workload": w, "load": load, "plans": len(grp), "median_abs_err": float(err.abs().median()),
                     "median_rel_err": float((err.abs() / grp.simulated.clip(lower=0.05)).median()),
                     "worst_plan": worst.plan, "worst_predicted": worst.predicted, "worst_simulated": worst.simulated,
                     "median_abs_err_in_sample": float(err_in.abs().median()),
                     "worst_abs_err_in_sample": float(err_in.abs().max())})
    return pl, pd.DataFrame(srow), pd.DataFrame(erow)


def plot(pl: pd.DataFrame, summ: pd.DataFrame, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ws = list(dict.fromkeys(summ.workload))
    fig, axes = plt.subplots(1, len(ws), figsize=(4 * len(ws), 3.2), squeeze=False)
    for ax, w in zip(axes[0], ws):
        for k, grp in summ[summ.workload == w].groupby("method", sort=False):
            ax.errorbar(grp.load, grp.regret, yerr=[grp.regret - grp.regret_lo, grp.regret_hi - grp.regret],
                        marker="o", capsize=3, label=k)
        ax.axhline(0, color="k", lw=0.5)
        ax.set(title=w, xlabel="load (x)", ylabel="regret to the best plan (calls/s)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "regret.png", dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(ws), figsize=(4 * len(ws), 3.5), squeeze=False)
    for ax, w in zip(axes[0], ws):
        d = pl[(pl.workload == w) & ~pl.outside_space]
        sc = ax.scatter(d.simulated, d.predicted, c=d.load, s=8, cmap="viridis")
        hi = float(max(d.simulated.max(), d.predicted.max(), 0.1))
        ax.plot([0, hi], [0, hi], "k--", lw=0.5)
        ax.set(title=w, xlabel="simulated goodput (calls/s)", ylabel="predicted, held out (calls/s)")
        fig.colorbar(sc, ax=ax, label="load")
    fig.tight_layout()
    fig.savefig(out / "predicted_vs_simulated.png", dpi=120)
    plt.close(fig)


def markdown(df: pd.DataFrame) -> str:
    """``df`` as a Markdown table, floats to 3 decimals."""
    cell = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)
    return "\n".join(["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
                     + ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]) + "\n"


def run(cfg: Config) -> dict:
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = SimCache(out / "sims.jsonl")
    res = {w: [run_load(cfg, w, float(load), cache) for load in cfg.loads] for w in cfg.workloads}
    (out / "results.json").write_text(json.dumps(res, indent=1, default=list))
    pl, summ, err = tables(res)
    pl.to_csv(out / "plans.csv", index=False)
    summ.to_csv(out / "summary.csv", index=False)
    err.to_csv(out / "predictor.csv", index=False)
    plot(pl, summ, out)
    (out / "provenance.json").write_text(json.dumps(collect_provenance(asdict(cfg), sys.argv, 0, ["arrivals", "workload",
                                                                                                "plans"]), indent=2))
    print(markdown(summ[["workload", "load", "method", "pick", "goodput", "best", "best_goodput", "verdict"]]))
    print(markdown(err))
    return res


def parse(argv: list[str] | None) -> Config:
    return parse_config(config_parser(Config, __doc__.split("\n")[0]), Config, argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    run(parse(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
