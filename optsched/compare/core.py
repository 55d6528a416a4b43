"""`run_compare`: policies x seeds x loads simulated, fronts read at the target, CIs, bounds, headroom.

Result (``optsched.compare/v1`` JSON; keys documented in `optsched.cli.compare`): per policy the goodput
at the target P90 interactivity (mean and 95% t CI over seeds, each seed read off the policy's own front,
`optsched.compare.fronts`), its paired relative difference to the best heuristic (per seed x/y - 1, t
CI; "tie" when it crosses 0, `optsched.replicate`), the equal-load front (every policy at the same
loads), the routing upper bound (`optsched.compare.bounds`) and the share of headroom closed
(policy - best heuristic) / (bound - best heuristic). No wall clock: reruns are byte-identical.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from optsched.compare.fronts import at_target
from optsched.replicate import Estimate, mean_ci, paired_difference, verdict

__all__ = ["DEFAULT_TARGET", "LOAD_KNOB", "TARGET_SOURCE", "CompareConfig", "headroom_closed", "run_compare"]

log = logging.getLogger(__name__)

LOAD_KNOB = ("arrival-rate multiplier: generator with sessions=K -> round(K x load) sessions, starts / load; "
             "trace -> arrival and session start times / load")
DEFAULT_TARGET = 10.0
TARGET_SOURCE = ("10 output tok/s per user = 1 / the goodput SLO's TPOT of 100 ms (DistServe, OSDI'24, Table 1: "
                 "chatbot TPOT SLO 0.1 s), so the P90 user streams within the TPOT SLO; MLPerf Inference's "
                 "Llama-2-70B server constraint (loadgen mlperf.conf: tpot_latency 200 ms at P99, i.e. 5 tok/s) is "
                 "the lenient end for this model class")
CI_METHOD = "Student t 95% interval over seeds (ddof=1); differences paired by seed; a CI containing 0 is a tie"


@dataclass(frozen=True, slots=True)
class CompareConfig:
    """One comparison. ``source``: trace path or generator spec. ``policies``: names (None = every baseline
    router + every derivable optimized policy). ``seeds``: replications (>= 2; the CLI asks >= 5), seeds
    ``base_seed .. base_seed + seeds - 1``. ``loads``: arrival-rate multipliers (increasing). ``target``:
    P90 interactivity (output tokens/s per user). ``cluster``/``slo``: as `optsched.compare.jobs`.
    ``max_calls``: keep the first calls of a trace (0 = all); ``max_calls_per_session``: each session's first
    calls (0 = all); see `optsched.compare.replication`. ``window_calls``: the routing window MILP of
    the optimized policies. ``solver_node_limit`` / ``solver_time_limit_s``: every derivation solve runs
    with 1 thread and this HiGHS node limit; the wall-clock limit is a safety net, and a solve it stops
    raises (`optsched.compare.policies`), so results never depend on machine load. Raises ValueError
    naming the field."""

    source: str
    policies: tuple[str, ...] | None = None
    seeds: int = 5
    base_seed: int = 0
    loads: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)
    target: float = DEFAULT_TARGET
    cluster: dict[str, Any] = field(default_factory=lambda: {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4,
                                                             "instances": 4, "max_num_batched_tokens": 8192})
    slo: dict[str, float] = field(default_factory=lambda: {"ttft_s": 10.0, "tpot_s": 0.1})
    max_calls: int = 0
    max_calls_per_session: int = 0
    window_calls: int = 60
    solver_node_limit: int = 2000
    solver_time_limit_s: float = 3600.0

    def __post_init__(self) -> None:
        if not isinstance(self.seeds, int) or self.seeds < 2:
            raise ValueError(f"seeds must be an int >= 2 (a CI needs spread), got {self.seeds!r}")
        if not isinstance(self.base_seed, int) or self.base_seed < 0:
            raise ValueError(f"base_seed must be an int >= 0, got {self.base_seed!r}")
        if not self.loads or any(not (isinstance(x, (int, float)) and x > 0 and math.isfinite(x)) for x in self.loads) \
                or list(self.loads) != sorted(set(self.loads)):
            raise ValueError(f"loads must be strictly increasing positive numbers, got {self.loads!r}")
        if not (isinstance(self.target, (int, float)) and self.target > 0 and math.isfinite(self.target)):
            raise ValueError(f"target interactivity must be a positive number, got {self.target!r}")
        if not isinstance(self.solver_node_limit, int) or self.solver_node_limit < 1:
            raise ValueError(f"solver_node_limit must be an int >= 1, got {self.solver_node_limit!r}")
        if not (isinstance(self.solver_time_limit_s, (int, float)) and self.solver_time_limit_s > 0):
            raise ValueError(f"solver_time_limit_s must be > 0, got {self.solver_time_limit_s!r}")
        if not isinstance(self.max_calls, int) or self.max_calls < 0:
            raise ValueError(f"max_calls must be an int >= 0, got {self.max_calls!r}")
        # checked here, not per run: a bad value failed every run (recorded in ``failed``, exit 0, an empty
        # table) or crashed in the bound (instances 0: ZeroDivisionError), and a negative per-session cap
        # or window was silently read as "all" / 2
        if not isinstance(self.max_calls_per_session, int) or self.max_calls_per_session < 0:
            raise ValueError(f"max_calls_per_session must be an int >= 0, got {self.max_calls_per_session!r}")
        if not isinstance(self.window_calls, int) or self.window_calls < 1:
            raise ValueError(f"window_calls must be an int >= 1, got {self.window_calls!r}")
        for key in ("tp", "instances", "max_num_batched_tokens"):  # tp: the cost model's own error named no flag
            v = self.cluster.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"cluster.{key} must be an int >= 1, got {v!r}")
        from optsched.sim.config import SchedulerConfig

        seqs = SchedulerConfig().max_num_seqs  # the runs' scheduler (jobs.cluster_config): below it every run failed
        if self.cluster["max_num_batched_tokens"] < seqs:
            raise ValueError(f"cluster.max_num_batched_tokens must be an int >= {seqs} (the scheduler's max_num_seqs: "
                             f"every running decode fits in a step), got {self.cluster['max_num_batched_tokens']!r}")
        for key in ("ttft_s", "tpot_s"):
            v = self.slo.get(key)
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
                raise ValueError(f"slo.{key} must be a finite number > 0 (s), got {v!r}")


def _check_replications_differ(cfg: CompareConfig, seeds: list[int], ctx: int) -> None:
    """Build every seed's replication at the first load (bad input fails here, once, with the loader's
    message) and refuse a comparison whose replications are all the same workload: a trace with fewer than
    two distinct arrival gaps (every seed's permutation is the identity), where the CI would have zero width
    and a verdict would rest on one run.

    Raises:
        ValueError: identical replications (naming the source and what to change); as `build_replication`.
    """
    from optsched.compare.replication import build_replication
    from optsched.workload.digest import workload_digest

    digests = set()
    for s in seeds:
        wl, _ = build_replication(cfg.source, s, float(cfg.loads[0]), ctx, cfg.max_calls, cfg.max_calls_per_session)
        digests.add(workload_digest(wl))
        if len(digests) > 1:
            return
    raise ValueError(f"{cfg.source}: its {len(seeds)} replications are the same workload (the arrival gaps left "
                     f"after --max-calls {cfg.max_calls} / --max-calls-per-session {cfg.max_calls_per_session} "
                     "do not differ, so a seed's permutation changes nothing): a 95% CI over them would be a "
                     "single run; keep more calls or use a generator spec")


def headroom_closed(policy: float, best_heuristic: float, bound: float) -> float | None:
    """Share of the gap between the best heuristic and the upper bound that ``policy`` closes:
    (policy - best) / (bound - best); 0 = no better than the best heuristic, 1 = reaches the bound,
    negative = worse than the best heuristic. None when the bound does not exceed the best heuristic (no
    headroom to close). Units cancel (all three in calls/s)."""
    if not bound > best_heuristic:
        return None
    return (policy - best_heuristic) / (bound - best_heuristic)


def _est(values: list[float]) -> dict[str, Any]:
    return mean_ci(values).to_dict()


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def _bounds(cfg: CompareConfig, seeds: list[int]) -> dict[str, Any] | None:
    from optsched.compare.bounds import providers
    from optsched.compare.replication import build_replication
    from optsched.cost.catalog import load_model

    ctx = load_model(cfg.cluster["model"]).max_context_tokens
    per_seed, methods = [], set()
    for s in seeds:
        best = math.inf
        for p in providers("routing"):
            vals = []
            for load in cfg.loads:
                wl, _ = build_replication(cfg.source, s, load, ctx, cfg.max_calls, cfg.max_calls_per_session)
                b = p.bound(wl, cfg.cluster, cfg.slo, cfg.target)
                if b is None or not b.proven:
                    vals = []
                    break
                vals.append(b.value)
                methods.add(f"{p.name}: {b.method}")
            if vals:
                best = min(best, max(vals))
        if not math.isfinite(best):
            return None
        per_seed.append(best)
    return {**_est(per_seed), "per_seed": per_seed, "decision": "routing", "method": sorted(methods)}


def _policy_block(spec: dict, seeds: list[int], loads: tuple[float, ...], runs: dict, target: float) -> dict[str, Any]:
    vals, status = [], []
    for s in seeds:
        pts = [(ld, runs[(s, ld)]["p90_interactivity_tok_s"] if runs[(s, ld)]["p90_interactivity_tok_s"] is not None
                else math.nan, runs[(s, ld)]["goodput_calls_s"]) for ld in loads]
        v, st = at_target(pts, target)
        vals.append(v)
        status.append(st)
    front = []
    for ld in loads:
        row = {"load": ld}
        for key, col in (("interactivity_tok_s", "p90_interactivity_tok_s"), ("goodput_calls_s", "goodput_calls_s"),
                         ("tpgs", "tpgs"), ("ttft_p90_s", "ttft_p90_s"), ("hit_rate", "hit_rate")):
            xs = [runs[(s, ld)][col] for s in seeds]
            row[key] = _est(xs) if all(x is not None and math.isfinite(x) for x in xs) else None
        front.append(row)
    complete = all(v is not None for v in vals)
    g = {**(_est(vals) if complete else {"mean": None, "ci95": None, "std": None, "n": len(seeds)}),
         "per_seed": vals, "status": status, "censored": "above_range" in status}
    return {"name": spec["name"], "kind": spec["kind"], "goodput_at_target": g, "front": front}


def run_compare(cfg: CompareConfig, cache_dir: Path, backend: str = "local", workers: int = 1,
                address: str | None = None, progress: Any = None) -> dict[str, Any]:
    """The comparison result (module docstring). Raises ValueError for bad input (one clear message)."""
    from optsched.compare import policies as P
    from optsched.compare.adapter import RunCache, code_digest, digest
    from optsched.compare.backends import RunFailed, run_jobs
    from optsched.compare.bounds import BOUND_NOTES
    from optsched.cost import CostModel

    c = cfg.cluster
    CostModel.from_names(c["gpu"], c["model"], tp=int(c["tp"])).check_fits()
    from optsched.cost.catalog import load_model

    # bad input fails here, once, with the loader's message (not once per run)
    seeds = [cfg.base_seed + i for i in range(cfg.seeds)]
    _check_replications_differ(cfg, seeds, load_model(c["model"]).max_context_tokens)
    salt = code_digest()
    names = list(cfg.policies) if cfg.policies is not None else None
    baselines = P.baseline_specs()
    optimized, derivation = [], None
    if names is None or any(n in P.OPTIMIZED for n in names):
        cache = RunCache(Path(cache_dir))
        dkey = digest({"derive": [cfg.source, c, cfg.base_seed, cfg.max_calls, cfg.max_calls_per_session,
                                  cfg.window_calls, cfg.solver_node_limit], "salt": salt})
        hit = cache.get("derive", dkey)
        if hit is None:
            try:
                specs, rec = P.derive_optimized(cfg.source, c, cfg.base_seed, (cfg.max_calls, cfg.max_calls_per_session),
                                                cfg.window_calls, cfg.solver_node_limit,
                                                cfg.solver_time_limit_s)
                hit = {"specs": specs, "record": rec}
            except Exception as exc:
                if names is not None or isinstance(exc, P.SolveTimedOut):
                    raise
                hit = {"specs": [], "record": {"error": f"{type(exc).__name__}: {exc}"[:300]}}
            cache.put("derive", dkey, hit)
        optimized, derivation = hit["specs"], hit["record"]
    specs = P.select(names, baselines, optimized)
    jobs = [{"source": cfg.source, "max_calls": cfg.max_calls,
             "max_calls_per_session": cfg.max_calls_per_session, "seed": s, "load": float(ld),
             "policy": sp, "cluster": c, "slo": cfg.slo} for sp in specs for s in seeds for ld in cfg.loads]
    results = run_jobs(jobs, Path(cache_dir), salt, backend, workers, address, progress)
    by_pol: dict[str, dict] = {sp["name"]: {} for sp in specs}
    failed: dict[str, str] = {}
    for j, r in zip(jobs, results):
        if isinstance(r, RunFailed):
            failed.setdefault(j["policy"]["name"], f"seed {j['seed']} load {j['load']:g}: {r.reason}")
        else:
            by_pol[j["policy"]["name"]][(j["seed"], j["load"])] = r
    blocks = [_policy_block(sp, seeds, tuple(float(x) for x in cfg.loads), by_pol[sp["name"]], cfg.target)
              for sp in specs if sp["name"] not in failed]
    heur = [b for b in blocks if b["kind"] == "heuristic" and b["goodput_at_target"]["mean"] is not None]
    best = max(heur, key=lambda b: (b["goodput_at_target"]["mean"], b["name"]))if heur else None
    bound = _bounds(cfg, seeds)
    for b in blocks:
        b["vs_best_heuristic"] = None
        b["headroom_closed"] = None
        g = b["goodput_at_target"]
        if best is None or g["mean"] is None:
            continue
        ref = best["goodput_at_target"]["per_seed"]
        if all(x > 0 for x in ref):
            d: Estimate = paired_difference(g["per_seed"], ref, relative=True)
            b["vs_best_heuristic"] = {**d.to_dict(), "verdict": verdict(d) if b is not best else "reference"}
        if bound is not None:
            b["headroom_closed"] = headroom_closed(g["mean"], best["goodput_at_target"]["mean"], bound["mean"])
    first = next(iter(by_pol.values()), {})
    cut = {str(s): first.get((s, float(cfg.loads[0])), {}).get("context_cut") for s in seeds}
    out = {
        "schema": "optsched.compare/v1",
        "workload": cfg.source,
        "config": {k: v for k, v in asdict(cfg).items() if k != "source"},
        "load_knob": LOAD_KNOB,
        "ci_method": CI_METHOD,
        "target_source": TARGET_SOURCE if cfg.target == DEFAULT_TARGET else "user-set (--target-interactivity)",
        "seeds": seeds,
        "policies": blocks,
        "best_heuristic": best["name"] if best else None,
        "bound": bound,
        "bound_notes": BOUND_NOTES,
        "optimized_derivation": derivation,
        "failed": failed,
        "context_cut": cut,
        "code_digest": salt,
    }
    return _jsonable(out)
