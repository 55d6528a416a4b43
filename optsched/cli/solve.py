"""`optsched solve routing|pd|admission|residency`: solve a formulation, print a summary, write a policy.

Every problem goes through its door in ``optsched.pipelines.<problem>`` (the same code the reproduce
stages and the experiments call), imported only when this verb runs, so ``import optsched.cli`` loads
no solver package.
admission: ``--workload jaillet:N`` solves one Jaillet-style unit-round instance of N requests
(`optsched.pipelines.admission.jaillet_instance`, seed ``--seed``, `solve_requests`); a trace or
``agentx:N`` is quantized to the unit-round model (`optsched.pipelines.admission.solve_workload`).
residency: ``--workload`` (a trace path or ``agentx:N``) -> tool pauses on ``--instances`` instances ->
priced slot model: LP relaxation (HBM-row duals = load-dependent HBM price) + hindsight MILP vs the online
rules (`optsched.pipelines.residency_priced_solve.solve_priced`; block-denominated quantities use the workload's
block), and the policy of ``--rule`` with its solve record in ``parameters.solve``:
``load_priced`` (keep / offload / drop from the price table), ``load_priced_evict`` (plus the priced eviction
order), ``load_priced_imitate`` / ``load_priced_search`` (plus an eviction order fitted to, resp. grid-searched
against, the hindsight MILP of the same workload: `optsched.pipelines.residency_imitation_fit.ordered_plan`, its
training MILPs' status / objective / bound / gap, method and weights under ``parameters.solve.imitation``; both
written as type ``load_priced_imitate``), ``event_priced`` (the event-driven rule: the priced eviction order
re-keyed at arrivals by the fitted hazard of resuming, and prefetch back to HBM before a predicted resume,
`optsched.pipelines.residency_event_fit`; pause laws fitted on the solved workload). Default ``load_priced_search``, the rule of record (docs/notebook/BENCHMARKS.md,
"Eviction orders derived from the hindsight optimum's primal"): better than LRU on HBM hit on the tight
AgentX-like setting, a tie elsewhere, the lowest mean ratio to the hindsight optimum of the online rules; where
HBM never binds its weights are 0 and it runs as ``load_priced`` (no order). It costs one more MILP solve (the
training MILP on the same instance) plus <= 136 replays, and it needs an engine hook for the eviction order
(`optsched export`): ``--rule load_priced`` where the engine has only a per-pause hook. The order is fitted
in-sample (on the solved workload) unless ``--train-seeds`` names other replications of a generator workload
(``agentx:N``), one training MILP each: held-out training, as RESULTS.md's figures use.
routing: ``optsched.pipelines.routing.plan_from_workload``: a window of ``--window`` calls after
``--warmup`` calls replayed through per-instance prefix caches, on ``--instances`` instances; the
window MILP + LP bound; the price router's weights (policy routing/price).
pd: ``optsched.pipelines.pd.plan_from_workload``: mean token profile and cached fraction of the
workload, P90 TTFT ``--ttft`` / TPOT ``--tpot`` SLOs, ``--gpu-budget``; counts per role and TP
(policy pd_ratio/counts). An SLO no configuration meets is a one-line error (exit 2). ``--formulation pool``
prints its stages by default (INFO lines of ``optsched.pipelines.pd_pool_plan``: the timeline and pools per
configuration, then a line every tenth (prefill pool, decode pool) pair, where most of its time goes).
Solver progress: INFO log lines; the HiGHS log itself with ``--solver-log``.
"""

from __future__ import annotations

import logging
import math

from optsched.cli._hardware import add_hardware_args

__all__ = ["register"]

logger = logging.getLogger("optsched.solve")

PROBLEMS = ("routing", "pd", "admission", "residency")
# --formulation per problem, the first is the default (the named baseline of its family)
FORMULATIONS = {"routing": ("window", "session"), "pd": ("md1", "pool")}
# --rule of residency, the first is the default (module docstring): optsched.pipelines.residency_imitation_fit.RULES,
# copied here so that the parser imports no solver package; tests/pipelines/test_residency_rules.py checks they agree
RESIDENCY_RULES = ("load_priced_search", "load_priced", "load_priced_evict", "load_priced_imitate", "event_priced")


