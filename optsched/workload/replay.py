"""Real closed-loop sessions replayed at drawn start times: an open-loop session-arrival process over
recorded agent sessions (e.g. the LMCache mini-swe-agent / tau-bench logs).

A recorded agent trace often holds too few sessions, run one after another, to load a cluster: the 44
LMCache agent sessions were recorded with at most one active at a time. `replay_sessions` keeps every call
as recorded and draws only WHEN each session starts:

- **Calls are the real ones.** Replay ``r`` of real session ``s`` holds the calls of ``s`` in order with the
  same ``input_tokens``, ``new_tokens``, ``output_tokens``, ``lane``, ``turn``, ``think_time_s``,
  ``wait_s``, ``tool``, ``model`` and parent structure (tested). Ids: session ``f"{s}~{r}"``, call
  ``f"{call_id}~{r}"``; a trace ``arrival_s`` moves with its session start.
- **Its own KV identity.** A block hash that occurs in ONE real session of the source is that session's own
  context: replay ``r >= 1`` gets a fresh hash for it (``blake2b`` of the hash and ``r``: deterministic), so
  two replays of one session share no private context. A hash that occurs in two or more real sessions
  (a shared system prompt) is kept: replays share exactly what the real sessions share. Replay 0 keeps
  every hash. Chained block hashes make the shared blocks a prefix, so each call's hashes stay a prefix chain.
- **Which session, when.** The order of replays is a concatenation of random permutations of the real
  sessions (each real session is replayed ``floor(n / S)`` or ``ceil(n / S)`` times); start times form a
  Poisson process of ``rate_per_s`` sessions per second from 0 (exponential gaps). `optsched compare`
  divides every start by its load, so ``--loads`` scales the session-arrival rate.

Randomness: one ``numpy.random.Generator`` with named child streams ``order`` and ``starts``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections import Counter

import numpy as np

from optsched.workload.calibrate import named_streams
from optsched.workload.types import Session, Workload

__all__ = ["replay_sessions", "shared_hashes"]


def shared_hashes(wl: Workload) -> frozenset[int]:
    """Block hashes that occur in two or more sessions of ``wl`` (a prompt the sessions share)."""
    owners = Counter(h for s in wl.sessions for h in {h for c in s.calls for h in c.block_hashes})
    return frozenset(h for h, n in owners.items() if n > 1)


def _fresh(h: int, r: int) -> int:
    """Hash ``h`` of replay ``r``: 63 bits of blake2b(h, r), never the hash itself."""
    d = hashlib.blake2b(f"{h}:{r}".encode(), digest_size=8).digest()
    return int.from_bytes(d, "big") >> 1


def _replay(s: Session, r: int, start_s: float, shared: frozenset[int]) -> Session:
    sid = f"{s.session_id}~{r}"
    calls = []
    for c in s.calls:
        hashes = c.block_hashes if r == 0 else tuple(h if h in shared else _fresh(h, r) for h in c.block_hashes)
        arrival = None if c.arrival_s is None else max(0.0, start_s + (c.arrival_s - s.start_s))
        calls.append(dataclasses.replace(c, call_id=f"{c.call_id}~{r}", session_id=sid,
                                         parents=tuple(f"{p}~{r}" for p in c.parents), block_hashes=hashes,
                                         arrival_s=arrival))
    return Session(sid, tuple(calls), start_s=start_s)


def replay_sessions(source: Workload, n_sessions: int, rng: np.random.Generator, rate_per_s: float = 1.0) -> Workload:
    """``n_sessions`` replays of ``source``'s real sessions at Poisson start times (module docstring).

    Args:
        source: a closed-loop workload (its calls are released by their parents, so only session starts
            carry time); sessions in any order.
        n_sessions: replays to draw (>= 1).
        rng: the generator; streams ``order`` (which session) and ``starts`` (exponential gaps).
        rate_per_s: session arrivals per second (> 0).

    Raises:
        ValueError: an open-loop or empty source, ``n_sessions`` < 1, a non-positive or non-finite rate.
    """
    if not (isinstance(n_sessions, int) and not isinstance(n_sessions, bool) and n_sessions >= 1):
        raise ValueError(f"n_sessions must be an int >= 1, got {n_sessions!r}")
    if not (isinstance(rate_per_s, (int, float)) and math.isfinite(rate_per_s) and rate_per_s > 0):
        raise ValueError(f"rate must be a finite number > 0 (sessions/s), got {rate_per_s!r}")
    if not source.closed_loop:
        raise ValueError(f"{source.name}: replay needs closed-loop sessions (calls released by their parents); "
                         "an open-loop trace's calls carry their own arrival times")
    if not source.sessions:
        raise ValueError(f"{source.name}: no sessions to replay")
    st = named_streams(rng, "order", "starts")
    real = sorted(source.sessions, key=lambda s: s.session_id)
    rounds = -(-n_sessions // len(real))
    order = np.concatenate([st["order"].permutation(len(real)) for _ in range(rounds)])[:n_sessions]
    gaps = st["starts"].exponential(1.0 / rate_per_s, size=n_sessions - 1)
    starts = np.concatenate([[0.0], np.cumsum(gaps)])
    shared = shared_hashes(source)
    count: Counter[int] = Counter()
    sessions = []
    for i, t in zip(order.tolist(), starts.tolist(), strict=True):
        sessions.append(_replay(real[i], count[i], float(t), shared))
        count[i] += 1
    return Workload(f"replay-{source.name}-{n_sessions}", tuple(sessions), block_size=source.block_size,
                    closed_loop=True, source=f"replay:{source.source}")
