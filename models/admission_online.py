"""Exact simulator of the unit-round KV model of `admission_hindsight`, for online admission rules.

The MILP's model, replayed forward in time so that an online rule's total latency is measured on
exactly the model the hindsight optimum solves (apples to apples): rounds t = 0, 1, ...; at round t a
rule sees only the requests that have arrived (a_i <= t) and not started, and picks which to start
at t. A start is accepted only if the KV memory of all running requests plus the new one stays
<= M at every future round (IP constraint (3) of Jaillet et al., arXiv:2502.07115), so every rule's
schedule is feasible for the MILP (tested) and its latency is an upper bound on the optimum.
Output lengths o_i are known to the rules (the paper's exact-prediction setting).

Rules (`RULES`), each an analogue of a serving-engine admission heuristic on this model:
- ``fcfs``: arrival order, stop at the first request that does not fit (head-of-line blocking) -
  the paper's "MC-Benchmark" and vLLM's default FCFS queue.
- ``shortest_first``: smallest prompt s_i first (what an engine knows at arrival), skip misfits.
- ``threshold``: vLLM ``--long-prefill-token-threshold`` analogue: prompts with s_i <= theta go ahead of
  longer ones (a capped long prefill lets short ones pass it); FCFS within the two classes; stop.
- ``interval``: vLLM ``--prefill-schedule-interval`` analogue: new starts only on rounds t % N == 0, FCFS.
- ``mcsf``: Memory-Constrained Shortest-First, Jaillet et al. (2025) Algorithm MC-SF: ascending o_i,
  stop at the first misfit.
- ``rollout``: optsched's derived rule, MC-SF with one-step lookahead (Bertsekas' rollout, "Dynamic
  Programming and Optimal Control" Vol. I, Sec. 6.4): at a round where some waiting request fits, try
  each fitting request as the first start (then fill in MC-SF order) and also "start nothing", finish
  each trial with MC-SF over the requests known now, and keep the trial with the least total latency
  of the known requests. It uses only arrived requests, so it is online; on the known set it is never
  worse than MC-SF (rollout's cost-improvement property). What it looks ahead for is the MILP's
  finding that the optimum often starts a different request than the shortest one to pack memory.
- ``scenario_rollout``: optsched's derived rule v1 (`models.admission_scenario`): the same one-step
  lookahead, but decisions are also scored by the mean total latency over K sampled scenarios of
  arrivals in the next H rounds (rate estimated from the arrivals seen so far); it leaves the plain
  rollout's decision when a sampled-future score is better by more than delta rounds, so it can defer
  a long request for short ones likely to arrive soon. Online: no future request is looked at.
- ``scenario_lookahead``: optsched's derived rule v2 (`models.admission_lookahead`): the lookahead over
  every set of fitting requests, scored over K = 64 sampled futures of a stream that can end (the
  probability of more arrivals falls with the silence since the last one); once no sampled future holds
  an arrival it finishes each candidate with the plain rollout instead of MC-SF. Online as above.

Diagnostic (`DIAGNOSTICS`, NOT an online rule): ``rollout_hindsight`` is the same rollout but it also
sees requests that have not arrived yet (they can only start after their arrival). Its gap to the
optimum separates what the rollout loses to its MC-SF base policy from what it loses to not knowing
future arrivals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from optsched.models.admission_data import KVRequest
from optsched.models.admission_rounds import RoundState, rollout_step

__all__ = ["DIAGNOSTICS", "RULES", "RuleConfig", "memory_profile", "simulate_rounds", "total_latency"]

RULES = ("fcfs", "shortest_first", "threshold", "interval", "mcsf", "rollout", "scenario_rollout", "scenario_lookahead")
DIAGNOSTICS = ("rollout_hindsight",)


@dataclass(frozen=True, slots=True)
class RuleConfig:
    """Rule name and its parameters.

    Attributes:
        name: one of RULES.
        interval_rounds: N of the ``interval`` rule (>= 1).
        threshold_tokens: theta of the ``threshold`` rule (prompt tokens, >= 1).
        scenarios: K of ``scenario_rollout`` (sampled arrival scenarios per decision, >= 1).
        horizon_rounds: H of ``scenario_rollout`` (rounds of sampled future arrivals, >= 1).
        switch_margin_rounds: delta of ``scenario_rollout`` (rounds, >= 0): it leaves the plain rollout's
            decision only for one whose mean sampled-scenario latency is lower by more than delta.
        seed: seed of the scenario rules' samplers (int >= 0; the draw at round t uses (seed, t, #known)).
        lookahead_scenarios: K of ``scenario_lookahead`` (>= 1).
        lookahead_horizon_rounds: H of ``scenario_lookahead`` (rounds, >= 1).
        continue_prob: q of ``scenario_lookahead``: probability that the stream continues after an
            arrival (0 < q < 1; prior mean 1 / (1 - q) further requests).
        subset_cap: ``scenario_lookahead`` enumerates every fitting set when at most this many waiting
            requests fit (>= 0), else single-request candidates.
        size_law: (s, o) pairs the ``scenario_lookahead`` sampler draws arriving sizes from; empty (default)
            = Jaillet et al.'s Arrival-Model-2 law (`admission_lookahead.sample_stream`).

    Raises:
        ValueError: unknown name or out-of-range parameter.
    """

    name: str
    interval_rounds: int = 4
    threshold_tokens: int = 2
    scenarios: int = 8
    horizon_rounds: int = 4
    switch_margin_rounds: float = 3.0
    seed: int = 0
    lookahead_scenarios: int = 64
    lookahead_horizon_rounds: int = 4
    continue_prob: float = 0.9
    subset_cap: int = 6
    size_law: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.name not in RULES + DIAGNOSTICS:
            raise ValueError(f"rule name must be one of {RULES + DIAGNOSTICS}, got {self.name!r}")
        if not (isinstance(self.interval_rounds, int) and self.interval_rounds >= 1):
            raise ValueError(f"interval_rounds must be an int >= 1, got {self.interval_rounds!r}")
        if not (isinstance(self.threshold_tokens, int) and self.threshold_tokens >= 1):
            raise ValueError(f"threshold_tokens must be an int >= 1, got {self.threshold_tokens!r}")
        for field in ("scenarios", "horizon_rounds", "lookahead_scenarios", "lookahead_horizon_rounds"):
            v = getattr(self, field)
            if not (isinstance(v, int) and v >= 1):
                raise ValueError(f"{field} must be an int >= 1, got {v!r}")
        if not (self.switch_margin_rounds >= 0):
            raise ValueError(f"switch_margin_rounds must be >= 0 rounds, got {self.switch_margin_rounds!r}")
        if not (0.0 < self.continue_prob < 1.0):
            raise ValueError(f"continue_prob must be in (0, 1), got {self.continue_prob!r}")
        if not (isinstance(self.subset_cap, int) and self.subset_cap >= 0):
            raise ValueError(f"subset_cap must be an int >= 0, got {self.subset_cap!r}")
        if not (isinstance(self.seed, int) and self.seed >= 0):
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")


def _order_and_stop(cfg: RuleConfig) -> tuple[Callable[[int, KVRequest], tuple], bool]:
    if cfg.name in ("fcfs", "interval"):
        return (lambda i, r: (r.arrival, i)), True
    if cfg.name == "shortest_first":
        return (lambda i, r: (r.prompt_tokens, r.arrival, i)), False
    if cfg.name == "threshold":
        th = cfg.threshold_tokens
        return (lambda i, r: (r.prompt_tokens > th, r.arrival, i)), True
    return (lambda i, r: (r.output_tokens, r.arrival, i)), True  # mcsf, and rollout's base policy


def simulate_rounds(requests: Sequence[KVRequest], memory_tokens: int, rule: RuleConfig) -> tuple[int, ...]:
    """Start round of every request under ``rule`` (deterministic; ties broken by arrival, then index).

    Raises:
        ValueError: a request whose peak s_i + o_i exceeds ``memory_tokens`` (it could never start).
    """
    for i, r in enumerate(requests):
        if r.peak_tokens > memory_tokens:
            raise ValueError(f"requests[{i}]: peak {r.peak_tokens} tokens > memory_tokens={memory_tokens}")
    key, stop = _order_and_stop(rule)
    n = len(requests)
    state = RoundState(requests, memory_tokens)
    pending = sorted(range(n), key=lambda i: requests[i].arrival)
    known: list[int] = []
    waiting: list[int] = []
    t, nxt = 0, 0
    while nxt < n or waiting:
        while nxt < n and requests[pending[nxt]].arrival <= t:
            known.append(pending[nxt])
            waiting.append(pending[nxt])
            nxt += 1
        if not waiting:
            t = requests[pending[nxt]].arrival
            continue
        if rule.name in ("rollout", "rollout_hindsight"):
            if any(state.fits(i, t) for i in waiting):
                seen = known if rule.name == "rollout" else list(range(n))
                state = rollout_step(state, seen, waiting, t)
        elif rule.name == "scenario_rollout":
            if any(state.fits(i, t) for i in waiting):
                from optsched.models.admission_scenario import scenario_rollout_step

                state = scenario_rollout_step(state, known, waiting, t, rule.scenarios, rule.horizon_rounds, rule.seed,
                                              rule.switch_margin_rounds)
        elif rule.name == "scenario_lookahead":
            if any(state.fits(i, t) for i in waiting):
                from optsched.models.admission_lookahead import scenario_lookahead_step

                state = scenario_lookahead_step(state, known, waiting, t, rule, size_law=rule.size_law)
        elif rule.name != "interval" or t % rule.interval_rounds == 0:
            state.fill(sorted(waiting, key=lambda j: key(j, requests[j])), t, stop)
        waiting = [i for i in waiting if state.starts[i] < 0]
        t += 1
    return tuple(state.starts)


def memory_profile(requests: Sequence[KVRequest], starts: Sequence[int]) -> np.ndarray:
    """KV tokens held at every round t = 0..max(start + o) under the given starts (IP constraint (3))."""
    end = max(p + r.output_tokens for p, r in zip(starts, requests))
    load = np.zeros(end + 1, dtype=np.int64)
    for p, r in zip(starts, requests):
        load[p + 1 : p + 1 + r.output_tokens] += r.prompt_tokens + np.arange(1, r.output_tokens + 1)
    return load


def total_latency(requests: Sequence[KVRequest], starts: Sequence[int]) -> int:
    """sum_i (p_i + o_i - a_i), rounds (IP objective (1))."""
    return int(sum(p + r.output_tokens - r.arrival for p, r in zip(starts, requests)))