def register(subparsers) -> None:
    p = subparsers.add_parser("solve", help="solve a formulation to a policy (optsched.policy/v1 JSON)")
    p.add_argument("problem", choices=PROBLEMS, help="which formulation to solve")
    p.add_argument("--workload", required=True,
                   help="trace path (any supported format), 'agentx:N' (generated), or 'jaillet:N' (admission)")
    add_hardware_args(p, tp=4)
    p.add_argument("--seed", type=int, default=0,
                   help="seed of a generated workload (agentx:N, jaillet:N) and of the solve (default 0)")
    p.add_argument("--time-limit", type=float, default=120.0, help="solver time limit (s)")
    p.add_argument("--mip-gap", type=float, default=None,
                   help="relative MIP gap (default: 1e-3 for routing, whose windows are large; 1e-4 otherwise)")
    p.add_argument("--calls", type=int, default=8,
                   help="admission: calls of a trace quantized into the MILP. Every online rule is simulated "
                        "first; scenario_lookahead's time grows steeply with the requests (~17 s at 20, "
                        "~5.5 min at 40 on a 2-core VM, also for jaillet:N; "
                        "docs/notebook/BENCHMARKS.md, \"Prefill admission\")")
    p.add_argument("--slot", type=float, default=2.0, help="residency: slot length (s)")
    p.add_argument("--sessions", type=int, default=0, help="residency: use only the first N sessions (0 = all)")
    p.add_argument("--instances", type=int, default=4, help="routing / residency: instances of the cluster")
    p.add_argument("--rule", choices=RESIDENCY_RULES, default=None,
                   help="residency: the exported rule (default load_priced_search, the rule of record: load_priced "
                        "plus an eviction order grid-searched against the hindsight MILP; load_priced where the "
                        "engine has no eviction-order hook)")
    p.add_argument("--train-seeds", default=None,
                   help="residency, order rules (load_priced_search / load_priced_imitate), generator workloads: fit "
                        "the eviction order on these seeds' replications (comma list of seeds other than --seed, e.g. 1,2,3: one training MILP "
                        "each; default: the solved workload itself, in-sample)")
    p.add_argument("--window", type=int, default=32, help="routing: calls in the solved window")
    p.add_argument("--formulation", choices=FORMULATIONS["routing"] + FORMULATIONS["pd"], default=None,
                   help="routing: 'window' (default) = the window makespan MILP + price router (baseline); "
                        "'session' = the session-level routing + KV placement LP, exported as a routing/session "
                        "plan. pd: 'md1' (default) = per-instance M/D/1 capacities of the mean request "
                        "(baseline); 'pool' = pool-level MILP with trace-driven goodput per pool size")
    p.add_argument("--warmup", type=int, default=200, help="routing: calls replayed into the caches first")
    p.add_argument("--gate-loads", default="",
                   help="routing --formulation session: run the safe-improvement gate of optsched compare on the solved "
                        "workload, its crossing search seeded with these loads (comma list, increasing, e.g. 2,4,8,16), "
                        "at compare's defaults (P90 interactivity 10 tok/s, TTFT 10 s / TPOT 0.1 s SLO, window 10-90%%); "
                        "where the router carried less goodput at the target than cache-aware, the plan says "
                        "deviate: false (it routes as cache-aware). Default: no gate")
    p.add_argument("--gpu-budget", type=int, default=16, help="pd: GPUs available")
    p.add_argument("--ttft", type=float, default=2.0, help="pd: P90 TTFT SLO (s)")
    p.add_argument("--tpot", type=float, default=0.1, help="pd: TPOT SLO (s)")
    p.add_argument("--solver-log", action="store_true", help="stream the HiGHS log")
    p.add_argument("-o", "--output", required=True, help="policy JSON to write")
    p.set_defaults(func=_run)


