"""Concurrency sweep of vLLM's ``long_prefill_token_threshold`` on an AgentX-like workload (E2 of the report).

Seed claim: ``long_prefill_token_threshold=512`` raises TPGS and P90 interactivity over no threshold
(published vLLM: up to +93% TPGS and ~2.3x P90 interactivity at the sweep's best point) and raises the TTFT
of the longest prefills. Scheduler variants (``SchedulerConfig``; see ``optsched.sim.scheduler``):

- ``off``: no threshold (vLLM v1 default; a running prefill takes the whole 8192-token budget).
- ``v1_512``: vLLM v1 ``--long-prefill-token-threshold 512`` (per-request chunk cap only; the claim's variant).
- ``pp_uncached``: 512 plus vLLM v0's concurrent partial prefills (``max_num_partial_prefills=4``,
  ``max_long_partial_prefills=1``) with "long" counted after the prefix-cache hit, so warm agentic calls
  (few new tokens) start ahead of a running cold 100K-token prefill.
- ``pp_v0``: the same with vLLM v0's own "long" test (prompt tokens not yet computed, prefix hits included).

Per seed one AgentX-like workload (256k variant, ``extra_calls_mean`` 10, context-capped to the model: sessions end
before their first call longer than the model's context) runs closed loop with ``concurrency`` sessions at a time
on one instance, the same workload for every variant and concurrency. Per (seed, concurrency, variant): TPGS (all
tokens, cached included, per GPU-second), P90 interactivity (1 / P90 per-token ITL), per-call P90 interactivity,
TTFT P50, mean TTFT of the top decile of prefilled tokens (the cost to long requests), HBM hit rate, preemptions,
and a windowed TPGS (tokens of the calls finished by T / (GPUs x T), T = half of ``off``'s makespan at that
(seed, concurrency)). Each variant against ``off`` at the same (seed, concurrency): ratio, paired by seed (95%
Student-t interval of the ratio - 1, `optsched.replicate`; an interval containing 0 is a tie). The claim's two
readings: at the sweep's best point (the concurrency of ``off``'s highest mean TPGS) and the largest gain over the
sweep ("up to").

Writes to ``--out``: results.csv (one row per seed x concurrency x variant), results.json (config, rows, ratios,
paired, summary), fronts.png, provenance.json.

Usage: .venv/bin/python experiments/admission/threshold_sweep.py --out runs/threshold_sweep [--quick]
       [--sessions 48] [--seeds 0 1] [--conc 16 24 32 40 48] [--variants off v1_512 pp_uncached pp_v0] [--tp 8]
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
from optsched.cost import CostModel
from optsched.cost.catalog import load_model
from optsched.output import OutputError, prepare_output_dir
from optsched.replicate import paired_difference, stream, verdict
from optsched.reproduce.provenance import collect_provenance
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.workload import generate_agentx
from optsched.workload.gen_agentx import AGENTX_VARIANTS

logger = logging.getLogger("threshold_sweep")

PARAMS = dataclasses.replace(AGENTX_VARIANTS["256k"], session_rate_per_s=1.0, extra_calls_mean=10)
_PP = {"long_prefill_token_threshold": 512, "max_num_partial_prefills": 4, "max_long_partial_prefills": 1}
VARIANTS: dict[str, dict] = {
    "off": {},
    "v1_512": {"long_prefill_token_threshold": 512},
    "pp_uncached": {**_PP, "long_prefill_basis": "uncached"},
    "pp_v0": {**_PP, "long_prefill_basis": "uncomputed"},
}
LABELS = {"off": "no threshold (off)", "v1_512": "threshold 512 (vLLM v1)",
          "pp_uncached": "512 + one long partial prefill (uncached)", "pp_v0": "512 + one long partial prefill (v0)"}
CLAIM_VARIANT = "v1_512"
# ratio columns: metric -> label with unit
RATIO_COLS = {"tpgs": "TPGS (tok/s/GPU)", "p90_inter_tok_s": "P90 interactivity (tok/s)",
              "p90_inter_call_tok_s": "per-call P90 interactivity (tok/s)",
              "ttft_top10_s": "TTFT of the top decile of prefills (s)", "tpgs_win": "windowed TPGS (tok/s/GPU)"}
QUICK = {"sessions": 48, "seeds": (0, 1), "conc": (16, 32, 48), "tp": 4, "variants": ("off", "v1_512", "pp_uncached")}
STREAM = "threshold_sweep/workload"


@dataclass(frozen=True, slots=True)
class Config:
    sessions: int = arg(48, "AgentX 256K sessions (extra_calls_mean=10) per seed, before the context cap", at_least=1)
    seeds: tuple[int, ...] = arg((0,), "workload seeds (stream 'threshold_sweep/workload' of each); paired across "
                                       "variants", at_least=0)
    conc: tuple[int, ...] = arg((16, 24, 32, 40, 48), "closed-loop concurrencies (sessions run at a time; 0 = each "
                                                      "at its own start time)", at_least=0)
    variants: tuple[str, ...] = arg(tuple(VARIANTS), "scheduler variants (module docstring); 'off' first",
                                    choices=tuple(VARIANTS))
    model: str = arg("llama-3-70b", "catalog model (one H200 instance)")
    tp: int = arg(8, "tensor-parallel degree of the instance (GPUs)", at_least=1)
    dram: bool = arg(False, "give the prefix cache a host-DRAM tier")
    gap_s: tuple[float, ...] = arg((PARAMS.gap_median_s, PARAMS.gap_p95_s),
                                   "think-time median and p95 (s; AgentX's by default)", above=0)
    quick: bool = arg(False, f"small budget ({QUICK['sessions']} sessions, seeds {QUICK['seeds']}, concurrencies "
                             f"{QUICK['conc']}, TP{QUICK['tp']}: half the KV, so the larger concurrencies overfill "
                             f"HBM; variants {' '.join(QUICK['variants'])})")
    out: str = arg("runs/threshold_sweep", "output folder (results.csv, results.json, fronts.png, provenance.json)")

    def __post_init__(self) -> None:
        if not self.variants or self.variants[0] != "off" or len(set(self.variants)) != len(self.variants):
            raise ValueError(f"variants must be distinct and start with 'off' (the reference), got {self.variants}")
        if len(self.gap_s) != 2 or not self.gap_s[0] < self.gap_s[1]:
            raise ValueError(f"gap_s must be two values MEDIAN < P95 (s), got {self.gap_s}")
        if len(set(self.seeds)) != len(self.seeds) or len(set(self.conc)) != len(self.conc):
            raise ValueError(f"seeds and conc must be distinct, got {self.seeds} / {self.conc}")
        InstanceConfig(gpu="h200-sxm", model=self.model, tp=self.tp)  # bad TP: one line
        load_model(self.model)  # an unknown model: one usage line before any work
        CostModel.from_names("h200-sxm", self.model, tp=self.tp)  # a TP that does not divide the heads: one line too

    @property
    def budget(self) -> Config:
        """The config actually run: ``quick`` replaces sessions, seeds, concurrencies and variants by `QUICK`."""
        return dataclasses.replace(self, quick=False, **QUICK) if self.quick else self


def cluster(variant: str, model: str = "llama-3-70b", tp: int = 8, dram: bool = False) -> ClusterConfig:
    return ClusterConfig(instances=(InstanceConfig(gpu="h200-sxm", model=model, tp=tp, count=1),),
                         scheduler=SchedulerConfig(**VARIANTS[variant]), dram_tier=dram)


def workload(cfg: Config, seed: int):
    """Seed ``seed``'s AgentX-like workload (stream `STREAM` of the seed), cut at the model's context."""
    p = dataclasses.replace(PARAMS, gap_median_s=cfg.gap_s[0], gap_p95_s=cfg.gap_s[1])
    return generate_agentx(cfg.sessions, stream(seed, STREAM), params=p,
                           max_context_tokens=load_model(cfg.model).max_context_tokens)


def top_decile_ttft_s(calls: pd.DataFrame) -> float:
    """Mean TTFT (s) of the calls in the top decile of prefilled (computed, not cached) tokens."""
    q = calls["prefilled_tokens"].quantile(0.9)
    return float(calls.loc[calls["prefilled_tokens"] >= q, "ttft_s"].mean())


def windowed_tpgs(calls: pd.DataFrame, gpus: int, t_s: float) -> float:
    """Tokens (input incl. cached + output) of the calls finished by ``t_s``, per GPU-second of [0, t_s]."""
    d = calls[calls["finish_s"] <= t_s]
    return float((d["input_tokens"].sum() + d["output_tokens"].sum()) / (gpus * t_s))


def run_one(wl, variant: str, c: int, model: str, tp: int, dram: bool, t_win_s: float | None = None) -> dict:
    r = simulate(wl, cluster(variant, model, tp, dram), concurrency=c)
    s = r.summary
    hit = float(r.calls["hit_hbm_tokens"].sum() / r.calls["input_tokens"].sum())
    t_win_s = t_win_s or 0.5 * float(r.calls["finish_s"].max())
    return {"concurrency": c, "variant": variant, "tpgs": s["tpgs"], "p90_inter_tok_s": s["p90_interactivity_token_tok_s"],
            "p90_inter_call_tok_s": s["p90_interactivity_tok_s"], "ttft_p50_s": s["ttft_p50_s"],
            "ttft_top10_s": top_decile_ttft_s(r.calls), "hbm_hit": hit, "preemptions": s["preemptions"],
            "tpgs_win": windowed_tpgs(r.calls, tp, t_win_s), "t_win_s": t_win_s, "calls": len(r.calls)}


def sweep(cfg: Config) -> pd.DataFrame:
    rows = []
    for seed in cfg.seeds:
        wl = workload(cfg, seed)
        for c in cfg.conc:
            t_win = None  # half of the first variant's makespan ('off'), common to all
            for v in cfg.variants:
                row = run_one(wl, v, c, cfg.model, cfg.tp, cfg.dram, t_win)
                t_win = row["t_win_s"]
                rows.append({"seed": seed, **row})
                logger.info("seed %d c %d %s: TPGS %.4g, P90 interactivity %.3g tok/s", seed, c, v, row["tpgs"],
                            row["p90_inter_tok_s"])
    return pd.DataFrame(rows)


def ratios(df: pd.DataFrame) -> pd.DataFrame:
    """Each variant's metrics divided by ``off`` at the same (seed, concurrency)."""
    cols = list(RATIO_COLS)
    if "off" not in set(df.variant):
        return pd.DataFrame()  # nothing to divide by (a table of NaN before)
    base = df[df.variant == "off"].set_index(["seed", "concurrency"])[cols]
    out = []
    for v in df.variant.unique():
        if v == "off":
            continue
        r = df[df.variant == v].set_index(["seed", "concurrency"])[cols] / base
        out.append(r.assign(variant=v).reset_index())
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def paired(df: pd.DataFrame) -> list[dict]:
    """Each variant against ``off`` per concurrency and metric: the ratio's mean, and ratio - 1 paired by seed
    (95% t interval; a verdict only with two seeds or more)."""
    out = []
    for v in [x for x in df.variant.unique() if x != "off"]:
        for c in sorted(df.concurrency.unique()):
            off = df[(df.variant == "off") & (df.concurrency == c)].sort_values("seed")
            x = df[(df.variant == v) & (df.concurrency == c)].sort_values("seed")
            for col in RATIO_COLS:
                d = paired_difference(x[col].tolist(), off[col].tolist(), relative=True)
                out.append({"variant": v, "concurrency": int(c), "metric": col, "off_mean": float(off[col].mean()),
                            "mean": float(x[col].mean()), "rel_diff": d.to_dict(),
                            "verdict": verdict(d) if d.n > 1 else "n/a"})
    return out


