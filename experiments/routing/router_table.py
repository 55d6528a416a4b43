"""Router table: HBM hit rate, TTFT p50/p90, TPGS and KV imbalance of every baseline router on real traces.

Workloads (``--workloads``):
* ``mooncake``: the shipped Mooncake sample (``optsched.workload.samples.mooncake_sample``: first 2,000
  Kimi production requests, 512-token prefix block hashes; Qin et al., FAST 2025), open-loop replay at
  the trace timestamps.
* ``lmcache``: the shipped LMCache agent sessions (``lmcache_sample``: one mini-swe-agent and one
  tau-bench session, closed loop). The source recorded them two days apart, so their start times are
  re-based to ``k * --stagger-s`` (k = session index) to make them share the cluster.
* ``lmcache-full``: all 44 non-empty LMCache sessions from ``lmcache_agent_trace`` of the measured-data folder
  (skipped with a warning when the data folder is absent), re-based the same way.
Cluster: ``--instances`` colocated instances of ``--model`` on ``--gpu`` with tensor parallelism
``--tp`` (default llama-3-70b TP-4 on H200: 131,072-token context; Mooncake prompts reach 123,783 tokens,
half of them beyond llama-3-8b's 8,192), HBM-only prefix cache by default (``--dram-tier`` adds host DRAM), vLLM v1 scheduler defaults.
Every workload is fitted to the model's context by the shared rule (``cap_context``: a session ends before
its first too-long call; the cut count is logged and the ``calls`` column shows what ran).
Routers are every registered one (``optsched.sim.registry.policy_names("router")``), built by
``build_policy``: random routers draw from the registry's named stream of ``--seed``.

Not a second `optsched compare`: compare measures each router at its crossing of a P90-interactivity
target (load searched per replication, arrival gaps permuted, a steady-state window, paired CIs; with
``--explain`` TTFT split by cause, hits by tier, balance as max/mean of calls and prefill tokens), while
this table replays each trace once at its own timestamps and load and reports the whole run's HBM hit
rate, TTFT p50/p90, TPGS and KV imbalance. `optsched simulate` runs one YAML config per call (its
``--sweep`` CSV keeps neither the HBM-only hit rate nor KV imbalance). Every number here comes from the
library (``simulate``, ``build_policy``, ``cap_context``, the trace loaders); the script only picks the
workloads, re-bases the LMCache session starts and renders the table.

Usage:
    .venv/bin/python experiments/routing/router_table.py --out runs/router_table
Writes ``<out>/router_table.md`` (the table), ``<out>/router_table.csv`` and ``<out>/provenance.json``
(argv, config, git revision, package versions, seed), and prints the markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import platform
import sys
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from optsched.cost import CostModel
from optsched.cost.catalog import load_model
from optsched.revision import git_revision
from optsched.sim import ClusterConfig, InstanceConfig, SchedulerConfig, simulate
from optsched.sim.registry import build_policy, policy_names
from optsched.workload.context import cap_context
from optsched.workload.lmcache import load_lmcache_agent
from optsched.workload.samples import lmcache_sample, mooncake_sample
from optsched.workload.types import Workload

log = logging.getLogger("router_table")

CACHE_AWARE = ("cache_aware", "overlap_cost")

# column -> SimResult.summary key
COLUMNS = {
    "HBM hit rate": "hit_rate_hbm",
    "TTFT p50 (s)": "ttft_p50_s",
    "TTFT p90 (s)": "ttft_p90_s",
    "TPGS (tok/GPU-s)": "tpgs",
    "KV imbalance": "kv_imbalance",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("runs/router_table"),
                   help="output folder (router_table.md, router_table.csv, provenance.json; default runs/router_table)")
    p.add_argument("--instances", type=int, default=4, help="colocated serving instances (default 4)")
    p.add_argument("--gpu", default="h200-sxm", help="catalog GPU of every instance (default h200-sxm)")
    p.add_argument("--model", default="llama-3-70b",
                   help="catalog model; its context window cuts the sessions (default llama-3-70b)")
    p.add_argument("--tp", type=int, default=4, help="tensor-parallel degree of each instance (default 4)")
    p.add_argument("--dram-tier", action="store_true", help="add a host-DRAM tier (default: HBM only)")
    p.add_argument("--seed", type=int, default=0, help="root seed of the random routers' streams (default 0)")
    p.add_argument("--workloads", default="mooncake,lmcache,lmcache-full",
                   help="comma list of mooncake, lmcache, lmcache-full (default all three)")
    p.add_argument("--stagger-s", type=float, default=1.0, help="LMCache session k starts at k * this (s; default 1.0)")
    p.add_argument("--max-calls", type=int, default=0, help="Mooncake: keep the first N requests (0 = all)")
    p.add_argument("--routers", default=",".join(policy_names("router")),
                   help="comma list of registered router names (default: all, sorted)")
    args = p.parse_args(argv)
    try:  # an unknown catalog GPU / model or a TP the heads do not split by: one usage line, before any work
        CostModel.from_names(args.gpu, args.model, tp=args.tp)
    except ValueError as exc:
        p.error(str(exc))
    return args


DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def rebase(wl: Workload, stagger_s: float) -> Workload:
    """Session k starts at ``k * stagger_s`` (closed loop: later calls follow from the first)."""
    return dataclasses.replace(
        wl, sessions=tuple(dataclasses.replace(s, start_s=k * stagger_s) for k, s in enumerate(wl.sessions))
    )


def load_workloads(names: list[str], stagger_s: float, max_calls: int) -> dict[str, Workload]:
    known = ("mooncake", "lmcache", "lmcache-full")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"--workloads: unknown {unknown}, expected some of {known}")
    out: dict[str, Workload] = {}
    for n in names:
        if n == "mooncake":
            wl = mooncake_sample(load=True)
            if max_calls > 0:
                wl = dataclasses.replace(wl, sessions=wl.sessions[:max_calls])
            out[n] = wl
        elif n == "lmcache":
            out[n] = rebase(lmcache_sample(load=True), stagger_s)
        else:
            path = DATA / "lmcache_agent_trace"
            if not path.is_dir():
                log.warning("lmcache-full skipped: %s not found", path)
                continue
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*(not sorted|empty session file)")
                out[n] = rebase(load_lmcache_agent(path, name="lmcache-full"), stagger_s)
    return out


def cluster_config(args: argparse.Namespace) -> ClusterConfig:
    inst = InstanceConfig(role="colocated", gpu=args.gpu, model=args.model, tp=args.tp, count=args.instances)
    return ClusterConfig(instances=(inst,), scheduler=SchedulerConfig(), dram_tier=args.dram_tier, ssd_tier=False)


def run_table(args: argparse.Namespace) -> pd.DataFrame:
    workloads = load_workloads([w for w in args.workloads.split(",") if w], args.stagger_s, args.max_calls)
    routers = [r for r in args.routers.split(",") if r]
    known = policy_names("router")
    bad = [r for r in routers if r not in known]
    if bad:
        raise ValueError(f"--routers: unknown {bad}, expected some of {known}")
    cluster = cluster_config(args)
    ctx = load_model(args.model).max_context_tokens
    rows = []
    for wname, wl in workloads.items():
        wl, cut = cap_context(wl, ctx)  # the simulator rejects calls longer than the model's context
        if cut["calls_cut"]:
            log.warning("%s: %d calls in %d sessions cut to fit %s's %d-token context", wname, cut["calls_cut"],
                        cut["sessions_cut"], args.model, ctx)
        for rname in routers:
            router = build_policy("router", rname, seed=args.seed)
            t0 = time.perf_counter()
            res = simulate(wl, cluster, router=router, seed=args.seed)
            wall = time.perf_counter() - t0
            row = {"workload": wname, "router": rname}
            row.update({col: float(res.summary[key]) for col, key in COLUMNS.items()})
            row["preemptions"] = int(res.summary["preemptions"])
            row["calls"] = len(res.calls)
            row["wall_s"] = round(wall, 2)
            rows.append(row)
            log.info("%s / %s: %s", wname, rname, row)
    return pd.DataFrame(rows)


def to_markdown(df: pd.DataFrame) -> str:
    cols = ["workload", "router", *COLUMNS, "preemptions", "calls"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = [r["workload"], r["router"]]
        cells += [f"{r['HBM hit rate']:.3f}", f"{r['TTFT p50 (s)']:.3f}", f"{r['TTFT p90 (s)']:.3f}",
                  f"{r['TPGS (tok/GPU-s)']:.0f}", f"{r['KV imbalance']:.3f}", str(int(r["preemptions"])),
                  str(int(r["calls"]))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def provenance(args: argparse.Namespace, cluster: ClusterConfig) -> dict:
    rev = git_revision()["commit"]
    return {
        "argv": sys.argv,
        "args": {k: str(v) for k, v in vars(args).items()},
        "cluster": asdict(cluster),
        "git_revision": rev,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "machine": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse_args(argv)
    df = run_table(args)
    args.out.mkdir(parents=True, exist_ok=True)
    md = to_markdown(df)
    (args.out / "router_table.md").write_text(md)
    df.to_csv(args.out / "router_table.csv", index=False)
    (args.out / "provenance.json").write_text(json.dumps(provenance(args, cluster_config(args)), indent=2, default=str))
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