def _gate_loads(args) -> tuple[float, ...]:
    """``--gate-loads`` as increasing positive floats; () when not given. ValueError naming the option."""
    if not args.gate_loads:
        return ()
    if args.problem != "routing" or args.formulation != "session":
        raise ValueError("--gate-loads applies to routing --formulation session only")
    try:
        loads = tuple(float(x) for x in args.gate_loads.split(","))
    except ValueError:
        raise ValueError(f"--gate-loads must be a comma list of numbers, got {args.gate_loads!r}") from None
    if not all(math.isfinite(x) and x > 0 for x in loads) or list(loads) != sorted(set(loads)):
        raise ValueError(f"--gate-loads must be increasing finite numbers > 0, got {args.gate_loads!r}")
    return loads


def _count(spec: str) -> int:
    """N of 'name:N' (ValueError naming the option when N is not a positive integer)."""
    tail = spec.split(":", 1)[1]
    from optsched.workload.limits import MAX_GENERATED_SESSIONS

    if not (tail.isascii() and tail.isdigit()) or int(tail) < 1:  # isdigit alone takes "²", which int() rejects
        raise ValueError(f"--workload {spec!r}: expected {spec.split(':')[0]}:N with N a positive integer")
    if int(tail) > MAX_GENERATED_SESSIONS:
        raise ValueError(f"--workload {spec!r}: N expects at most {MAX_GENERATED_SESSIONS:,} (the generator cap, "
                         "optsched.workload.limits)")
    return int(tail)


def _train_seeds(args) -> tuple[int, ...] | None:
    """``--train-seeds`` "a,b,..." -> (a, b, ...), or None when absent.

    Raises:
        ValueError: one line naming --train-seeds: outside residency's order rules, with a trace (it has one
            replication), a value that is not an int >= 0, a seed named twice, the solved workload's --seed
            (the training would not be held out), an empty list.
    """
    text = args.train_seeds
    if text is None:
        return None
    if args.problem != "residency" or args.rule not in ("load_priced_search", "load_priced_imitate"):
        raise ValueError("--train-seeds applies to residency with --rule load_priced_search or load_priced_imitate "
                         "(the rules that fit an eviction order)")
    if not args.workload.startswith("agentx:"):
        raise ValueError(f"--train-seeds needs a generator workload (agentx:N); {args.workload} is one replication")
    seeds = []
    for x in (x.strip() for x in text.split(",")):
        if not x:
            continue
        if not (x.isascii() and x.isdigit()):  # isdigit alone takes "²", which int() rejects
            raise ValueError(f"--train-seeds {text}: {x!r} is not an int >= 0")
        if int(x) in seeds:
            raise ValueError(f"--train-seeds {text}: seed {x} named twice")
        if int(x) == args.seed:
            raise ValueError(f"--train-seeds {text}: seed {x} is the solved workload's --seed, so the order would not "
                             "be fitted on held-out replications (name other seeds, or omit the flag to fit in-sample)")
        seeds.append(int(x))
    if not seeds:
        raise ValueError("--train-seeds: empty list (omit the flag to fit on the solved workload)")
    return tuple(seeds)


def _workload(spec: str, seed: int):
    import numpy as np

    if spec.startswith("agentx:"):
        from optsched.workload.gen_agentx import generate_agentx

        return generate_agentx(_count(spec), np.random.default_rng(seed))
    from optsched.workload import load_any

    return load_any(spec)


def _summary(name: str, r) -> None:
    gap = "n/a" if r.gap is None else f"{100 * r.gap:.3f}%"
    obj = "n/a" if r.objective is None else f"{r.objective:.6g}"
    bound = "n/a" if r.bound is None else f"{r.bound:.6g}"
    stop = "" if r.status == "optimal" else f" ({r.termination})"  # e.g. "feasible (maxTimeLimit)"
    print(f"{name}: status={r.status}{stop} objective={obj} bound={bound} gap={gap} time={r.wall_time_s:.2f}s "
          f"solver={r.solver} {r.solver_version}")


