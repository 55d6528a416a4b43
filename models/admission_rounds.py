"""The unit-round KV model's state and the MC-SF rollout steps every online admission rule of
`admission_online` builds on (`admission_scenario`, `admission_lookahead` extend them).

Rounds t = 0, 1, ...; request i (`KVRequest`: arrival a_i, prompt s_i, output o_i tokens) started at
round t holds s_i + k tokens of KV at round t + k for k = 1..o_i; a start is accepted only if the KV of
all running requests stays <= M at every future round (IP constraint (3) of Jaillet et al.,
arXiv:2502.07115). MC-SF is their Algorithm MC-SF (Memory-Constrained Shortest-First); the rollout is
Bertsekas' ("Dynamic Programming and Optimal Control" Vol. I, Sec. 6.4).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from optsched.models.admission_data import KVRequest

__all__ = ["RoundState", "extend", "mcsf_finish", "rollout_step"]


class RoundState:
    """Future KV load (tokens per round) of started requests and their start rounds."""

    def __init__(self, requests: Sequence[KVRequest], memory_tokens: int) -> None:
        self.req = requests
        self.mem = memory_tokens
        horizon = max(r.arrival for r in requests) + sum(r.output_tokens for r in requests) + 2
        self.load = np.zeros(horizon + 1, dtype=np.int64)
        self.starts = [-1] * len(requests)

    def copy(self) -> RoundState:
        new = object.__new__(RoundState)
        new.req, new.mem, new.load, new.starts = self.req, self.mem, self.load.copy(), list(self.starts)
        return new

    def _ensure(self, end: int) -> None:
        if end > len(self.load):  # grow the horizon (interval rules may idle past the initial guess)
            self.load = np.concatenate([self.load, np.zeros(max(end, 2 * len(self.load)) - len(self.load), np.int64)])

    def fits(self, i: int, t: int) -> bool:
        r = self.req[i]
        self._ensure(t + 1 + r.output_tokens)
        window = self.load[t + 1 : t + 1 + r.output_tokens]
        return bool(np.all(window + r.prompt_tokens + np.arange(1, r.output_tokens + 1) <= self.mem))

    def start(self, i: int, t: int) -> None:
        r = self.req[i]
        self._ensure(t + 1 + r.output_tokens)
        self.load[t + 1 : t + 1 + r.output_tokens] += r.prompt_tokens + np.arange(1, r.output_tokens + 1)
        self.starts[i] = t

    def fill(self, order: Sequence[int], t: int, stop: bool) -> None:
        for i in order:
            if self.starts[i] >= 0:
                continue
            if self.fits(i, t):
                self.start(i, t)
            elif stop:
                break


def mcsf_finish(state: RoundState, idx: Sequence[int], t: int) -> int:
    """Total latency of ``idx`` when MC-SF (ascending output length, then arrival, then index; stop at the
    first misfit) schedules their unstarted ones from round t on; a request starts only from its arrival
    round. ``state`` is modified (pass a copy)."""
    req = state.req
    rem = sorted(
        (i for i in idx if state.starts[i] < 0), key=lambda j: (req[j].output_tokens, req[j].arrival, j)
    )
    while rem:
        state.fill([i for i in rem if req[i].arrival <= t], t, stop=True)
        rem = [i for i in rem if state.starts[i] < 0]
        t += 1
    return sum(state.starts[i] + req[i].output_tokens - req[i].arrival for i in idx)


def extend(state: RoundState, phantoms: tuple[KVRequest, ...]) -> RoundState:
    """Copy of ``state`` whose request list also holds ``phantoms`` (not started)."""
    ext = RoundState(tuple(state.req) + phantoms, state.mem)
    ext._ensure(len(state.load))
    ext.load[: len(state.load)] = state.load
    ext.starts = list(state.starts) + [-1] * len(phantoms)
    return ext


def rollout_step(state: RoundState, known: list[int], waiting: list[int], t: int) -> RoundState:
    """The state after round t's starts under the one-step rollout of MC-SF (`admission_online` ``rollout``):
    each fitting waiting request as the first start (then MC-SF fill) and "start nothing", each finished
    with MC-SF over ``known``; the first trial of least total latency. ``state`` is not modified."""
    req = state.req
    order = sorted(waiting, key=lambda j: (req[j].output_tokens, req[j].arrival, j))
    best, best_cost = None, None
    for first in [None] + [i for i in order if state.fits(i, t)]:
        trial = state.copy()
        if first is not None:
            trial.start(first, t)
            trial.fill(order, t, stop=True)
        cost = mcsf_finish(trial.copy(), known, t + 1)
        if best_cost is None or cost < best_cost:
            best, best_cost = trial, cost
    return best
