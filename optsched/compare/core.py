"""`run_compare`: every policy's crossing of the interactivity target found by search, goodput measured AT it,
paired CIs over enough replications, the bound at the target beside it.

Method (``optsched.compare/v2`` JSON; keys documented in `optsched.cli.compare`):

1. One workload per replication (`optsched.compare.replication`): load scales only the arrival process,
   never the set of calls; on a trace the evaluated calls are the part of the split that no derivation saw.
2. Every run is measured in steady state (`optsched.compare.window`: release-rank window, warm-up and drain
   left out), not over its makespan.
3. For every policy and replication the crossing (the highest load at which the window's P90 interactivity
   still meets the target) is found by bracketing and log-load bisection to ``load_tol``
   (`optsched.compare.search`); the grid only seeds the bracket, which widens by itself up to
   ``max_widen`` doublings / halvings. Goodput at the target is the value MEASURED at the crossing.
4. A policy whose crossing is not bracketed in every replication gets verdict ``not_measured`` and is never
   ranked (nor chosen as the best heuristic).
5. Differences to the best heuristic are paired by replication (per replication x/y - 1, Student t 95%
   CI, `optsched.replicate`); replications are added until every such CI's half-width is at most
   ``precision_pp`` percentage points or ``max_seeds`` replications ran.
6. The bound at the target (`optsched.compare.target_bound`) is evaluated at each policy's crossing run;
   per replication the largest over policies; "headroom closed" = (policy - best heuristic) / (bound - best
   heuristic).

No wall clock: reruns are byte-identical, and the run cache makes an interrupted comparison resume.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from optsched.compare.search import Crossing
from optsched.compare.window import EXPLAIN_KEYS, PREDICTION_KEYS
from optsched.replicate import Estimate, mean_ci, paired_difference, verdict

__all__ = ["DEFAULT_TARGET", "LOAD_KNOB", "SCHEMA", "TARGET_SOURCE", "CompareConfig", "headroom_closed", "run_compare"]

log = logging.getLogger(__name__)

SCHEMA = "optsched.compare/v2"
LOAD_KNOB = ("arrival-rate multiplier: every call arrival and session start time / load; the calls are the same "
             "at every load")
DEFAULT_TARGET = 10.0
TARGET_SOURCE = ("10 output tok/s per user = 1 / the goodput SLO's TPOT of 100 ms (DistServe, OSDI'24, Table 1: "
                 "chatbot TPOT SLO 0.1 s), so the P90 user streams within the TPOT SLO; MLPerf Inference's "
                 "Llama-2-70B server constraint (loadgen mlperf.conf: tpot_latency 200 ms at P99, i.e. 5 tok/s) is "
                 "the lenient end for this model class")
CI_METHOD = ("Student t 95% interval over replications (ddof=1); differences paired by replication; a CI "
             "containing 0 is a tie")
VERDICTS = ("better", "tie", "worse", "reference", "not_measured")


@dataclass(frozen=True, slots=True)
class CompareConfig:
    """One comparison. ``source``: trace path or generator spec. ``policies``: names (None = every baseline
    router + every derivable optimized policy). ``seeds``: replications (>= 2; the CLI asks >= 5), seeds
    ``base_seed .. base_seed + seeds - 1``. ``loads``: arrival-rate multipliers (increasing). ``target``:
    P90 interactivity (output tokens/s per user). ``cluster``/``slo``: as `optsched.compare.jobs`.
    ``max_calls``: keep the first calls of a trace (0 = all); ``max_calls_per_session``: each session's first
    calls (0 = all); see `optsched.compare.replication`. ``precision_pp``: replications are added until every
    paired CI half-width vs the best heuristic is <= this many percentage points, up to ``max_seeds``.
    ``load_tol``: relative bracket width of the crossing search; ``max_widen``: doublings / halvings of the
    load range allowed each way. ``train_fraction``: share of a trace's sessions kept for deriving the
    optimized policies (never evaluated). ``window``: (q_lo, q_hi) of the steady-state window. ``combos``:
    compare policy COMBINATIONS (router, admission, residency) instead of routers
    (`optsched.compare.policies.parse_combos`); ``policies`` must then be None. ``window_calls``: the routing window MILP of
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
    precision_pp: float = 5.0
    max_seeds: int = 30
    load_tol: float = 0.02
    max_widen: int = 4
    train_fraction: float = 0.3
    window: tuple[float, float] = (0.1, 0.9)
    combos: tuple[tuple[str, str, str], ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.seeds, int) or self.seeds < 2:
            raise ValueError(f"seeds must be an int >= 2 (a CI needs spread), got {self.seeds!r}")
        if not isinstance(self.max_seeds, int) or self.max_seeds < self.seeds:
            raise ValueError(f"max_seeds must be an int >= seeds ({self.seeds}), got {self.max_seeds!r}")
        if not (isinstance(self.precision_pp, (int, float)) and self.precision_pp > 0 and math.isfinite(self.precision_pp)):
            raise ValueError(f"precision_pp must be a finite number > 0 (percentage points), got {self.precision_pp!r}")
        if not (isinstance(self.load_tol, (int, float)) and 0 < self.load_tol <= 1):
            raise ValueError(f"load_tol must be in (0, 1] (relative bracket width), got {self.load_tol!r}")
        if not isinstance(self.max_widen, int) or not 0 <= self.max_widen <= 20:
            raise ValueError(f"max_widen must be an int in 0..20, got {self.max_widen!r}")
        if not (isinstance(self.train_fraction, (int, float)) and 0 <= self.train_fraction < 1):
            raise ValueError(f"train_fraction must be in [0, 1), got {self.train_fraction!r}")
        from optsched.compare.window import WindowSpec

        WindowSpec(*self.window)
        if self.combos is not None and self.policies is not None:
            raise ValueError("combos and policies are exclusive: a comparison ranks routers or combinations")
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
    from optsched.compare.window import MIN_WINDOW_CALLS, WindowSpec
    from optsched.workload.digest import workload_digest

    digests = set()
    for s in seeds:
        wl, _ = build_replication(cfg.source, s, float(cfg.loads[0]), ctx, cfg.max_calls, cfg.max_calls_per_session,
                                  cfg.train_fraction)
        lo, hi = WindowSpec(*cfg.window).ranks(wl.num_calls)
        if hi - lo < MIN_WINDOW_CALLS:
            raise ValueError(f"{cfg.source}: {wl.num_calls} evaluated calls leave {hi - lo} in the steady-state window "
                             f"(< {MIN_WINDOW_CALLS}); keep more calls (--max-calls, --max-calls-per-session, "
                             "sessions=) or lower --train-fraction")
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


