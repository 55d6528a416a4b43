"""Admission door: Jaillet-style instance -> hindsight MILP -> optimum vs online rules -> `Plan`.

The instance generator follows the synthetic setup of Jaillet et al., arXiv:2502.07115 (experiments,
"Arrival Model 2"): memory M ~ U{30..50} tokens, prompt s_i ~ U{1..5}, output o_i ~ U{1..M - s_i},
Poisson arrivals with rate lambda ~ U[0.5, 1.5] per round (arrival round = floor of the arrival time).
The paper uses 40-60 requests solved with Gurobi; HiGHS on this machine solves ~8 requests in seconds,
so ``n_requests`` is a parameter (documented in docs/notebook/BENCHMARKS.md, "Prefill admission").
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from optsched.cost import CostModel
from optsched.models.admission_data import HindsightInstance, KVRequest
from optsched.models.admission_hindsight import (
    build_admission_hindsight,
    extract_admission_hindsight,
)
from optsched.models.admission_online import RULES, RuleConfig, memory_profile, simulate_rounds, total_latency
from optsched.plan import Plan, Provenance
from optsched.revision import git_revision
from optsched.solvers import SolveResult, SolverOptions, solve
from optsched.workload.digest import workload_digest
from optsched.workload.timeline import calls_in_release_order, uncontended_timeline

__all__ = [
    "AdmissionComparison",
    "AdmissionSolve",
    "admission_plan",
    "compare_rules_to_optimum",
    "instance_digest",
    "jaillet_instance",
    "plan_from_workload",
    "safe_wait_window",
    "solve_requests",
    "solve_workload",
    "workload_rounds",
]

logger = logging.getLogger(__name__)


def jaillet_instance(
    rng: np.random.Generator, n_requests: int, arrival_model: int = 2
) -> tuple[tuple[KVRequest, ...], int]:
    """One random instance (requests, M) of Jaillet et al.'s synthetic setup (see module docstring):
    ``arrival_model=2`` Poisson arrivals; ``arrival_model=1`` every request arrives at round 0 (their
    "Arrival Model 1", where online rules lose nothing to unknown arrivals). The same draws are made in
    both models, so instance k differs only in its arrival rounds.

    Raises:
        ValueError: n_requests < 1 or arrival_model not in (1, 2).
    """
    if not (isinstance(n_requests, int) and n_requests >= 1):
        raise ValueError(f"n_requests must be an int >= 1, got {n_requests!r}")
    if arrival_model not in (1, 2):
        raise ValueError(f"arrival_model must be 1 or 2, got {arrival_model!r}")
    memory = int(rng.integers(30, 51))
    rate = float(rng.uniform(0.5, 1.5))
    t = 0.0
    out = []
    for _ in range(n_requests):
        t += float(rng.exponential(1.0 / rate))
        s = int(rng.integers(1, 6))
        o = int(rng.integers(1, memory - s + 1))
        out.append(KVRequest(int(t) if arrival_model == 2 else 0, s, o))
    return tuple(out), memory


def safe_wait_window(requests: Sequence[KVRequest], feasible_total_latency: int) -> int:
    """W such that every optimal schedule starts each request within a_i .. a_i + W.

    With a feasible schedule of total latency H, an optimum has total <= H; request i's latency is
    (p_i - a_i) + o_i and every other request's is >= o_j, so p_i - a_i <= H - sum_j o_j.
    """
    return max(0, int(feasible_total_latency) - sum(r.output_tokens for r in requests))


def instance_digest(requests: Sequence[KVRequest], memory_tokens: int) -> str:
    """sha256 of the canonical JSON of the instance (provenance.workload_digest)."""
    data = {"M": memory_tokens, "req": [[r.arrival, r.prompt_tokens, r.output_tokens] for r in requests]}
    return hashlib.sha256(json.dumps(data, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class AdmissionComparison:
    """Hindsight optimum of one instance and each online rule's total latency (rounds).

    ``optimum`` is None when the solve proved nothing (then ratios are not defined).
    """

    result: SolveResult
    optimum: int | None
    starts: tuple[int, ...] | None
    rule_latency: dict[str, int]
    build_time_s: float

    def ratio(self, rule: str) -> float:
        """rule latency / optimum. Raises ValueError without a proven optimum."""
        if self.optimum is None or self.result.status != "optimal":
            raise ValueError(f"no proven optimum (status {self.result.status}); ratio of {rule!r} undefined")
        return self.rule_latency[rule] / self.optimum


def compare_rules_to_optimum(
    requests: Sequence[KVRequest], memory_tokens: int, options: SolverOptions, rules: Sequence[str] = RULES
) -> AdmissionComparison:
    """Simulate every rule on the unit-round model, then solve the hindsight MILP with the window from
    the best rule (`safe_wait_window`) and a MIP start from that rule's schedule."""
    import time

    latencies: dict[str, int] = {}
    schedules: dict[str, tuple[int, ...]] = {}
    for k, name in enumerate(rules, 1):
        # progress: scenario_lookahead's cost grows steeply with the requests (BENCHMARKS, "Prefill admission")
        logger.info("admission: online rule %d/%d: %s", k, len(rules), name)
        st = simulate_rounds(requests, memory_tokens, RuleConfig(name))
        if memory_profile(requests, st).max(initial=0) > memory_tokens:  # cannot happen; guards the simulator
            raise ValueError(f"rule {name} produced a schedule exceeding memory {memory_tokens}")
        latencies[name] = total_latency(requests, st)
        schedules[name] = st
    best_rule = min(latencies, key=lambda k: latencies[k])
    inst = HindsightInstance(tuple(requests), memory_tokens, safe_wait_window(requests, latencies[best_rule]))
    t0 = time.perf_counter()  # build time is reported, not used by the model (wall clock stays out of core)
    model = build_admission_hindsight(inst)
    build_s = time.perf_counter() - t0
    for (i, k) in model.IK:
        model.x[i, k].value = 1.0 if schedules[best_rule][i] == k else 0.0
    result = solve(model, options)
    if not result.has_solution:
        logger.warning("admission hindsight: %s (%s)", result.status, result.message)
        return AdmissionComparison(result, None, None, latencies, build_s)
    sched = extract_admission_hindsight(model, inst)
    optimum = sched.total_latency if result.status == "optimal" else None
    return AdmissionComparison(result, optimum, sched.starts, latencies, build_s)


