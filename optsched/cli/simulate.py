"""``optsched simulate CONFIG.yaml``: run a simulation config; ``--sweep key=v1,v2`` for a Pareto front.

Prints a short summary (``--json``: the whole summary as JSON). ``--out DIR`` writes the result
files (`SimResult.write`). ``--sweep concurrency=1,2,4,8`` (any dotted config key) runs one
simulation per value and writes ``sweep.csv`` and ``pareto.png`` (P90 interactivity vs TPGS per GPU,
Pareto-optimal points joined) into ``--out`` (default ``runs/sweep-<name>``).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

__all__ = ["pareto_front", "plot_pareto", "register"]

_SHOW = ("num_calls", "makespan_s", "ttft_p50_s", "ttft_p90_s", "tpot_p50_s", "tpot_p90_s", "itl_p90_s", "itl_p99_s",
         "itl_max_p90_s", "e2e_p90_s",
         "session_completion_p90_s", "p90_interactivity_tok_s", "tpgs", "hit_rate", "slo_attainment",
         "preemptions", "mean_queue_depth")


def register(subparsers) -> None:
    p = subparsers.add_parser("simulate", help="simulate a config (YAML) on the cluster simulator")
    p.add_argument("config", help="simulation config YAML (see experiments/configs/)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--out", help="write calls.csv, timeseries.csv, summary.json, config.json, metrics_aiperf.json here")
    p.add_argument("--sweep", help="KEY=V1,V2,... (dotted config key), e.g. concurrency=1,2,4,8")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--block-size", type=int, default=None, metavar="TOKENS",
                   help="tokens per hash id of the trace at workload.path when its rows do not record it "
                        "(Agentic / multi-turn Mooncake, LMCache: default 512); sets workload.block_size")
    p.set_defaults(func=_run)


def _parse_sweep(text: str) -> tuple[str, list]:
    import yaml

    key, sep, vals = text.partition("=")
    if not sep or not key or not vals:
        raise ValueError(f"--sweep expects KEY=V1,V2,..., got {text!r}")
    values = [yaml.safe_load(v) for v in vals.split(",")]
    dup = [v for k, v in enumerate(values) if v in values[:k]]
    if dup:  # the same run twice: a duplicate point on the front, and the runs' output folders collide
        raise ValueError(f"--sweep {text}: value {dup[0]!r} named twice")
    return key, values


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of points not dominated when both coordinates are better larger, sorted by the first."""
    idx = [i for i, (x, y) in enumerate(points) if not (math.isnan(x) or math.isnan(y))]
    front = [i for i in idx if not any(points[j][0] >= points[i][0] and points[j][1] >= points[i][1]
                                       and points[j] != points[i] for j in idx)]
    return sorted(front, key=lambda i: points[i][0])


def plot_pareto(rows: list[dict], key: str, path: Path) -> None:
    """Scatter of P90 interactivity (tok/s/user) vs TPGS per GPU with the Pareto front; PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [(r["p90_interactivity_tok_s"] or float("nan"), r["tpgs"] or float("nan")) for r in rows]
    front = pareto_front(pts)
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.scatter([p[0] for p in pts], [p[1] for p in pts], color="tab:blue")
    labels: dict[tuple[float, float], list[str]] = {}  # points that coincide share one label: "key=2/4"
    for r, p in zip(rows, pts):
        labels.setdefault(p, []).append(str(r[key]))
    for p, vals in labels.items():
        ax.annotate(f"{key}={'/'.join(vals)}", p, fontsize=7, xytext=(3, 3), textcoords="offset points")
    # ringed markers: a one-point front (e.g. every point at the same interactivity) stays visible
    ax.plot([pts[i][0] for i in front], [pts[i][1] for i in front], color="tab:red", marker="o",
            markerfacecolor="none", markersize=11, label="Pareto front")
    ax.set_xlabel("P90 interactivity (output tok/s per user)")
    ax.set_ylabel("TPGS (tokens / GPU-s)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _run(args: argparse.Namespace) -> int:
    from tqdm.contrib.logging import logging_redirect_tqdm

    with logging_redirect_tqdm():  # log lines (-v) above the simulator's progress bar, not inside its line
        return _simulate(args)


def _simulate(args: argparse.Namespace) -> int:
    from optsched.sim.result import _clean
    from optsched.sim_file import apply_override, check_config, load_config_dict, run_config

    cfg = load_config_dict(args.config)
    if args.block_size is not None:
        cfg = apply_override(cfg, "workload.block_size", args.block_size)
    if not args.sweep:
        if args.out:  # a file of that name is refused before the run, not after it
            from optsched.output import prepare_output_dir

            prepare_output_dir(args.out)
        res = run_config(cfg, progress=not args.no_progress)
        if args.out:
            res.write(args.out)
        s = _clean(res.summary)
        if args.json:
            print(json.dumps(s, sort_keys=True, indent=1))
        else:
            for k in _SHOW:
                if k in s:
                    print(f"{k:28s} {s[k]}")
        return 0
    key, values = _parse_sweep(args.sweep)
    configs = []
    for v in values:  # every value checked before the first run: a typo in the last one used to fail after the rest ran
        c = apply_override(cfg, key, v)
        try:
            check_config(c)
        except ValueError as exc:
            raise ValueError(f"--sweep {key}={v}: {exc}") from None
        configs.append(c)
    from optsched.output import prepare_output_dir

    out = prepare_output_dir(args.out or f"runs/sweep-{cfg.get('name', Path(args.config).stem)}")
    rows = []
    for v, c in zip(values, configs):
        res = run_config(c, progress=not args.no_progress)
        res.write(out / f"{key}={v}")
        s = _clean(res.summary)
        rows.append({key: v, **{k: s.get(k) for k in _SHOW}})
    import pandas as pd

    pd.DataFrame(rows).to_csv(out / "sweep.csv", index=False, float_format="%.9g", lineterminator="\n")
    plot_pareto(rows, key, out / "pareto.png")
    if args.json:
        print(json.dumps(rows, sort_keys=True, indent=1))
    else:
        print(pd.DataFrame(rows)[[key, "p90_interactivity_tok_s", "tpgs", "ttft_p90_s", "tpot_p90_s"]].to_string(index=False))
        print(f"wrote {out / 'sweep.csv'} and {out / 'pareto.png'}")
    return 0