def _job(cfg: CompareConfig, spec: dict, seed: int, load: float) -> dict[str, Any]:
    return {"source": cfg.source, "max_calls": cfg.max_calls, "max_calls_per_session": cfg.max_calls_per_session,
            "train_fraction": cfg.train_fraction, "window": list(cfg.window), "seed": seed, "load": float(load),
            "policy": spec, "cluster": cfg.cluster, "slo": cfg.slo}


class _Search:
    """Every (policy, replication) crossing search of one comparison, run in rounds over the backend."""

    def __init__(self, cfg: CompareConfig, specs: list[dict], cache_dir: Path, salt: str, backend: str, workers: int,
                 address: str | None, progress: Any) -> None:
        self.cfg, self.specs, self.cache_dir, self.salt = cfg, specs, cache_dir, salt
        self.backend, self.workers, self.address, self.progress = backend, workers, address, progress
        self.runs: dict[tuple[str, int, float], dict] = {}
        self.cross: dict[tuple[str, int], Crossing] = {}
        self.failed: dict[str, str] = {}
        self.done = 0

    def _run(self, todo: list[tuple[dict, int, float]]) -> None:
        from optsched.compare.backends import RunFailed, run_jobs

        jobs = [_job(self.cfg, sp, s, ld) for sp, s, ld in todo]

        def tick(d: int, n: int) -> None:
            if self.progress:
                self.progress(self.done + d, self.done + n)

        results = run_jobs(jobs, self.cache_dir, self.salt, self.backend, self.workers, self.address, tick)
        self.done += len(jobs)
        for (sp, s, ld), r in zip(todo, results):
            if isinstance(r, RunFailed):
                self.failed.setdefault(sp["name"], f"seed {s} load {ld:g}: {r.reason}")
                continue
            st = r["steady"]
            if "error" in st:
                self.failed.setdefault(sp["name"], f"seed {s} load {ld:g}: {st['error']}")
                continue
            self.runs[(sp["name"], s, float(ld))] = r
            self.cross[(sp["name"], s)].measured(ld, st["p90_interactivity_tok_s"], st["goodput_calls_s"])

    def add_seeds(self, seeds: list[int]) -> None:
        """Run the searches of ``seeds`` to the end (grid round, then one round per widening / bisection)."""
        cfg = self.cfg
        for sp in self.specs:
            for s in seeds:
                self.cross[(sp["name"], s)] = Crossing(cfg.target, cfg.load_tol, cfg.max_widen)
        self._run([(sp, s, float(ld)) for sp in self.specs for s in seeds for ld in cfg.loads])
        while True:
            todo = []
            for sp in self.specs:
                if sp["name"] in self.failed:
                    continue
                for s in seeds:
                    nxt = self.cross[(sp["name"], s)].next_load()
                    if nxt is not None:
                        todo.append((sp, s, nxt))
            if not todo:
                return
            self._run(todo)


