"""Scenario rollout: optsched's derived online admission rule for the unit-round KV model.

Model: the hindsight IP (1)-(4) of Jaillet et al., "Online Scheduling for LLM Inference with KV Cache
Constraints", arXiv:2502.07115 (`models.admission_hindsight`), replayed forward by
`models.admission_online.simulate_rounds`. At a round t where some waiting request fits, the rule is a
one-step lookahead (rollout, Bertsekas, "Dynamic Programming and Optimal Control" Vol. I, Sec. 6.4)
whose cost is a sample-average approximation (SAA) of the MILP objective over requests that may
still arrive:

1. Candidate decisions: start nothing, or start one fitting waiting request first and then fill in
   MC-SF order (ascending o_i, stop at the first misfit; Jaillet et al. Algorithm MC-SF).
2. K scenarios of future arrivals in rounds t+1 .. t+H: a Poisson number with mean lambda_hat * H,
   arrival rounds uniform in that window, sizes from the workload's size law (here Jaillet et al.'s
   "Arrival Model 2": s ~ U{1..5}, o ~ U{1..M - s}). lambda_hat = (1 + arrivals seen) / (1 + t + 1)
   is the posterior mean of a Gamma(1, 1) prior on the rate (prior mean 1 per round) given the
   arrivals seen so far. No future request of the instance is looked at.
3. Each decision is finished by MC-SF on known + scenario requests; its cost is the mean over
   scenarios of the total latency (IP objective (1)) of known and scenario requests. The same
   scenarios (common random numbers) score every decision.
4. The default is the plain rollout's decision (least total latency of the known requests alone,
   finished by MC-SF); the decision with the least scenario cost replaces it only if its scenario cost
   is lower by more than ``switch_margin_rounds`` (delta, rounds). delta guards against sampling noise
   and against arrivals that never come (a finite stream). Only round t's decision is committed.

Why: the hindsight optimum's main advantage over MC-SF on Poisson arrivals is deferring a long request
so that short ones arriving 1-5 rounds later can run first (docs/notebook/BENCHMARKS.md, "Prefill admission"); a deterministic rollout
over known requests cannot see that, the sampled future can. Parameters K (``scenarios``), H
(``horizon_rounds``) and delta (``switch_margin_rounds``) were chosen on training instances of a different seed stream than the benchmark's
evaluation set (docs/notebook/BENCHMARKS.md, "Prefill admission", states the split). The sampler is seeded by ``(seed, t, #known)``, so a
run is deterministic.
"""

from __future__ import annotations

import numpy as np

from optsched.models.admission_data import KVRequest
from optsched.models.admission_rounds import extend, mcsf_finish

__all__ = ["sample_arrivals", "scenario_rollout_step"]


def sample_arrivals(
    rng: np.random.Generator,
    t: int,
    rate: float,
    horizon_rounds: int,
    memory_tokens: int,
    prompt_range: tuple[int, int] = (1, 5),
) -> tuple[KVRequest, ...]:
    """One scenario of arrivals in rounds t+1 .. t+H (Poisson count, uniform rounds, Arrival-Model-2 sizes).

    Returns requests sorted by arrival (rounds, tokens). Raises ValueError: rate < 0 or H < 1.
    """
    if rate < 0 or horizon_rounds < 1:
        raise ValueError(f"rate must be >= 0 and horizon_rounds >= 1, got {rate!r}, {horizon_rounds!r}")
    count = int(rng.poisson(rate * horizon_rounds))
    out = []
    for _ in range(count):
        arrival = t + 1 + int(rng.integers(0, horizon_rounds))
        s = int(rng.integers(prompt_range[0], min(prompt_range[1], memory_tokens - 1) + 1))
        o = int(rng.integers(1, memory_tokens - s + 1))
        out.append(KVRequest(arrival, s, o))
    return tuple(sorted(out, key=lambda r: r.arrival))


def scenario_rollout_step(
    state,
    known: list[int],
    waiting: list[int],
    t: int,
    scenarios: int,
    horizon_rounds: int,
    seed: int,
    switch_margin_rounds: float = 3.0,
):
    """The state after round t's starts under the scenario rollout (module docstring); ``state`` is
    `admission_rounds.RoundState` and is not modified."""
    req = state.req
    rng = np.random.default_rng([seed, t, len(known)])
    rate = (1.0 + len(known)) / (1.0 + t + 1)
    draws = [sample_arrivals(rng, t, rate, horizon_rounds, state.mem) for _ in range(scenarios)]
    n = len(req)
    order = sorted(waiting, key=lambda j: (req[j].output_tokens, req[j].arrival, j))
    trials, known_cost, scen_cost = [], [], []
    for first in [None] + [i for i in order if state.fits(i, t)]:
        trial = state.copy()
        if first is not None:
            trial.start(first, t)
            trial.fill(order, t, stop=True)
        trials.append(trial)
        known_cost.append(mcsf_finish(trial.copy(), known, t + 1))
        total = sum(
            mcsf_finish(extend(trial, ph), known + list(range(n, n + len(ph))), t + 1) for ph in draws
        )
        scen_cost.append(total / scenarios)
    plain = min(range(len(trials)), key=lambda k: known_cost[k])  # first minimum, as the plain rollout
    best = min(range(len(trials)), key=lambda k: scen_cost[k])
    return trials[best] if scen_cost[plain] - scen_cost[best] > switch_margin_rounds else trials[plain]
