"""``optsched compare WORKLOAD``: which routing policy wins, by how much, how surely, how far from the best.

Imports nothing heavy at module level (solvers load only when an optimized policy is derived).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from optsched.cli._hardware import add_hardware_args
from optsched.compare.core import DEFAULT_TARGET

__all__ = ["register"]

EPILOG = """\
Method: one workload per replication (seed s: a generator draw, or the trace's own calls, with its arrival
gaps permuted); LOAD only scales the arrival process (every arrival and session start time / LOAD), the
calls are the same at every load. On a trace the first --train-fraction of its sessions are kept for
deriving the optimized policies and never evaluated. Every run is measured over a steady-state window (calls
ranked by release time, ranks 10%..90%: warm-up and drain left out). For every policy and replication the
crossing of the P90-interactivity target is found by search: the --loads grid seeds a bracket, which is
widened (x2 / /2, up to --max-widen times) until it brackets the target, then bisected in log-load to
--load-tol; goodput at the target is the value MEASURED at the crossing. A policy not bracketed in every
replication is "not_measured" and never ranked. Differences to the best heuristic are paired by replication
(per replication x/y - 1, Student-t 95% CI; a CI containing 0 is a tie); replications are added until every
such CI is within +-PRECISION percentage points or --max-seeds ran. Bound at the target
(optsched/compare/target_bound.py): SLO-feasible work in the window, evaluated at each policy's crossing;
headroom_closed = (policy - best heuristic) / (bound - best heuristic).