def _policy_block(spec: dict, seeds: list[int], search: _Search, grid: tuple[float, ...]) -> dict[str, Any]:
    name = spec["name"]
    res = [search.cross[(name, s)].result() for s in seeds]
    status = [r["status"] for r in res]
    bracketed = all(st == "bracketed" for st in status)
    g = [r["goodput_at_target"] for r in res]
    loads = [r["crossing_load"] for r in res]
    front = []
    for ld in grid:
        row: dict[str, Any] = {"load": ld}
        rows = [search.runs.get((name, s, float(ld))) for s in seeds]
        for key in ("p90_interactivity_tok_s", "goodput_calls_s", "throughput_calls_s", "tpgs", "ttft_p90_s",
                    "hit_rate"):
            xs = [r["steady"][key] if r else None for r in rows]
            row[key] = _est(xs) if all(x is not None and math.isfinite(x) for x in xs) else None
        front.append(row)
    crossings = []
    for s, r in zip(seeds, res):
        run = search.runs.get((name, s, r["crossing_load"])) if r["crossing_load"] is not None else None
        pts = sorted((ld, x) for ld, (x, _) in search.cross[(name, s)].points.items())
        crossings.append({"seed": s, **r, "points": [[ld, x] for ld, x in pts],
                          "bound_calls_s": run["steady"]["bound"]["value"] if run else None,
                          "ttft_p90_s": run["steady"]["ttft_p90_s"] if run else None,
                          "explain": run["steady"].get("explain") if run else None,
                          "prediction": run["steady"].get("prediction") if run else None,
                          "hit_rate": run["steady"]["hit_rate"] if run else None})
    ex = [cr["explain"] for cr in crossings if cr["explain"]]
    explain = ({k: _est([e[k] for e in ex]) if all(e.get(k) is not None and math.isfinite(e[k]) for e in ex)
                else None for k in EXPLAIN_KEYS} if bracketed and ex else None)
    return {
        "name": name, "kind": spec["kind"], "n": len(seeds), "explain": explain,
        "prediction_error": _prediction_block(crossings) if bracketed else None,
        "crossing_bracketed": bracketed,
        "crossing_load": {**_est(loads), "per_seed": loads} if bracketed else None,
        "goodput_at_target": ({**_est(g), "per_seed": g, "status": status} if bracketed
                              else {"mean": None, "ci95": None, "per_seed": g, "status": status}),
        "non_monotone_seeds": [s for s, r in zip(seeds, res) if r["non_monotone"]],
        "crossings": crossings, "front": front,
    }


def _prediction_block(crossings: list[dict]) -> dict[str, Any] | None:
    """The router's TTFT prediction error at its crossings (`optsched.compare.window.prediction_in_window`): each
    of `PREDICTION_KEYS` as {mean, ci95, ...} over replications, and ``calls`` (predicted window calls, summed);
    None when the policy predicts nothing (a heuristic) or some crossing run has no predicted call."""
    pr = [cr.get("prediction") for cr in crossings]
    if not pr or any(not p or not p.get("n") for p in pr):
        return None
    return {**{k: _est([p[k] for p in pr]) for k in PREDICTION_KEYS}, "calls": sum(int(p["n"]) for p in pr),
            "source": pr[0].get("source")}