def admission_plan(
    comparison: AdmissionComparison,
    digest: str,
    seed: int | None,
    output_tokens_estimate: int = 256,
    urgent_slack_s: float = 0.5,
) -> Plan:
    """`Plan` of kind "admission", type "mcsf_rollout" with its provenance: the cluster-simulator reduction
    of the derived unit-round rules (``rollout``, ``scenario_rollout`` and the current derived rule
    ``scenario_lookahead`` need output lengths, the KV view and the arrival history, which the `Admission`
    protocol does not expose; see `policies.admission_derived`).

    The cluster-simulator policy (`optsched.policies.admission_derived.DerivedAdmission`) takes
    ``output_tokens_estimate`` (tokens) and ``urgent_slack_s`` (s) as parameters.
    """
    r = comparison.result
    prov = Provenance(
        workload_digest=digest,
        solver=r.solver,
        solver_version=r.solver_version,
        objective=r.objective,
        bound=r.bound,
        gap=r.gap,
        seed=seed,
        git_revision=git_revision()["commit"],
        objective_units="rounds (total latency, unit-round model)",
    )
    params = {"output_tokens_estimate": int(output_tokens_estimate), "urgent_slack_s": float(urgent_slack_s)}
    return Plan("admission", "mcsf_rollout", params, prov)