def _run(args) -> int:
    from optsched.export import dump_policy
    from optsched.solvers import SolverOptions

    # checked before any solve: a negative seed failed only when the policy was written (after the MILP),
    # and a negative --sessions silently dropped the last sessions (wl.sessions[:-1])
    for flag, value, lo in (("--seed", args.seed, 0), ("--sessions", args.sessions, 0), ("--calls", args.calls, 1),
                            ("--tp", args.tp, 1), ("--instances", args.instances, 1), ("--window", args.window, 1),
                            ("--warmup", args.warmup, 0), ("--gpu-budget", args.gpu_budget, 1)):
        if value < lo:
            raise ValueError(f"{flag} must be an int >= {lo}, got {value}")
    # named here: the libraries' messages named fields (slot_s, n_instances, PDSLO ttft_p90_s, time_limit_s)
    for flag, value in (("--slot", args.slot), ("--ttft", args.ttft), ("--tpot", args.tpot),
                        ("--time-limit", args.time_limit)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{flag} must be a finite number > 0 (s), got {value}")
    if args.mip_gap is not None and not 0 <= args.mip_gap < 1:
        raise ValueError(f"--mip-gap must be in [0, 1), got {args.mip_gap}")
    forms = FORMULATIONS.get(args.problem, ())
    if args.formulation is None:
        args.formulation = forms[0] if forms else None
    elif args.formulation not in forms:
        raise ValueError(f"--formulation {args.formulation} does not apply to {args.problem}"
                         + (f" (choose from {', '.join(forms)})" if forms else " (it has one formulation)"))
    args.gate_loads = _gate_loads(args)
    if args.rule is not None and args.problem != "residency":
        raise ValueError(f"--rule applies to residency only, not to {args.problem}")
    args.rule = args.rule or RESIDENCY_RULES[0]
    args.train_seeds = _train_seeds(args)
    gap = args.mip_gap if args.mip_gap is not None else (1e-3 if args.problem == "routing" else 1e-4)
    opts = SolverOptions(time_limit_s=args.time_limit, mip_gap=gap, verbose=args.solver_log,
                         warm_start=True)
    if not args.solver_log:  # pyomo's HiGHS wrapper logs the solver log at INFO; keep it for --solver-log
        logging.getLogger("pyomo").setLevel(logging.WARNING)
    handler = {"routing": _routing, "pd": _pd, "admission": _admission, "residency": _residency}[args.problem]
    plan = handler(args, opts)
    if plan is None:
        print("no incumbent: no policy written")
        return 1
    dump_policy(plan, args.output)
    print(f"wrote {args.output} ({plan.kind}/{plan.type})")
    return 0


def _admission(args, opts):
    import numpy as np

    from optsched.pipelines import admission

    if args.workload.startswith("jaillet:"):
        reqs, memory = admission.jaillet_instance(np.random.default_rng(args.seed), _count(args.workload))
        out = admission.solve_requests(reqs, memory, opts, seed=args.seed)
    else:
        from optsched.cost import CostModel

        out = admission.solve_workload(_workload(args.workload, args.seed),
                                       CostModel.from_names(args.gpu, args.model, tp=args.tp), opts,
                                       seed=args.seed, n_calls=args.calls)
    cmp_ = out.comparison
    _summary("admission hindsight MILP", cmp_.result)
    if cmp_.result.objective:
        width = max(map(len, cmp_.rule_latency))  # rule names up to "scenario_lookahead" stay in columns
        for name, lat in cmp_.rule_latency.items():
            print(f"  {name:{width}s} total latency {lat:6d} rounds  ratio to MILP {lat / cmp_.result.objective:.4f}")
    if out.plan is not None:
        print("  exported policy: mcsf_rollout, the engine-side reduction of these rules (rollout and scenario_* "
              "need output lengths and arrival history the Admission protocol does not expose)")
    return out.plan


def no_pressure_note(binding_rows: int, optimum_s: float | None) -> str | None:
    """Why a residency solve is degenerate, or None: no HBM row binds and the hindsight optimum costs 0 s."""
    if binding_rows or optimum_s:
        return None
    return ("no HBM pressure on this workload: nothing to optimize (no HBM row binds and the hindsight optimum "
            "costs 0 s: a rule at cost 0 is optimal, one that pays anyway shows inf). A workload with more "
            "concurrent paused sessions (more sessions, a longer trace) or fewer --instances makes the rules differ.")


def _residency(args, opts):
    from dataclasses import replace

    from optsched.cost import CostModel
    from optsched.pipelines.residency_priced_solve import solve_priced

    def load(seed: int):  # the solved workload and each --train-seeds replication, cut alike by --sessions
        wl = _workload(args.workload, seed)
        return replace(wl, sessions=wl.sessions[: args.sessions]) if args.sessions else wl

    wl = load(args.seed)
    cm = CostModel.from_names(args.gpu, args.model, tp=args.tp)
    out = solve_priced(wl, cm, opts, cost_model_id=f"{args.gpu}/{args.model}/tp{args.tp}", seed=args.seed,
                       slot_s=args.slot, n_instances=args.instances)
    _summary("residency LP relaxation (HBM prices)", out.lp)
    _summary("residency hindsight MILP", out.milp)
    used = out.rule.solve["duals_used"]
    print(f"  HBM rows {used['rows']}, binding {used['binding_rows']}, mean price "
          f"{used['mean_price_s_per_token_s']:.4g} s/token-s; price by demand: "
          + ", ".join(f"u>={u:g}: {p:.3g}" for u, p in out.rule.price_table))
    note = no_pressure_note(used["binding_rows"], out.optimum_s)
    if note:
        print(f"  {note}")
    width = max(map(len, out.policy_cost_s))
    for name, cost in out.policy_cost_s.items():
        ratio = ""
        if out.optimum_s is not None:  # optimum 0 (HBM never tight): a rule at cost 0 is optimal, else inf
            r = cost / out.optimum_s if out.optimum_s > 0 else (1.0 if cost <= 1e-9 else float("inf"))
            ratio = f"  ratio {r:.4f}"
        print(f"  {name:{width}s} cost {cost:12.3f} s{ratio}")
    from optsched.pipelines.residency_imitation_fit import ORDER_METHODS, rule_plan

    seeds = list(args.train_seeds or (args.seed,))
    train = [wl] if args.train_seeds is None else [load(s) for s in seeds]
    plan = rule_plan(out, args.rule, train, cm, opts, **({"seeds": seeds} if args.rule in ORDER_METHODS else {}))
    if plan is not None and args.rule in ORDER_METHODS:
        rec = plan.parameters["solve"]["imitation"]
        milps = ", ".join(f"{m['status']} {m['objective']}" for m in rec["training_milps"])
        print(f"  {args.rule}: eviction weights {rec['weights']} ({', '.join(rec['features'])}); "
              f"training MILPs: {milps}; {rec['method']}")
    return plan


def _routing(args, opts):
    if args.formulation == "session":
        return _routing_session(args, opts)
    from optsched.pipelines.routing import plan_from_workload

    plan, result = plan_from_workload(_workload(args.workload, args.seed), args.gpu, args.model, args.tp, opts,
                                      args.seed, n_instances=args.instances, window_calls=args.window,
                                      warmup_calls=args.warmup)
    _summary("routing MILP", result)
    if not result.has_solution:
        print("  no MILP incumbent: the window plan is the greedy fallback and the price weights come from "
              "the cost model alone")
    p = plan.parameters
    w = p["window"]
    lp = "n/a" if w["lp_bound_s"] is None else f"{w['lp_bound_s']:.6g}"
    print(f"  window {w['first_call']}..{w['last_call']} ({w['calls']} calls after {w['warmup_calls']} "
          f"replayed): makespan {w['makespan_s']:.3f} s, recomputed {w['recomputed_tokens']:.0f} tokens, "
          f"{w['migrations']} migrations, calls per instance {w['calls_per_instance']}")
    obj = "n/a" if result.objective is None else f"{result.objective:.6g}"
    # The LP relaxation bounds the MILP objective (weighted makespan + priced recompute/migration), not the
    # makespan alone: printing it next to the makespan read as a bound above the optimum.
    print(f"  MILP objective {obj} s (weighted makespan + priced recompute/migration), LP relaxation bound on "
          f"that objective {lp} s")
    print(f"  price router: s_p={p['prefill_s_per_token']:.4g} s/token, s_d={p['decode_s_per_token']:.4g} "
          f"s/token, rho={p['recompute_s_per_token']:.4g} s/token ({p['provenance']})")
    return plan


def _routing_session(args, opts):
    from optsched.pipelines.session_routing import plan_from_workload

    wl = _workload(args.workload, args.seed)
    plan, result = plan_from_workload(wl, args.gpu, args.model, args.tp, opts, args.seed, n_instances=args.instances)
    _summary("session routing LP", result)
    if not result.has_solution:
        return None
    if args.gate_loads:
        plan = _gated(plan, wl, args)
    d = plan.parameters["derived"]
    hbm = max(max(r) for r in d["hbm_price_per_token"])
    print(f"  snapshot of {d['n_sessions']} paused sessions: max HBM price {hbm:.4g} per token, "
          f"think forecasts {plan.parameters['think_forecast_s']}")
    pp, m = plan.parameters, d["move_margin"]
    print(f"  derived: bucket {pp['bucket_s']:.4g} s x {pp['n_buckets']}, re-price every {pp['reprice_s']:.4g} s, "
          f"pause-move margin {pp['move_margin_s']:.4g} s ({m.get('n_pairs', 0)} forecast/realized pairs)")
    return plan


def _gated(plan, wl, args):
    """``plan`` after the safe-improvement gate (`optsched.compare.gate.gated_parameters`) on ``wl`` at compare's
    defaults, seeded with ``--gate-loads``: its record in ``parameters["derived"]["improvement_gate"]``, ``deviate``
    False on "fallback"."""
    import dataclasses

    from optsched.compare.core import CompareConfig
    from optsched.compare.gate import gate_settings, gated_parameters

    d = CompareConfig(source=args.workload, loads=args.gate_loads)
    cluster = {**d.cluster, "gpu": args.gpu, "model": args.model, "tp": int(args.tp), "instances": int(args.instances)}
    doc = {"kind": plan.kind, "type": plan.type, "parameters": dict(plan.parameters)}
    params, g = gated_parameters(doc, wl, cluster, gate_settings(d), int(args.seed))
    print(f"  gate (router vs cache-aware on this workload): {g['outcome']}, {g['why']}"
          + ("; the plan routes as cache-aware (deviate: false)" if g["outcome"] == "fallback" else ""))
    return dataclasses.replace(plan, parameters=params)


def _pd(args, opts):
    from optsched.pipelines.pd import plan_from_workload

    plan, result = plan_from_workload(_workload(args.workload, args.seed), args.gpu, args.model, args.tp, opts,
                                      args.seed, gpu_budget=args.gpu_budget, ttft_p90_s=args.ttft, tpot_s=args.tpot,
                                      formulation=args.formulation)
    _summary(f"pd MILP ({args.formulation})", result)
    p = plan.parameters
    rows = ", ".join(f"{c['instances']}x {c['role']} tp{c['tp']}" for c in p["counts"])
    pr = p.get("profile")
    head = (f"profile {pr['input_tokens']} in / {pr['output_tokens']} out / {pr['cached_fraction']:.1%} cached"
            if pr else "goodput per pool predicted on the workload's own calls (optsched.cost.pool_queue)")
    print(f"  {head}: {rows}; {p['gpus']}/{p['gpu_budget']} GPUs, goodput {p['goodput_rps']:.4g} req/s "
          f"({p['goodput_per_gpu']:.4g} per GPU)")
    return plan
