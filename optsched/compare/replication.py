"""One replication of a workload: the seed's workload stream, its arrival stream, the context rule, the load.

Seeds. Replication seed ``s`` owns named streams ``SeedSequence(s, spawn_key=(key(name),))`` (key =
first 4 bytes of sha256(name): `optsched.replicate.stream`):

- ``workload``: a generator spec (``agentx:...``) is run with ``seed`` = an integer drawn from this
  stream (the spec's own ``seed`` key is replaced). A trace keeps its content (it is the data).
- ``arrivals``: the gaps between consecutive arrivals (open loop: call ``arrival_s`` in time order;
  closed loop: session ``start_s`` in time order) are permuted at random. The first arrival, the order
  of calls/sessions, the set of gaps and so the mean rate and the span are kept; which calls arrive in
  bursts changes. Closed-loop think times (the loop inside a session) are untouched.
- ``policy``: the seed of randomized routers (`adapter.build_baseline`).

Load (the one knob): the arrival-rate multiplier ``load``.

- Generator specs with ``sessions=K`` (agentx, copilot): an open population — ``round(K x load)``
  sessions are generated and their start times divided by ``load``, so sessions arrive ``load`` times as
  often over the same window (closed-loop sessions last long: compressing the starts of K sessions alone
  cannot load a cluster past K concurrent sessions).
- Traces (and other generators): arrival and session start times divided by ``load``
  (`optsched.replicate.scale_load`; closed-loop sessions that all start together get ``round(K x load)`` concurrent
  session copies instead).

``max_calls_per_session`` > 0 keeps each session's first calls (a prefix of a session is a valid DAG);
``max_calls`` > 0 keeps the first calls of a trace (ignored for generators: size them with
``sessions=``).

Context rule (counted, never silent): `optsched.workload.context.cap_context`, the one rule every config
and generator uses: each session is cut before its first call whose input + output tokens exceed the
model's ``max_context_tokens`` (a prefix of a session is a valid session DAG); the number of calls and
sessions cut is returned.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from optsched.replicate import stream
from optsched.workload.context import cap_context

__all__ = ["build_replication", "cap_context", "per_session", "permute_arrivals", "stream", "trim_calls"]


def _population_spec(source: str, load: float) -> tuple[str, dict] | None:
    """(kind, keys) when ``source`` is a generator spec with a session count (population load knob)."""
    from optsched.workload.spec import GENERATOR_KEYS, is_generator_spec, parse_generator_spec

    if not is_generator_spec(source):
        return None
    kind, kw = parse_generator_spec(source)
    if "sessions" not in GENERATOR_KEYS[kind]:
        return None
    base = kw.get("sessions", 50)
    if not (isinstance(base, int) and base >= 1):
        raise ValueError(f"{source}: sessions must be an int >= 1 (the count at load 1), got {base!r}")
    kw["sessions"] = max(1, round(base * load))
    return kind, kw


@functools.lru_cache(maxsize=16)
def _base(source: str, seed: int, load: float) -> Any:
    from optsched.workload.spec import is_generator_spec, parse_generator_spec, workload_from_spec

    pop = _population_spec(source, load)
    if pop is not None:
        kind, kw = pop
    elif is_generator_spec(source):
        kind, kw = parse_generator_spec(source)
    else:
        return workload_from_spec(source)
    kw["seed"] = int(stream(seed, "workload").integers(2**31))
    return workload_from_spec(f"{kind}:" + ",".join(f"{k}={v}" for k, v in kw.items()))


def per_session(wl: Any, max_calls_per_session: int) -> Any:
    """Each session cut to its first ``max_calls_per_session`` calls (0 = unchanged)."""
    if max_calls_per_session <= 0:
        return wl
    from optsched.workload import Session

    return dataclasses.replace(wl, sessions=tuple(
        s if len(s.calls) <= max_calls_per_session
        else Session(s.session_id, tuple(s.calls[:max_calls_per_session]), start_s=s.start_s) for s in wl.sessions))


def _compress(wl: Any, load: float) -> Any:
    from optsched.workload import Session

    return dataclasses.replace(wl, sessions=tuple(Session(s.session_id, s.calls, start_s=s.start_s / load)
                                                  for s in wl.sessions))


def trim_calls(wl: Any, max_calls: int) -> Any:
    """The first sessions of ``wl`` up to ``max_calls`` calls (the last one cut to a prefix); 0 = all."""
    if max_calls <= 0 or wl.num_calls <= max_calls:
        return wl
    from optsched.workload import Session

    kept, left = [], max_calls
    for s in wl.sessions:
        if left <= 0:
            break
        calls = s.calls[:left]
        kept.append(s if len(calls) == len(s.calls) else Session(s.session_id, tuple(calls), start_s=s.start_s))
        left -= len(calls)
    return dataclasses.replace(wl, sessions=tuple(kept))


def _permuted(times: list[float], rng: np.random.Generator) -> list[float]:
    order = sorted(range(len(times)), key=lambda i: (times[i], i))
    t = [times[i] for i in order]
    gaps = np.diff(np.asarray(t, dtype=float))
    new = np.concatenate([[t[0]], t[0] + np.cumsum(gaps[rng.permutation(len(gaps))])]) if t else np.zeros(0)
    out = [0.0] * len(times)
    for j, i in enumerate(order):
        out[i] = float(new[j])
    return out


def permute_arrivals(wl: Any, rng: np.random.Generator) -> Any:
    """``wl`` with its arrival gaps permuted (module docstring); same workload when it has < 3 arrivals."""
    from optsched.workload import Session

    if wl.closed_loop:
        starts = _permuted([s.start_s for s in wl.sessions], rng)
        return dataclasses.replace(wl, sessions=tuple(Session(s.session_id, s.calls, start_s=t)
                                                      for s, t in zip(wl.sessions, starts)))
    flat = [(si, ci) for si, s in enumerate(wl.sessions) for ci, c in enumerate(s.calls) if c.arrival_s is not None]
    if not flat:
        return wl
    new = _permuted([wl.sessions[si].calls[ci].arrival_s for si, ci in flat], rng)
    by_sess: dict[int, dict[int, float]] = {}
    for (si, ci), t in zip(flat, new):
        by_sess.setdefault(si, {})[ci] = t
    sessions = []
    for si, s in enumerate(wl.sessions):
        upd = by_sess.get(si)
        if not upd:
            sessions.append(s)
            continue
        calls = tuple(dataclasses.replace(c, arrival_s=upd[ci]) if ci in upd else c for ci, c in enumerate(s.calls))
        start = min([s.start_s, *upd.values()]) if s.calls[0].arrival_s is None else min(upd.values())
        sessions.append(Session(s.session_id, calls, start_s=start))
    return dataclasses.replace(wl, sessions=tuple(sessions))


def build_replication(source: str, seed: int, load: float, max_context_tokens: int, max_calls: int = 0,
                      max_calls_per_session: int = 0) -> tuple[Any, dict[str, int]]:
    """(workload of replication ``seed`` at ``load``, context-cut counts). Deterministic in its arguments.

    Raises:
        ValueError / FileNotFoundError: a bad source (as ``workload_from_spec``), load <= 0.
    """
    from optsched.replicate import scale_load

    if not load > 0:
        raise ValueError(f"load must be > 0, got {load!r}")
    pop = _population_spec(source, float(load)) is not None
    wl = _base(source, seed, float(load) if pop else 1.0)
    wl = per_session(wl if pop else trim_calls(wl, max_calls), max_calls_per_session)
    wl, cut = cap_context(wl, max_context_tokens)
    wl = permute_arrivals(wl, stream(seed, "arrivals"))
    return (_compress(wl, float(load)) if pop else scale_load(wl, float(load))), cut