def _rank(blocks: list[dict], seeds: list[int]) -> tuple[dict | None, float]:
    """Best heuristic (bracketed in every replication, highest mean goodput at the target) and the widest
    paired-CI half-width (percentage points) of any measured policy against it; sets each block's
    ``vs_best_heuristic`` and ``verdict``."""
    heur = [b for b in blocks if b["kind"] == "heuristic" and b["crossing_bracketed"]]
    best = max(heur, key=lambda b: (b["goodput_at_target"]["mean"], b["name"])) if heur else None
    widest = 0.0
    for b in blocks:
        b["vs_best_heuristic"] = None
        if not b["crossing_bracketed"]:
            b["verdict"] = "not_measured"
            continue
        if best is None:
            b["verdict"] = "not_measured"
            continue
        if b is best:
            b["verdict"] = "reference"
            continue
        ref = best["goodput_at_target"]["per_seed"]
        if not all(x > 0 for x in ref):
            b["verdict"] = "not_measured"
            continue
        d: Estimate = paired_difference(b["goodput_at_target"]["per_seed"], ref, relative=True)
        half = 100.0 * (d.ci95[1] - d.ci95[0]) / 2.0
        widest = max(widest, half if math.isfinite(half) else math.inf)
        b["verdict"] = verdict(d)
        b["vs_best_heuristic"] = {**d.to_dict(), "half_width_pp": half}
    return best, widest


def _more_seeds(blocks: list[dict], best: dict, n: int, cfg: CompareConfig) -> int:
    """How many replications to have next: enough for the widest paired CI to reach the precision by the
    usual n = (t s / h)^2 estimate (t = 2), at least n + ceil(n / 2), at most ``max_seeds``."""
    need = n + math.ceil(n / 2)
    h = cfg.precision_pp / 100.0
    for b in blocks:
        v = b.get("vs_best_heuristic")
        if v and v.get("std") is not None and math.isfinite(v["std"]):
            need = max(need, math.ceil((2.0 * v["std"] / h) ** 2))
    return min(cfg.max_seeds, need)


def _unbracketed_sides(policies: list[dict]) -> str:
    """"; the target was still met at the highest load tried in U of N policy replications (...) and missed at the
    lowest load in D (...)": which side of the searched load range the unbracketed crossings fell on ("" if none)."""
    st = [s for p in policies for s in (p.get("goodput_at_target") or {}).get("status") or []]
    up, down = st.count("above_range"), st.count("below_range")
    parts = []
    if up:
        parts.append(f"still met at the highest load tried in {up} of {len(st)} policy replications (above range: the "
                     "workload does not load the cluster to the target; raise the loads or the sessions)")
    if down:
        parts.append(f"missed at the lowest load in {down}" + (f" of {len(st)} policy replications" if not up else "")
                     + " (below range: lower the loads)")
    return "; the target was " + " and ".join(parts) if parts else ""


def _verdict_line(res: dict[str, Any]) -> str:
    """One line: the winner (or that no policy separates at this precision), its margin with CI, n, the bound."""
    best = res["best_heuristic"]
    n = res["n"]
    bnd = res["bound_at_target"]
    btxt = f"bound {bnd['mean']:.3g} calls/s" if bnd and bnd.get("mean") is not None else "no bound"
    if best is None:
        return (f"{res['workload']}: no heuristic's crossing was bracketed: nothing measured (n={n}, {btxt})"
                + _unbracketed_sides(res["policies"]))
    ref = next(p for p in res["policies"] if p["name"] == best)
    g = ref["goodput_at_target"]["mean"]
    better = [p for p in res["policies"] if p["verdict"] == "better"]
    if better:
        w = max(better, key=lambda p: p["vs_best_heuristic"]["mean"])
        v = w["vs_best_heuristic"]
        return (f"{res['workload']}: {w['name']} wins, {100 * v['mean']:+.1f}% [{100 * v['ci95'][0]:+.1f}%, "
                f"{100 * v['ci95'][1]:+.1f}%] vs best heuristic {best} ({g:.3g} calls/s at the target; n={n}, {btxt})")
    worse = [p["name"] for p in res["policies"] if p["verdict"] == "worse"]
    tail = f"; worse: {', '.join(worse)}" if worse else ""
    return (f"{res['workload']}: no policy separable from best heuristic {best} at this precision ({g:.3g} calls/s "
            f"at the target; n={n}, widest CI ±{res['precision']['widest_half_width_pp']:.1f} pp, {btxt}){tail}")