def summarize(df: pd.DataFrame, diffs: list[dict], cfg: Config) -> dict:
    """The claim's two readings for each variant: at the best point (the concurrency of off's highest mean TPGS)
    and at the concurrency of its largest mean TPGS / P90 interactivity gain."""
    off = df[df.variant == "off"].groupby("concurrency")["tpgs"].mean()
    best_c = int(off.idxmax())
    by = {(d["variant"], d["concurrency"], d["metric"]): d for d in diffs}
    variants = {}
    for v in [x for x in cfg.variants if x != "off"]:
        at = {m: by[(v, best_c, m)] for m in ("tpgs", "p90_inter_tok_s", "ttft_top10_s")}
        up = {}
        for m in ("tpgs", "p90_inter_tok_s"):
            c = max(cfg.conc, key=lambda k: (by[(v, k, m)]["rel_diff"]["mean"], -k))
            up[m] = {"concurrency": int(c), **by[(v, c, m)]}
        ttft = [by[(v, c, "ttft_top10_s")]["rel_diff"]["mean"] + 1 for c in cfg.conc]
        variants[v] = {"at_best": at, "largest": up, "ttft_top10_ratio_range": [min(ttft), max(ttft)]}
    return {"best_concurrency": best_c, "off_tpgs_at_best": float(off.max()), "seeds": list(cfg.seeds),
            "calls_per_seed": df[(df.variant == "off")].groupby("seed")["calls"].first().tolist(),
            "claim_variant": CLAIM_VARIANT, "variants": variants}