def workload_rounds(wl, cm, n_calls: int, memory_units: int = 40) -> tuple[tuple[KVRequest, ...], int]:
    """Quantize the first ``n_calls`` calls (by release on the uncontended timeline,
    `optsched.workload.timeline.uncontended_timeline`) of a workload into the unit-round model.

    One token unit u = ceil(HBM KV tokens / memory_units) so that M = memory_units; a round is u decode
    steps (memory grows one unit per round, as in the model); s_i = ceil(input / u), o_i = ceil(output / u),
    arrival round = floor(release_s / (u * decode_step_time(1, median input))). A coarse mapping for
    sizing the MILP on real calls, stated in the CLI help; the benchmark uses Jaillet-style instances.

    Raises:
        ValueError: n_calls < 1, an empty workload, or a call whose KV peak exceeds the instance's HBM.
    """
    import math as _m

    if n_calls < 1:
        raise ValueError(f"n_calls must be >= 1, got {n_calls!r}")
    times = uncontended_timeline(wl, cm)
    calls = calls_in_release_order(wl, times)[:n_calls]
    cap = int(cm.kv_capacity_tokens())
    unit = _m.ceil(cap / memory_units)
    med_in = float(np.median([c.input_tokens for c in calls]))
    round_s = unit * float(cm.decode_step_time(1, med_in))
    reqs = []
    for c in calls:
        r = KVRequest(int(times[c.call_id][0] // round_s), _m.ceil(c.input_tokens / unit),
                      max(1, _m.ceil(c.output_tokens / unit)))
        if r.peak_tokens > memory_units:
            raise ValueError(f"call {c.call_id}: KV peak {c.input_tokens + c.output_tokens} tokens exceeds "
                             f"the instance's {cap} HBM KV tokens")
        reqs.append(r)
    return tuple(reqs), memory_units


@dataclass(frozen=True, slots=True)
class AdmissionSolve:
    """What `solve_requests` built: the exported ``plan`` (None without an incumbent), the ``comparison``
    (optimum and every rule's total latency, rounds) and the unit-round instance (``requests``,
    ``memory_tokens``)."""

    plan: Plan | None
    comparison: AdmissionComparison
    requests: tuple[KVRequest, ...]
    memory_tokens: int

    @property
    def result(self) -> SolveResult:
        """The hindsight MILP's `SolveResult`."""
        return self.comparison.result


def solve_requests(requests: Sequence[KVRequest], memory_tokens: int, options: SolverOptions, *,
                   seed: int | None = None, digest: str | None = None,
                   output_tokens_estimate: int = 256) -> AdmissionSolve:
    """Every online rule and the hindsight MILP on one unit-round instance (`compare_rules_to_optimum`),
    and the derived `admission_plan`. ``digest`` is the provenance's workload digest (default: the
    instance's own, `instance_digest`)."""
    reqs = tuple(requests)
    logger.info("admission: %d requests, memory %d units; simulating rules and solving the hindsight MILP",
                len(reqs), memory_tokens)
    cmp_ = compare_rules_to_optimum(reqs, memory_tokens, options)
    plan = None
    if cmp_.result.has_solution:
        plan = admission_plan(cmp_, digest or instance_digest(reqs, memory_tokens), seed,
                              output_tokens_estimate=output_tokens_estimate)
    return AdmissionSolve(plan, cmp_, reqs, memory_tokens)


def solve_workload(wl, cm, options: SolverOptions, *, seed: int | None = None, n_calls: int = 8,
                   memory_units: int = 40) -> AdmissionSolve:
    """`workload_rounds` of ``wl`` then `solve_requests`; the plan's output-token estimate is the
    workload's median output (tokens) and its digest `optsched.workload.digest.workload_digest`.

    Raises:
        ValueError: see `workload_rounds`.
    """
    reqs, memory = workload_rounds(wl, cm, n_calls, memory_units)
    out_est = int(np.median([c.output_tokens for c in wl.calls()]))
    return solve_requests(reqs, memory, options, seed=seed, digest=workload_digest(wl), output_tokens_estimate=out_est)


def plan_from_workload(wl, gpu: str, model: str, tp: int, options: SolverOptions | None = None,
                       seed: int | None = None, n_calls: int = 8) -> tuple[Plan | None, SolveResult]:
    """Door (`optsched solve admission`): (Plan kind "admission" type "mcsf_rollout" or None without an
    incumbent, the hindsight MILP's `SolveResult`) for the first ``n_calls`` calls of ``wl``.

    Raises:
        ValueError: unknown gpu / model; see `workload_rounds`.
    """
    out = solve_workload(wl, CostModel.from_names(gpu, model, tp=tp),
                         options or SolverOptions(time_limit_s=120.0, mip_gap=1e-4), seed=seed, n_calls=n_calls)
    return out.plan, out.result
