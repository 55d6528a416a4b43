"""Scenario lookahead: optsched's derived online admission rule (v2) for the unit-round KV model.

Model: the hindsight IP (1)-(4) of Jaillet et al., "Online Scheduling for LLM Inference with KV Cache
Constraints", arXiv:2502.07115 (`models.admission_hindsight`), replayed forward by
`models.admission_online.simulate_rounds` (rule ``scenario_lookahead``). At a round t where some waiting
request fits, the rule solves a sample-average approximation (SAA) of the rest of the problem by
one-step lookahead (rollout, Bertsekas, "Dynamic Programming and Optimal Control" Vol. I, Sec. 6.4):

1. Candidate decisions: every set of waiting requests that fits together at round t (the empty set
   included), enumerated when at most ``subset_cap`` waiting requests fit on their own; otherwise
   "nothing", "j alone" and "j first, then MC-SF fill" for each fitting j.
2. Future arrivals are sampled from a stream model that can END (finite streams are the benchmark's
   and the batch case): after each arrival the stream continues with probability q
   (``continue_prob``), inter-arrival times are Exp(lambda). lambda_hat = (1 + k) / (1 + a_last + 1)
   for k arrivals seen, the last at round a_last (Gamma(1, 1) prior, exposure up to the last arrival).
   After u = t - a_last silent rounds the posterior probability that more arrivals come is
   p = q e^{-lambda_hat u} / (q e^{-lambda_hat u} + 1 - q) (Bayes on "continued" vs "ended"); a
   scenario continues with probability p, and its arrivals in rounds t+1 .. t+H get sizes from the
   size law of Jaillet et al.'s "Arrival Model 2" (s ~ U{1..5}, o ~ U{1..M - s}).
3. Each candidate is finished by MC-SF (Jaillet et al. Algorithm MC-SF: ascending o_i, stop at the
   first misfit) on known + scenario requests; its cost is the mean over K scenarios of their total
   latency (IP objective (1)); the same K scenarios score every candidate (common random numbers).
4. When no scenario holds an arrival (the stream has, in all likelihood, ended), the problem left is
   deterministic and each candidate is finished by the plain rollout instead of MC-SF (rollout of the
   rollout: a stronger base policy, affordable because it runs once, not K times).
The least-cost candidate is committed for round t only (first minimum: deterministic ties).

Online: it reads only requests with a_i <= t (their sizes and arrival rounds) and the round; the
sampler is seeded by (seed, t, #known). Parameters K, H, q, ``subset_cap`` were chosen on training
instances of seed streams 1 and 2, never on the evaluation set (docs/notebook/BENCHMARKS.md, "Prefill admission", states the split).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from optsched.models.admission_data import KVRequest
from optsched.models.admission_rounds import extend, mcsf_finish, rollout_step

__all__ = ["candidate_starts", "continuation_probability", "sample_stream", "scenario_lookahead_step"]


def continuation_probability(arrivals: Sequence[int], t: int, continue_prob: float) -> tuple[float, float]:
    """(lambda_hat per round, probability that more requests arrive) after the arrivals seen by round t.

    ``arrivals``: arrival rounds of the known requests (non-empty). Formulas: module docstring, step 2.
    Raises ValueError: no arrivals or continue_prob outside (0, 1).
    """
    if not arrivals:
        raise ValueError("arrivals must not be empty")
    if not 0.0 < continue_prob < 1.0:
        raise ValueError(f"continue_prob must be in (0, 1), got {continue_prob!r}")
    a_last = max(arrivals)
    rate = (1.0 + len(arrivals)) / (1.0 + a_last + 1.0)
    w = continue_prob * math.exp(-rate * max(0, t - a_last))
    return rate, w / (w + 1.0 - continue_prob)


def sample_stream(
    rng: np.random.Generator,
    t: int,
    rate: float,
    p_more: float,
    continue_prob: float,
    horizon_rounds: int,
    memory_tokens: int,
    prompt_range: tuple[int, int] = (1, 5),
    size_law: Sequence[tuple[int, int]] = (),
) -> tuple[KVRequest, ...]:
    """One scenario of arrivals in rounds t+1 .. t+H under the ending-stream model (module docstring).

    ``size_law``: (s, o) pairs drawn uniformly instead of the Arrival-Model-2 law when non-empty (each
    with s + o <= memory_tokens).

    Returns requests sorted by arrival. Raises ValueError: rate <= 0 or H < 1.
    """
    if rate <= 0 or horizon_rounds < 1:
        raise ValueError(f"rate must be > 0 and horizon_rounds >= 1, got {rate!r}, {horizon_rounds!r}")
    if rng.random() >= p_more:
        return ()
    out = []
    tau = t + 1 + rng.exponential(1.0 / rate)  # arrivals up to round t are all seen: the next is >= t+1
    while tau < t + 1 + horizon_rounds:
        if size_law:  # an empirical (s, o) law, e.g. a workload's calls in units (pipelines.admission_cluster)
            s, o = size_law[int(rng.integers(len(size_law)))]
        else:
            s = int(rng.integers(prompt_range[0], min(prompt_range[1], memory_tokens - 1) + 1))
            o = int(rng.integers(1, memory_tokens - s + 1))
        out.append(KVRequest(int(tau), s, o))
        if rng.random() >= continue_prob:
            break
        tau += rng.exponential(1.0 / rate)
    return tuple(out)


def _start_all(state, subset: Sequence[int], t: int):
    """Copy of ``state`` with every request of ``subset`` started at t, or None if they do not fit together."""
    trial = state.copy()
    for i in subset:
        if not trial.fits(i, t):
            return None
        trial.start(i, t)
    return trial


def candidate_starts(state, waiting: Sequence[int], t: int, subset_cap: int) -> list:
    """States after each candidate decision of round t (module docstring, step 1); ``state`` unchanged."""
    req = state.req
    order = sorted(waiting, key=lambda j: (req[j].output_tokens, req[j].arrival, j))
    fit = [i for i in order if state.fits(i, t)]
    out = [state.copy()]
    if len(fit) <= subset_cap:
        for size in range(1, len(fit) + 1):
            for sub in itertools.combinations(fit, size):
                trial = _start_all(state, sub, t)
                if trial is not None:
                    out.append(trial)
        return out
    seen = set()
    for first in fit:
        trial = state.copy()
        trial.start(first, t)
        trial.fill(order, t, stop=True)
        out.append(trial)
        seen.add(tuple(trial.starts))
    for first in fit:
        trial = state.copy()
        trial.start(first, t)
        if tuple(trial.starts) not in seen:
            out.append(trial)
            seen.add(tuple(trial.starts))
    return out


def _rollout_finish(state, idx: Sequence[int], t: int) -> int:
    """Total latency of ``idx`` when the plain rollout (`admission_online`) schedules them from round t."""
    req = state.req
    idx = list(idx)
    while any(state.starts[i] < 0 for i in idx):
        waiting = [i for i in idx if state.starts[i] < 0 and req[i].arrival <= t]
        if waiting and any(state.fits(i, t) for i in waiting):
            state = rollout_step(state, idx, waiting, t)
        t += 1
    return sum(state.starts[i] + req[i].output_tokens - req[i].arrival for i in idx)


def scenario_lookahead_step(state, known: list[int], waiting: list[int], t: int, cfg,
                            history: Sequence[int] | None = None, size_law: Sequence[tuple[int, int]] = ()):
    """State after round t's starts under the scenario lookahead; ``cfg`` is `admission_online.RuleConfig`
    (fields ``lookahead_scenarios``, ``lookahead_horizon_rounds``, ``continue_prob``, ``subset_cap``,
    ``seed``); ``state`` (`admission_rounds.RoundState`) is not modified.

    ``history``: arrival rounds of every request seen so far (default: those of ``known``); it sets the
    rate estimate and the sampler seed, so a caller may pass in ``known`` only the requests whose cost can
    still change (running or waiting) and get the same decision: finished requests add the same constant
    to every candidate's cost. ``size_law``: see `sample_stream`.
    """
    req = state.req
    n = len(req)
    seen = [req[i].arrival for i in known] if history is None else list(history)
    rate, p_more = continuation_probability(seen, t, cfg.continue_prob)
    rng = np.random.default_rng([cfg.seed, t, len(seen)])
    draws = [
        sample_stream(rng, t, rate, p_more, cfg.continue_prob, cfg.lookahead_horizon_rounds, state.mem,
                      size_law=size_law)
        for _ in range(cfg.lookahead_scenarios)
    ]
    cands = candidate_starts(state, waiting, t, cfg.subset_cap)
    if not any(draws):
        costs = [_rollout_finish(c.copy(), known, t + 1) for c in cands]
    else:
        costs = [
            sum(mcsf_finish(extend(c, ph), known + list(range(n, n + len(ph))), t + 1) for ph in draws)
            / len(draws)
            for c in cands
        ]
    return cands[min(range(len(cands)), key=lambda k: costs[k])]
