"""The derived admission rule ``scenario_lookahead`` running inside the cluster simulator.

`LookaheadAdmission` reads the instance's `AdmissionView` (KV capacity, the running set, the arrivals
so far: `optsched.policies.base`) and maps them onto the unit-round model of Jaillet et al.
(arXiv:2502.07115) that `optsched.models.admission_lookahead` decides on:

- one memory unit is ``unit_tokens`` = u tokens; M = floor(HBM KV tokens of the instance / u);
- one round is ``round_s`` seconds (u decode steps of one sequence: memory grows one unit per round, as
  in the model); round t = floor(now_s / round_s), a call's arrival round = floor(arrival_s / round_s);
- a call is a request with s = ceil(input / u), o = max(1, ceil(output / u)) (clipped so s + o <= M);
- a running call holds ceil(kv_tokens / u) + j units j rounds ahead, for ceil(remaining output / u)
  rounds (its real KV, not the model's replay of it);
- finished calls cost the same for every candidate, so only running and waiting calls enter the
  lookahead; the rate estimate and sampler seed use every arrival (`scenario_lookahead_step` ``history``).

Decisions: the rule decides which waiting calls start when the round or the number of arrivals changed
since its last decision on that instance (the unit model decides once a round, with everything that
arrived by then); between decisions only those calls may start. Started prefills always continue.
Chunks fill the step's token budget in order: started prefills, then the chosen calls in MC-SF order
(ascending output). Work-conserving guard (not in the unit model, where rounds always advance): when
nothing runs and the rule starts nothing, the MC-SF-first waiting call starts (an idle engine would not
step again until the next arrival). The sampled arrivals' sizes follow ``size_law`` (the workload's own
(s, o) pairs in units) when given.

The parameters are chosen by `optsched.pipelines.admission_derive` against hindsight MILP optima and
recorded in the Plan (type "scenario_lookahead").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from optsched.models.admission_data import KVRequest
from optsched.models.admission_lookahead import scenario_lookahead_step
from optsched.models.admission_online import RuleConfig
from optsched.models.admission_rounds import RoundState
from optsched.policies.admission_fcfs import greedy_chunks
from optsched.policies.base import AdmissionView, WaitingPrefill

__all__ = ["LookaheadAdmission", "unit_instance"]


def unit_instance(view: AdmissionView, waiting_ids: Sequence[str], unit_tokens: int, round_s: float,
                  start_rounds: Mapping[str, int]):
    """(state, known, waiting, history, t, ids) of the unit-round model for ``view`` (module docstring).

    ``waiting_ids``: calls not started; ``start_rounds``: rounds at which this rule started calls (a
    started call without one is taken as started at its arrival round; only cost constants depend on it).
    Returns the `admission_rounds.RoundState` with the running calls' load, the indices of the running +
    waiting requests (``known``), of the waiting ones, every arrival round (``history``), round t and the
    call id of each request index.
    """
    u = int(unit_tokens)
    mem = (view.kv_capacity_blocks * view.block_size) // u
    t = int(view.now_s // round_s)
    last: dict[str, Any] = {}
    for a in view.arrivals:
        last[a.call_id] = a  # re-enqueued after a KV move: the latest enqueue
    history = [int(a.arrival_s // round_s) for a in view.arrivals]
    running = {r.call_id: r for r in view.running}
    wait = [c for c in waiting_ids if c in last]
    ids = [c for c in last if c in running] + wait
    reqs = []
    for c in ids:
        a = last[c]
        s = min(max(1, math.ceil(a.input_tokens / u)), mem - 1)
        o = min(max(1, math.ceil(a.output_tokens / u)), mem - s)
        reqs.append(KVRequest(int(a.arrival_s // round_s), s, o))
    state = RoundState(tuple(reqs) or (KVRequest(0, 1, 1),), mem)
    for k, c in enumerate(ids):
        r = running.get(c)
        if r is None:
            continue
        state.starts[k] = min(t, start_rounds.get(c, reqs[k].arrival))
        ro = math.ceil(r.remaining_output_tokens / u)
        if ro > 0:
            state._ensure(t + 1 + ro)
            state.load[t + 1: t + 1 + ro] += math.ceil(r.kv_tokens / u) + np.arange(1, ro + 1)
    n_run = len(ids) - len(wait)
    return state, list(range(len(ids))), list(range(n_run, len(ids))), history, t, ids


class LookaheadAdmission:
    """Scenario lookahead (derived v2) on the cluster simulator's `AdmissionView`.

    Args:
        unit_tokens: u, tokens per memory unit (>= 1).
        round_s: seconds per round (> 0).
        scenarios / horizon_rounds / continue_prob / subset_cap / seed: K, H, q, the subset cap and the
            sampler seed of `models.admission_lookahead`.
        size_law: (s, o) unit sizes of arriving calls for the sampler; () = Jaillet's law.

    Raises:
        ValueError: a parameter out of range (as `RuleConfig`), unit_tokens < 1 or round_s <= 0.
    """

    name: ClassVar[str] = "scenario_lookahead"
    wants_view: ClassVar[bool] = True

    def __init__(self, unit_tokens: int, round_s: float, scenarios: int = 64, horizon_rounds: int = 4,
                 continue_prob: float = 0.9, subset_cap: int = 6, seed: int = 0,
                 size_law: Sequence[Sequence[int]] = ()) -> None:
        if not (isinstance(unit_tokens, int) and unit_tokens >= 1):
            raise ValueError(f"unit_tokens must be an int >= 1, got {unit_tokens!r}")
        if not (round_s > 0 and math.isfinite(round_s)):
            raise ValueError(f"round_s must be > 0 s, got {round_s!r}")
        self.unit_tokens, self.round_s = unit_tokens, float(round_s)
        self.cfg = RuleConfig("scenario_lookahead", seed=seed, lookahead_scenarios=scenarios,
                              lookahead_horizon_rounds=horizon_rounds, continue_prob=continue_prob,
                              subset_cap=subset_cap)
        self.size_law = tuple((int(s), int(o)) for s, o in size_law)
        self._memo: dict[int, dict[str, Any]] = {}
        self.decisions = 0  # lookahead decisions taken (for reports)
        self.guard_starts = 0  # starts by the work-conserving guard
        self.log: list[tuple[int, int, tuple[str, ...]]] = []  # (instance, round, calls chosen) per decision

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any]) -> LookaheadAdmission:
        """From a Plan's parameters (keys as the constructor's; ``derivation`` is a report, ignored)."""
        keys = ("unit_tokens", "round_s", "scenarios", "horizon_rounds", "continue_prob", "subset_cap", "seed",
                "size_law")
        return cls(**{k: params[k] for k in keys if k in params})

    def select(self, waiting: Sequence[WaitingPrefill], token_budget: int, step_index: int, now_s: float,
               view: AdmissionView | None = None) -> list[tuple[int, int]]:
        """Chunks ``(index into waiting, tokens)``; total <= token_budget. Raises ValueError without a view."""
        if view is None:
            raise ValueError("scenario_lookahead needs the AdmissionView (wants_view = True)")
        running = {r.call_id for r in view.running}
        started = [i for i, w in enumerate(waiting) if w.call_id in running]
        fresh = [i for i, w in enumerate(waiting) if w.call_id not in running]
        memo = self._memo.setdefault(view.instance_id, {"key": None, "allowed": set(), "start": {}})
        key = (int(now_s // self.round_s), len(view.arrivals))
        if fresh and key != memo["key"]:
            memo["key"] = key
            memo["allowed"] = self._decide(view, [waiting[i].call_id for i in fresh], memo["start"])
        out = {r.call_id: r for r in view.arrivals}
        chosen = [i for i in fresh if waiting[i].call_id in memo["allowed"]]
        if fresh and not chosen and not view.running:
            chosen = [min(fresh, key=lambda i: (out[waiting[i].call_id].output_tokens, waiting[i].arrival_s, i))]
            memo["allowed"] = memo["allowed"] | {waiting[chosen[0]].call_id}
            self.guard_starts += 1
        chosen.sort(key=lambda i: (out[waiting[i].call_id].output_tokens, waiting[i].arrival_s, i))
        t = int(now_s // self.round_s)
        for i in chosen:
            memo["start"].setdefault(waiting[i].call_id, t)
        return greedy_chunks(waiting, started + chosen, token_budget)

    def _decide(self, view: AdmissionView, waiting_ids: list[str], start_rounds: Mapping[str, int]) -> set[str]:
        state, known, wait, history, t, ids = unit_instance(view, waiting_ids, self.unit_tokens, self.round_s,
                                                           start_rounds)
        if not wait or not any(state.fits(i, t) for i in wait):
            return set()
        self.decisions += 1
        new = scenario_lookahead_step(state, known, wait, t, self.cfg, history=history, size_law=self.size_law)
        chosen = {ids[i] for i in wait if new.starts[i] >= 0}
        self.log.append((view.instance_id, t, tuple(sorted(chosen))))
        return chosen