def run_compare(cfg: CompareConfig, cache_dir: Path, backend: str = "local", workers: int = 1,
                address: str | None = None, progress: Any = None) -> dict[str, Any]:
    """The comparison result (module docstring). Raises ValueError for bad input (one clear message)."""
    from optsched.compare import policies as P
    from optsched.compare.adapter import RunCache, canonical_json, code_digest, digest
    from optsched.cost import CostModel
    from optsched.cost.catalog import load_model

    c = cfg.cluster
    CostModel.from_names(c["gpu"], c["model"], tp=int(c["tp"])).check_fits()
    ctx = load_model(c["model"]).max_context_tokens
    seeds = [cfg.base_seed + i for i in range(cfg.seeds)]
    _check_replications_differ(cfg, seeds, ctx)  # bad input fails here, once, with the loader's message
    salt = code_digest()
    names = list(cfg.policies) if cfg.policies is not None else None
    if cfg.combos is not None:
        names = sorted({r for r, _, _ in cfg.combos if r in P.OPTIMIZED})
    baselines = P.baseline_specs()
    optimized, derivation = [], None
    if (cfg.combos is None and (names is None or any(n in P.OPTIMIZED for n in names))) or (cfg.combos and names):
        cache = RunCache(Path(cache_dir))
        # the safe-improvement gate only where the session router is compared (its crossing searches are the
        # derivation's largest cost, and its Gate line would speak of a policy in no row)
        from optsched.compare.gate import gate_settings

        gate = gate_settings(cfg) if names is None or "session" in names else None
        dkey = digest({"derive": [cfg.source, c, cfg.base_seed, cfg.max_calls, cfg.max_calls_per_session,
                                  cfg.window_calls, cfg.solver_node_limit, cfg.train_fraction, gate], "salt": salt})
        hit = cache.get("derive", dkey)
        if hit is None:
            try:
                specs, rec = P.derive_optimized(cfg.source, c, cfg.base_seed, (cfg.max_calls, cfg.max_calls_per_session),
                                                cfg.window_calls, cfg.solver_node_limit, cfg.solver_time_limit_s,
                                                cfg.train_fraction, gate)
                hit = {"specs": specs, "record": rec}
            except Exception as exc:
                if names is not None or isinstance(exc, P.SolveTimedOut):
                    raise
                hit = {"specs": [], "record": {"error": f"{type(exc).__name__}: {exc}"[:300]}}
            cache.put("derive", dkey, hit)
            hit = json.loads(canonical_json(hit))  # as a rerun reads it back (sorted keys): the same bytes out
        optimized, derivation = hit["specs"], hit["record"]
    missing: dict[str, str] = {}
    if cfg.combos is not None:
        kinds = {P.component_kind(k, x) for combo in cfg.combos for k, x in zip(("admission", "residency"), combo[1:])}
        kinds.discard(None)
        docs: dict[str, Any] = {}
        if kinds:
            cache = RunCache(Path(cache_dir))
            ckey = digest({"derive_components": [cfg.source, c, cfg.base_seed, cfg.max_calls, cfg.max_calls_per_session,
                                                 sorted(kinds), cfg.solver_node_limit, cfg.train_fraction], "salt": salt})
            hit = cache.get("derive", ckey)
            if hit is None:
                d, rec = P.derive_components(cfg.source, c, cfg.base_seed, (cfg.max_calls, cfg.max_calls_per_session),
                                             kinds, cfg.solver_node_limit, cfg.solver_time_limit_s, cfg.train_fraction)
                hit = {"docs": d, "record": rec}
                cache.put("derive", ckey, hit)
                hit = json.loads(canonical_json(hit))  # as a rerun reads it back
            docs = hit["docs"]
            derivation = {**(derivation or {}), "components": hit["record"]}
        routers = {sp["name"]: sp for sp in baselines + optimized}
        specs, missing = P.combo_specs(cfg.combos, routers, docs)
    else:
        specs = P.select(names, baselines, optimized)
    search = _Search(cfg, specs, Path(cache_dir), salt, backend, workers, address, progress)
    search.failed.update(missing)
    search.add_seeds(seeds)
    grid = tuple(float(x) for x in cfg.loads)
    while True:
        live = [sp for sp in specs if sp["name"] not in search.failed]
        blocks = [_policy_block(sp, seeds, search, grid) for sp in live]
        best, widest = _rank(blocks, seeds)
        if best is None or widest <= cfg.precision_pp or len(seeds) >= cfg.max_seeds:
            break
        n_next = _more_seeds(blocks, best, len(seeds), cfg)
        log.info("compare: widest paired CI ±%.1f pp > %.1f: %d -> %d replications", widest, cfg.precision_pp,
                 len(seeds), n_next)
        new = [cfg.base_seed + i for i in range(len(seeds), n_next)]
        search.add_seeds(new)
        seeds = seeds + new
    per_seed_bound = []
    for s in seeds:
        vals = [cr["bound_calls_s"] for b in blocks for cr in b["crossings"]
                if cr["seed"] == s and cr["bound_calls_s"] is not None]
        per_seed_bound.append(max(vals) if vals else None)
    bound = ({**_est(per_seed_bound), "per_seed": per_seed_bound} if per_seed_bound
             and all(v is not None for v in per_seed_bound) else None)
    for b in blocks:
        b["headroom_closed"] = None
        if best is not None and bound is not None and b["crossing_bracketed"]:
            b["headroom_closed"] = headroom_closed(b["goodput_at_target"]["mean"], best["goodput_at_target"]["mean"],
                                                   bound["mean"])
    cut = {}
    for s in seeds:
        r = next((v for (nm, ss, _), v in search.runs.items() if ss == s), None)
        cut[str(s)] = r.get("context_cut") if r else None
    from optsched.compare.target_bound import __doc__ as bound_doc
    from optsched.compare.window import WINDOW_RULE

    out = {
        "schema": SCHEMA,
        "workload": cfg.source,
        "config": {k: v for k, v in asdict(cfg).items() if k != "source"},
        "load_knob": LOAD_KNOB,
        "window_rule": WINDOW_RULE,
        "ci_method": CI_METHOD,
        "target_source": TARGET_SOURCE if cfg.target == DEFAULT_TARGET else "user-set (--target-interactivity)",
        "seeds": seeds,
        "n": len(seeds),
        "precision": {"target_pp": cfg.precision_pp, "max_seeds": cfg.max_seeds,
                      "widest_half_width_pp": widest if best is not None else None,
                      "reached": bool(best is not None and widest <= cfg.precision_pp)},
        "policies": blocks,
        "best_heuristic": best["name"] if best else None,
        "bound_at_target": bound,
        "bound_method": bound_doc.split("\n\n")[1].replace("\n", " ") if bound_doc else "",
        "bound_over_best": (bound["mean"] / best["goodput_at_target"]["mean"]
                            if bound and best and best["goodput_at_target"]["mean"] > 0 else None),
        "split": (derivation or {}).get("split") or _split_record(cfg, ctx),
        "optimized_derivation": derivation,
        "failed": search.failed,
        "runs": search.done,
        "context_cut": cut,
        "code_digest": salt,
    }
    out["verdict_line"] = _verdict_line(out)
    return _jsonable(out)


def _split_record(cfg: CompareConfig, ctx: int) -> dict[str, Any]:
    """How evaluation data is kept apart from derivation data when no optimized policy was derived."""
    from optsched.compare.replication import training_workload

    try:
        return training_workload(cfg.source, cfg.base_seed, ctx, cfg.max_calls, cfg.max_calls_per_session,
                                 cfg.train_fraction)[1]
    except ValueError as exc:
        return {"method": "none", "note": str(exc)}