--json keys (schema optsched.compare/v2):
  verdict_line (the one-line result), workload, seeds[], n, config{...}, load_knob, window_rule, ci_method,
  precision{target_pp, max_seeds, widest_half_width_pp, reached}, best_heuristic (name or null),
  policies[].name, policies[].kind (heuristic | optimized | learned), policies[].n,
  policies[].verdict (better | tie | worse | reference | not_measured),
  policies[].crossing_bracketed (true only when every replication's crossing was bracketed),
  policies[].crossing_load {mean, ci95 [lo, hi], std, n, per_seed[]} (null when not bracketed),
  policies[].goodput_at_target {mean, ci95, std, n, per_seed[], status[] (bracketed | above_range |
      below_range)}, policies[].vs_best_heuristic {mean, ci95 (relative: 0.05 = +5%), std, n,
      half_width_pp} (null for the reference and unmeasured policies), policies[].headroom_closed,
  policies[].explain {queue_s, prefill_s, reload_s, transfer_s, tpot_mean_s, hit_hbm, hit_dram, hit_ssd,
      recomputed_frac, prefill_tokens_max_over_mean, calls_max_over_mean, preemptions: each {mean, ci95}}
      (window calls at the crossing; null when not measured),
  policies[].prediction_error {median_abs_s, p90_abs_s, mean_s (bias: simulated - predicted TTFT, s),
      median_rel (median |error| / simulated TTFT): each {mean, ci95} over replications; calls, source}: the
      policy's own TTFT prediction at routing time against the simulated TTFT of the window calls at its
      crossing (null for a policy that predicts nothing, e.g. a heuristic, or when not measured; the
      session router's in-sample value, from its calibration run:
      optimized_derivation.session.prediction_in_sample),
  policies[].non_monotone_seeds[], policies[].crossings[] (per replication: seed, status, crossing_load,
      bracket, goodput_at_target, interactivity_at_crossing, points [[load, P90 interactivity]],
      bound_calls_s, ttft_p90_s, hit_rate, prediction), policies[].front[] (per grid load: steady-state metrics
      {mean, ci95, std, n}),
  bound_at_target {mean, ci95, std, n, per_seed[]} (null when not every replication has one),
  bound_method, bound_over_best, split (how derivation data was kept apart from evaluated data),
  optimized_derivation (the solves the optimized policies came from; optimized_derivation.session.gate
      {outcome (deviate | fallback | no evidence), why, loads, target, tol, source, incumbent, router}: the
      safe-improvement gate, the session router against its incumbent on the derivation workload, whose
      "fallback" makes it route exactly as cache-aware; incumbent / router: each crossing search's status,
      crossing_load, goodput_at_target and points [[load, P90 interactivity, goodput]], null when nothing was
      measured; absent when the session router is not compared), failed{policy: reason}, runs,
  target_source, context_cut{seed: {calls_cut, sessions_cut}}, code_digest.
Files in --out: compare.json, compare.md (the verdict line and the table), fronts.png; run cache in
--out/cache (an interrupted comparison resumes).
Exit status: 0; 1 when a policy's runs raised (the files are still written, without that policy, and stderr
names it with its first error) or an optimized policy's derivation solve hit --solver-time-limit (nothing is
written; stderr says which solve); 2 for bad arguments.
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("compare", help="compare routing policies with seeds, CIs, fronts and bounds",
                              description=__doc__.splitlines()[0], epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", help="trace path (anything `workload stats` reads) or generator spec, "
                   "e.g. 'agentx:sessions=8,variant=256k'")
    p.add_argument("--policies", help="comma list (default: every baseline router of the registry + the optimized "
                   "price and session routers; rolling_milp — a MILP per routing decision, ~20x slower than a "
                   "heuristic — runs only when named)")
    p.add_argument("--combos", help="compare policy COMBINATIONS instead of routers: comma list of "
                   "ROUTER+ADMISSION+RESIDENCY (registry names; an optimized router; 'derived' = the admission / "
                   "residency door's policy solved on the training split; 'derived_event' = the event-driven residency rule, "
                   "hazard-priced eviction at arrivals and prefetch, derived on the same split; 'derived_ttl' = the "
                   "Continuum-style TTL with tool times from the split), or 'default' ("
                   "cache_aware+fcfs+lru, cache_aware+vllm_threshold+lru, least_outstanding+vllm_threshold+lru, "
                   "session+derived+derived, session+vllm_threshold+derived)")
    p.add_argument("--seeds", type=int, default=5, help="initial replications, >= 5 (default 5)")
    p.add_argument("--precision", type=float, default=5.0,
                   help="add replications until every paired CI vs the best heuristic is within +- this many "
                   "percentage points (default 5)")
    p.add_argument("--max-seeds", type=int, default=30, help="replication cap (default 30)")
    p.add_argument("--load-tol", type=float, default=0.02,
                   help="relative width in load at which the crossing search stops (default 0.02 = 2%%)")
    p.add_argument("--max-widen", type=int, default=4,
                   help="doublings / halvings of the load range allowed each way to bracket the target (default 4)")
    p.add_argument("--train-fraction", type=float, default=0.3,
                   help="trace: share of its sessions (earliest first) kept for deriving optimized policies and "
                   "never evaluated; replay:src=...: share of the real sessions (spread over the recording) that "
                   "only the derivation replays (default 0.3)")
    p.add_argument("--base-seed", type=int, default=0, help="seeds are BASE .. BASE+N-1 (default 0)")
    p.add_argument("--loads", default="0.25,0.5,1,2", help="arrival-rate multipliers that seed the crossing search, increasing (default 0.25,0.5,1,2)")
    p.add_argument("--target-interactivity", type=float, default=DEFAULT_TARGET,
                   help=f"P90 interactivity target, output tokens/s per user (default {DEFAULT_TARGET:g}: 1 / the "
                   "100 ms TPOT SLO, DistServe's chatbot SLO; MLPerf's Llama-2-70B server bound is 200 ms = 5 tok/s)")
    p.add_argument("--max-calls", type=int, default=0, help="trace: keep its first N calls (0 = all)")
    p.add_argument("--max-calls-per-session", type=int, default=0, help="keep each session's first N calls (0 = all)")
    add_hardware_args(p, tp=4)
    p.add_argument("--instances", type=int, default=4, help="colocated instances of the cluster (default 4)")
    p.add_argument("--max-num-batched-tokens", type=int, default=8192,
                   help="token budget of one engine step (default 8192, vLLM's)")
    p.add_argument("--slo-ttft", type=float, default=10.0, help="goodput SLO on TTFT, s (default 10)")
    p.add_argument("--slo-tpot", type=float, default=0.1, help="goodput SLO on TPOT, s (default 0.1)")
    p.add_argument("--window-calls", type=int, default=60,
                   help="routing window MILP size of the optimized policies, calls (default 60)")
    p.add_argument("--solver-node-limit", type=int, default=2000,
                   help="HiGHS branch-and-bound node limit of every derivation solve (1 thread; default 2000): "
                   "deterministic, unlike a time limit")
    p.add_argument("--solver-time-limit", type=float, default=3600.0,
                   help="wall-clock safety net of every derivation solve, s (default 3600); a solve it stops is an "
                   "error, since its result would depend on machine load")
    p.add_argument("--json", action="store_true", help="print the result JSON (keys below)")
    p.add_argument("--explain", action="store_true",
                   help="also print (and write to compare.md) where each policy's time goes at its crossing: TTFT "
                   "split into queueing / prefill / reload / transfer, mean TPOT, hits by tier, balance across "
                   "instances, preemptions (JSON: policies[].explain, always written)")
    p.add_argument("--out", help="write compare.json, compare.md, fronts.png and the run cache here "
                   "(default runs/compare-<workload>)")
    p.add_argument("--backend", choices=("local", "ray"), default="local", help="local processes or Ray")
    p.add_argument("--workers", type=int, default=0, help="processes / Ray CPUs (0 = CPUs of this machine)")
    p.add_argument("--address", help="Ray cluster address (--backend ray; default: start a local instance)")
    p.set_defaults(func=_run)


