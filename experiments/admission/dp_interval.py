"""Prefill schedule interval on a lockstep data-parallel group of 8: stretched steps, barrier idle, TPGS, TTFT.

A lockstep data-parallel group (``InstanceConfig.group``: every member starts each engine step together and the
step lasts as long as the slowest member's) pays for a prefill on one rank with a stretched step on every other
rank. ``SchedulerConfig.prefill_schedule_interval = N`` admits prefills that have not started only on steps whose
index is a multiple of N, so the ranks' prefills share steps (published illustration: 6 -> 3 stretched steps
when the interval is on), at the cost of the admission wait (TTFT).

Per seed one AgentX-like workload (256k variant, context-capped to the model; think times and lengths from the
published AgentX statistics, sessions shortened to ``min_calls + NB(extra_calls_mean)`` calls) is run on one
group of ``instances`` colocated instances under the cache-aware router, the same workload at every interval
(interval 1 = off). Reported per interval: stretched steps (`optsched.sim.metrics`: group steps whose duration a
prefill-carrying rank sets while a decode-only rank waits), their share of the group's steps, the barrier idle
fraction, TPGS, TTFT P90 and P90 interactivity; then each interval's paired-by-seed difference to off (95%
Student-t interval, `optsched.replicate`; an interval containing 0 is a tie).

Writes to ``--out``: results.csv (one row per seed x interval), results.json (config, rows, paired differences,
summary), dp_interval.png, provenance.json.

Usage: .venv/bin/python experiments/admission/dp_interval.py --out runs/prefill_interval [--quick]
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from optsched.config_cli import arg, config_parser, parse_config
from optsched.cost.catalog import load_model
from optsched.replicate import paired_difference, stream, verdict
from optsched.reproduce.provenance import collect_provenance
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, build_policy, simulate
from optsched.workload import generate_agentx
from optsched.workload.gen_agentx import AGENTX_VARIANTS

logger = logging.getLogger("dp_interval")

# summary key -> (column, label with unit)
METRICS = {
    "stretched_steps": ("stretched_steps", "stretched steps"),
    "stretched_step_frac": ("stretched_frac", "stretched steps / group steps"),
    "barrier_idle_frac": ("barrier_idle_frac", "barrier idle / GPU time"),
    "tpgs": ("tpgs", "TPGS (tok/s/GPU)"),
    "ttft_p90_s": ("ttft_p90_s", "TTFT P90 (s)"),
    "p90_interactivity_tok_s": ("p90_inter_tok_s", "P90 interactivity (tok/s)"),
}
QUICK = {"sessions": 32, "intervals": (1, 4, 8), "seeds": 2}


@dataclass(frozen=True, slots=True)
class Config:
    gpu: str = arg("h200-sxm", "catalog GPU of every instance")
    model: str = arg("llama-3-70b", "catalog model")
    tp: int = arg(4, "tensor-parallel degree of each instance (GPUs per instance)", at_least=1)
    instances: int = arg(8, "instances in the lockstep data-parallel group", at_least=2)
    sessions: int = arg(96, "AgentX-like sessions per seed (before the context cap drops the longest)", at_least=1)
    min_calls: int = arg(6, "calls of a session's main chain at least (AgentX: 20)", at_least=1)
    extra_calls_mean: float = arg(4.0, "mean of the negative-binomial extra calls (AgentX: 40)", above=0)
    concurrency: int = arg(0, "sessions in flight at most (0 = every session runs from time 0)", at_least=0)
    intervals: tuple[int, ...] = arg((1, 2, 4, 8), "prefill schedule intervals swept (steps; 1 = off, listed first)")
    claim_interval: int = arg(4, "interval whose stretched steps stand beside the published 6 -> 3 (vLLM's 4)",
                              at_least=2)
    seeds: int = arg(3, "replications (seeds 0..n-1), paired across intervals", at_least=1)
    quick: bool = arg(False, f"small budget ({QUICK['sessions']} sessions, intervals {QUICK['intervals']}, "
                             f"{QUICK['seeds']} seeds)")
    out: str = arg("runs/prefill_interval", "output folder (results.csv, results.json, dp_interval.png, provenance.json)")

    def __post_init__(self) -> None:
        if not self.intervals or self.intervals[0] != 1 or min(self.intervals) < 1:
            raise ValueError(f"intervals must start with 1 (off) and be >= 1, got {self.intervals}")
        if len(set(self.intervals)) != len(self.intervals):
            raise ValueError(f"intervals must be distinct, got {self.intervals}")
        from optsched.cost import CostModel

        CostModel.from_names(self.gpu, self.model, tp=self.tp)  # an unknown GPU / model or a bad TP: one usage line

    @property
    def budget(self) -> Config:
        """The config actually run: ``quick`` replaces sessions, intervals and seeds by `QUICK`."""
        return dataclasses.replace(self, quick=False, **QUICK) if self.quick else self


def workload(cfg: Config, seed: int):
    """Seed ``seed``'s AgentX-like workload (stream "dp_interval/workload" of the seed)."""
    p = dataclasses.replace(AGENTX_VARIANTS["256k"], min_calls=cfg.min_calls, extra_calls_mean=cfg.extra_calls_mean)
    return generate_agentx(cfg.sessions, stream(seed, "dp_interval/workload"), params=p,
                           max_context_tokens=load_model(cfg.model).max_context_tokens)