def run(cfg: Config, argv: list[str] | None = None) -> dict:
    b = cfg.budget
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    df = sweep(b)
    df.to_csv(out / "results.csv", index=False)
    diffs = paired(df)
    r = ratios(df)
    res = {"config": asdict(b), "rows": df.to_dict("records"), "ratios": r.to_dict("records") if not r.empty else [],
           "paired": diffs, "summary": summarize(df, diffs, b)}
    (out / "results.json").write_text(json.dumps(res, indent=2))
    plot(df, b, out / "fronts.png")
    (out / "provenance.json").write_text(json.dumps(
        collect_provenance(asdict(cfg), list(argv if argv is not None else sys.argv), 0, [STREAM]), indent=2))
    return res


def plot(df: pd.DataFrame, cfg: Config, path: Path) -> None:
    """Left: the latency-throughput front per variant (mean over seeds at each concurrency, labelled); middle:
    TPGS vs concurrency; right: TTFT of the top decile of prefills vs concurrency (log: it spans decades)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    m = df.groupby(["variant", "concurrency"], sort=False)[["tpgs", "p90_inter_tok_s", "ttft_top10_s"]].mean()
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 4.3))
    for i, v in enumerate(cfg.variants):
        g = m.loc[v].sort_index()
        kw = {"color": f"C{i}", "marker": "o", "label": LABELS[v]}
        axes[0].plot(g.tpgs, g.p90_inter_tok_s, **kw)
        for c, row in g.iterrows():
            axes[0].annotate(f"c={c}", (row.tpgs, row.p90_inter_tok_s), fontsize=7, xytext=(3, 3),
                             textcoords="offset points", color=f"C{i}")
        axes[1].plot(g.index, g.tpgs, **kw)
        axes[2].plot(g.index, g.ttft_top10_s, **kw)
    axes[0].set(xlabel="TPGS (tokens/s per GPU, cached included)", ylabel="P90 interactivity (output tok/s, log)",
                yscale="log", title="front (each point: one concurrency)")
    axes[1].set(xlabel="concurrency (sessions in flight)", ylabel="TPGS (tokens/s per GPU)", title="TPGS")
    axes[2].set(xlabel="concurrency (sessions in flight)", ylabel="mean TTFT, top decile of prefills (s, log)",
                yscale="log", title="cost to long requests")
    plain = matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}")  # 20, not 2 x 10^1, on the log axes
    for ax in (axes[0], axes[2]):
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.tick_params(axis="y", which="minor", labelsize=7)
    for ax in axes:
        ax.grid(True, alpha=0.3, which="both")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Long-prefill threshold x concurrency: AgentX-like 256k, {cfg.sessions} sessions per seed, "
                 f"mean of {len(cfg.seeds)} seed(s); one {cfg.model} TP{cfg.tp} instance on H200", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = config_parser(Config, __doc__.split("\n")[0])
    cfg = parse_config(parser, Config, argv)
    try:  # an --out that cannot be a folder: one line now, not a traceback (before any simulation)
        prepare_output_dir(cfg.out)
    except OutputError as exc:
        parser.error(f"--out: {exc}")
    res = run(cfg, argv)
    pd.set_option("display.width", 220)
    print(pd.DataFrame(res["rows"]).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    s = res["summary"]
    print(f"best point of off: concurrency {s['best_concurrency']} (TPGS {s['off_tpgs_at_best']:.4g}); ratio to off, "
          "mean [95% CI] paired by seed:")
    for v, d in s["variants"].items():
        cells = [f"{k} {m}: x{e['rel_diff']['mean'] + 1:.3f} [{e['rel_diff']['ci95'][0] + 1:.3f}, "
                 f"{e['rel_diff']['ci95'][1] + 1:.3f}]" for k, x in (("at best", d["at_best"]), ("largest", d["largest"]))
                 for m, e in x.items() if m in ("tpgs", "p90_inter_tok_s")]
        print(f"  {v}: " + "; ".join(cells))
    print(f"results: {Path(cfg.out) / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