# CompareConfig's fields -> the flags that set them: its errors name the field (the Python API's name); the
# CLI user needs the flag
_FLAG_OF = {"base_seed": "--base-seed", "target interactivity": "--target-interactivity",
            "solver_node_limit": "--solver-node-limit", "solver_time_limit_s": "--solver-time-limit",
            "max_calls": "--max-calls", "max_calls_per_session": "--max-calls-per-session",
            "window_calls": "--window-calls", "cluster.tp": "--tp", "cluster.instances": "--instances",
            "cluster.max_num_batched_tokens": "--max-num-batched-tokens", "slo.ttft_s": "--slo-ttft",
            "slo.tpot_s": "--slo-tpot", "precision_pp": "--precision", "max_seeds": "--max-seeds",
            "load_tol": "--load-tol", "max_widen": "--max-widen", "train_fraction": "--train-fraction"}


def _flag_error(exc: ValueError) -> ValueError:
    """``exc`` with its leading CompareConfig field replaced by the flag (`_FLAG_OF`); unchanged otherwise."""
    text = str(exc)
    for field in sorted(_FLAG_OF, key=len, reverse=True):  # max_calls_per_session before max_calls
        if text.startswith(field + " must"):
            return ValueError(_FLAG_OF[field] + text[len(field):])
    return exc


def _loads(text: str) -> tuple[float, ...]:
    """``--loads`` "a,b,..." -> (a, b, ...): finite numbers > 0, strictly increasing.

    Raises:
        ValueError: one line naming --loads and the bad value (not a number, <= 0, not increasing, empty).
    """
    loads = []
    for x in (x.strip() for x in text.split(",")):
        if not x:
            continue
        try:
            v = float(x)
        except ValueError:
            raise ValueError(f"--loads {text}: {x!r} is not a number (comma-separated arrival-rate multipliers)") from None
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"--loads {text}: load {x} must be a finite number > 0 (an arrival-rate multiplier)")
        if loads and v <= loads[-1]:
            raise ValueError(f"--loads {text}: loads must be strictly increasing ({x} after {loads[-1]:g})")
        loads.append(v)
    if not loads:
        raise ValueError(f"--loads {text!r}: empty list (omit the flag for the default 0.25,0.5,1,2)")
    return tuple(loads)