def run_one(cfg: Config, wl, interval: int, seed: int) -> dict:
    cl = ClusterConfig((InstanceConfig(gpu=cfg.gpu, model=cfg.model, tp=cfg.tp, count=cfg.instances, group=0),),
                       SchedulerConfig(prefill_schedule_interval=interval))
    s = simulate(wl, cl, router=build_policy("router", "cache_aware", seed=seed), seed=seed,
                 concurrency=cfg.concurrency).summary
    row = {"seed": seed, "interval": interval, "calls": int(s["num_calls"]), "group_steps": int(s["group_steps"])}
    row.update({col: s[key] for key, (col, _) in METRICS.items()})
    return row


def paired(df: pd.DataFrame) -> list[dict]:
    """Each interval > 1 against off, per metric: mean difference and 95% CI paired by seed (absolute, and
    relative where off is > 0 on every seed)."""
    off = df[df.interval == 1].sort_values("seed")
    out = []
    for n in sorted(set(df.interval) - {1}):
        x = df[df.interval == n].sort_values("seed")
        for col, label in METRICS.values():
            d = paired_difference(x[col].tolist(), off[col].tolist())
            rec = {"interval": int(n), "metric": col, "label": label, "off_mean": float(off[col].mean()),
                   "mean": float(x[col].mean()), "diff": d.to_dict(), "verdict": verdict(d) if d.n > 1 else "n/a"}
            if (off[col] > 0).all():
                rec["rel_diff"] = paired_difference(x[col].tolist(), off[col].tolist(), relative=True).to_dict()
            out.append(rec)
    return out


def run(cfg: Config, argv: list[str] | None = None) -> dict:
    b = cfg.budget
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in range(b.seeds):
        wl = workload(b, seed)
        for n in b.intervals:
            rows.append(run_one(b, wl, n, seed))
            logger.info("seed %d interval %d: %s", seed, n, {k: rows[-1][k] for k in ("stretched_steps", "tpgs")})
    df = pd.DataFrame(rows)
    df.to_csv(out / "results.csv", index=False)
    diffs = paired(df)
    n_claim = b.claim_interval if b.claim_interval in b.intervals else max(b.intervals)
    st = next((d for d in diffs if d["interval"] == n_claim and d["metric"] == "stretched_steps"), None)
    summary = {"instances": b.instances, "seeds": b.seeds, "calls_per_seed": df.groupby("seed")["calls"].first().tolist(),
               "claim_interval": n_claim,
               "stretched_off": st["off_mean"] if st else None, "stretched_on": st["mean"] if st else None,
               "stretched_rel_diff": st.get("rel_diff") if st else None,
               "stretched_verdict": st["verdict"] if st else "n/a",
               "by_interval": {str(n): {c: float(g[c].mean()) for c, _ in METRICS.values()}
                               for n, g in df.groupby("interval")}}
    res = {"config": asdict(b), "rows": rows, "paired": diffs, "summary": summary,
           "stretched_steps": {f"interval_{n}": float(g["stretched_steps"].mean()) for n, g in df.groupby("interval")}}
    (out / "results.json").write_text(json.dumps(res, indent=2))
    plot(df, b, out / "dp_interval.png")
    (out / "provenance.json").write_text(json.dumps(
        collect_provenance(asdict(cfg), list(argv if argv is not None else sys.argv), 0,
                           ["dp_interval/workload"]), indent=2))
    return res


def plot(df: pd.DataFrame, cfg: Config, path: Path) -> None:
    """One panel per metric against the interval: each seed's run as a thin line (the pairing the differences
    use), the mean over seeds as the thick one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = ["stretched_steps", "barrier_idle_frac", "tpgs", "ttft_p90_s"]
    labels = {col: label for col, label in METRICS.values()}
    fig, axes = plt.subplots(2, 2, figsize=(8.4, 6.2))
    xs = sorted(df.interval.unique())
    for ax, col in zip(axes.flat, panels):
        for seed, g in df.groupby("seed"):
            g = g.sort_values("interval")
            ax.plot(g.interval, g[col], color="0.6", lw=0.8, marker=".", label="one seed" if seed == 0 else None)
        ax.plot(xs, [df[df.interval == n][col].mean() for n in xs], color="C0", lw=2, marker="o",
                label=f"mean of {cfg.seeds} seeds")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [("off" if n == 1 else str(n)) for n in xs])
        ax.set_xlabel("prefill schedule interval (steps)")
        ax.set_ylabel(labels[col])
        ax.grid(True, alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"Lockstep data-parallel group of {cfg.instances} x {cfg.model} TP{cfg.tp} on {cfg.gpu}\n"
                 f"AgentX-like, {cfg.sessions} sessions per seed, cache-aware router", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg = parse_config(config_parser(Config, __doc__.split("\n")[0]), Config, argv)
    res = run(cfg, argv)
    print(json.dumps(res["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