def _config(args: argparse.Namespace, policies: tuple[str, ...] | None, combos: tuple | None = None):
    from optsched.compare.core import CompareConfig

    return CompareConfig(
        source=args.workload,
        policies=policies,
        seeds=args.seeds, base_seed=args.base_seed, loads=_loads(args.loads),
        target=args.target_interactivity, max_calls=args.max_calls,
        max_calls_per_session=args.max_calls_per_session, window_calls=args.window_calls,
        solver_node_limit=args.solver_node_limit, solver_time_limit_s=args.solver_time_limit,
        precision_pp=args.precision, max_seeds=args.max_seeds,
        load_tol=args.load_tol, max_widen=args.max_widen, train_fraction=args.train_fraction, combos=combos,
        cluster={"gpu": args.gpu, "model": args.model, "tp": args.tp, "instances": args.instances,
                 "max_num_batched_tokens": args.max_num_batched_tokens},
        slo={"ttft_s": args.slo_ttft, "tpot_s": args.slo_tpot})


def _run(args: argparse.Namespace) -> int:
    import os
    import re

    from optsched.compare.core import run_compare
    from optsched.compare.render import explain_table, markdown_table, plot_fronts

    if args.seeds < 5:
        raise ValueError(f"--seeds must be >= 5 (comparisons report 95% CIs over >= 5 replications), got {args.seeds}")
    if args.address and args.backend != "ray":
        raise ValueError("--address needs --backend ray")
    if args.workers < 0:
        raise ValueError(f"--workers must be >= 0 (0 = CPUs of this machine), got {args.workers}")
    workers = args.workers or (os.cpu_count() or 1)
    policies = None
    if args.policies is not None:
        policies = tuple(x.strip() for x in args.policies.split(",") if x.strip())
        if not policies:
            raise ValueError("--policies: empty list (omit the flag for the defaults)")
        dup = sorted({x for x in policies if policies.count(x) > 1})
        if dup:
            raise ValueError(f"--policies: named twice: {', '.join(dup)}")
    combos = None
    if args.combos is not None:
        if policies is not None:
            raise ValueError("--combos and --policies are exclusive: a comparison ranks routers or combinations")
        from optsched.compare.policies import parse_combos

        combos = parse_combos(args.combos)
    try:
        cfg = _config(args, policies, combos)
    except ValueError as exc:
        raise _flag_error(exc) from None
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(args.workload).stem if Path(args.workload).exists() else args.workload)
    out = Path(args.out or f"runs/compare-{slug}")
    if out.exists() and not out.is_dir():  # else every run was computed, then lost when its cache entry was written
        raise ValueError(f"--out {out}: exists and is not a folder")
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    from optsched.compare.policies import SolveTimedOut

    bars: list = []  # drawn at the first finished run, so a config error run_compare raises stays one line

    def progress(done: int, asked: int) -> None:  # the search asks for more runs as it goes: the total grows
        if not bars:
            bars.append(tqdm(total=asked, desc="runs done", unit="run", file=sys.stderr, dynamic_ncols=True,
                             leave=False))
        bars[0].total = asked
        bars[0].update(done - bars[0].n)

    try:
        # the search's INFO lines go through tqdm.write, above the bar, instead of into its line
        with logging_redirect_tqdm():
            try:
                res = run_compare(cfg, out / "cache", args.backend, workers, args.address, progress=progress)
            finally:
                for bar in bars:
                    bar.close()
    except SolveTimedOut as exc:  # a derivation the wall clock stopped: one line, not a traceback
        if args.verbose:
            raise
        print(f"optsched compare: error: {exc} (--solver-time-limit {args.solver_time_limit:g})", file=sys.stderr)
        return 1
    text = json.dumps(res, indent=2, allow_nan=False)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(text + "\n")
    md = markdown_table(res)
    if args.explain:
        md += "\n**Where the time goes at each crossing** (means over replications):\n\n" + explain_table(res)
    (out / "compare.md").write_text(md)
    plot_fronts(res, out / "fronts.png")
    print(text if args.json else md + f"\nwrote {out}/compare.json, compare.md, fronts.png")
    if args.json:  # the one-line verdict stays visible to a person reading a --json run
        print(res["verdict_line"], file=sys.stderr)
    failed = res.get("failed") or {}
    for name, why in sorted(failed.items()):  # a script must not take a table without a policy for a success
        print(f"optsched compare: policy {name} failed ({why}); left out of the table", file=sys.stderr)
    return 1 if failed else 0
