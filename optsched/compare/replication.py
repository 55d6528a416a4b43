"""One replication of a workload: the seed's workload, its arrival stream, the context rule, the split, the load.

The work is fixed per replication; load changes only WHEN it arrives (never what arrives):

- ``workload``: a trace keeps its content (it is the data). A generator spec (``agentx:...``) is run with
  the spec's own ``seed`` when it names one (honoured: every replication then holds the same sessions and
  differs only in its arrival stream), else with an integer drawn from the replication's ``workload``
  stream. ``sessions=K`` is always K: a higher load never adds sessions.
- ``split`` (traces only; ``train_fraction`` f > 0): sessions sorted by (start time, id); the first
  ceil(f x S) form the TRAINING part that optimized policies are derived on (`training_workload`), the rest
  the EVALUATION part that every policy is scored on. The two parts share no call (tested). A generator's
  training workload is a different draw: generator seed from stream ``train`` of the base seed (or, for a
  spec with its own seed, ``seed + 1``), never an evaluated one. A ``replay:src=...`` spec replays real
  sessions, so the draw alone would not keep the parts apart: its real sessions are split first
  (`split_real_sessions`, interleaved, so that every recorded batch of the source is in both parts; f = 0
  keeps them all in both) and the training draw replays only the training sessions, every replication only
  the others (tested).
- ``arrivals`` (stream of the replication seed): closed-loop sessions that all start at one instant get
  staggered starts first (exponential gaps whose mean is the mean uncontended session span,
  `optsched.workload.timeline`, so about one session is active at load 1); then the gaps between
  consecutive arrivals (open loop: call ``arrival_s``; closed loop: session ``start_s``) are permuted at
  random: the first arrival, the set of gaps, the mean rate and the span are kept, which calls arrive in
  bursts changes. Think times (the loop inside a session) are untouched.
- ``policy``: the seed of randomized routers (`optsched.compare.jobs.make_router`).

Load (the one knob): the arrival-rate multiplier ``load``: every arrival and session start time is divided
by ``load`` (`scale_arrivals`); the set of sessions and calls is identical at every load (tested).

Seeds: replication seed ``s`` owns named streams ``SeedSequence(s, spawn_key=(key(name),))`` (key = first 4
bytes of sha256(name): `optsched.replicate.stream`).

``max_calls_per_session`` > 0 keeps each session's first calls (a prefix of a session is a valid DAG);
``max_calls`` > 0 keeps the first calls of a trace (generators: size them with ``sessions=``).

Context rule (counted, never silent): `optsched.workload.context.cap_context`: each session is cut before its
first call whose input + output tokens exceed the model's ``max_context_tokens``; the counts are returned.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy as np

from optsched.replicate import stream
from optsched.workload.context import cap_context

__all__ = ["build_replication", "cap_context", "per_session", "permute_arrivals", "scale_arrivals", "split_real_sessions",
           "split_sessions", "stream", "training_workload", "trim_calls"]


def _is_replay(source: str) -> bool:
    from optsched.workload.spec import is_generator_spec, parse_generator_spec

    return is_generator_spec(source) and parse_generator_spec(source)[0] == "replay"


def _generator_seed(source: str, seed: int, part: str) -> int | None:
    """The generator seed of ``source`` for replication ``seed`` (``part`` "eval") or for the training draw
    of base seed ``seed`` (``part`` "train"); None for a trace (module docstring)."""
    from optsched.workload.spec import is_generator_spec, parse_generator_spec

    if not is_generator_spec(source):
        return None
    _, kw = parse_generator_spec(source)
    if "seed" in kw:  # honoured: the spec names its workload; training takes the next seed
        return int(kw["seed"]) + (1 if part == "train" else 0)
    return int(stream(seed, "workload" if part == "eval" else "train").integers(2**31))


def split_real_sessions(wl: Any, train_fraction: float) -> tuple[Any, Any]:
    """(training part, evaluation part) of the real sessions a replay spec replays: sessions sorted by
    (start time, id), session i is a training one when floor((i + 1) f) > floor(i f), so the training
    sessions are spread over the whole recording. ``train_fraction`` 0 gives (wl, wl).

    Raises:
        ValueError: a fraction outside [0, 1), or either part empty.
    """
    if not (isinstance(train_fraction, (int, float)) and 0.0 <= train_fraction < 1.0):
        raise ValueError(f"train_fraction must be in [0, 1), got {train_fraction!r}")
    if train_fraction == 0.0:
        return wl, wl
    order = sorted(wl.sessions, key=lambda s: (s.start_s, s.session_id))
    train_ids = {s.session_id for i, s in enumerate(order)
                 if math.floor((i + 1) * train_fraction) > math.floor(i * train_fraction)}
    if not train_ids or len(train_ids) == len(order):
        raise ValueError(f"{wl.name}: {len(order)} real sessions cannot be split {train_fraction:g} / "
                         f"{1 - train_fraction:g} into a training and an evaluation part (each needs a session)")
    return (dataclasses.replace(wl, sessions=tuple(s for s in wl.sessions if s.session_id in train_ids)),
            dataclasses.replace(wl, sessions=tuple(s for s in wl.sessions if s.session_id not in train_ids)))


def _replay(kw: dict, gen_seed: int, part: str, train_fraction: float) -> Any:
    """A replay spec's draw (parsed keys ``kw``) replaying only the ``part``'s real sessions."""
    from optsched.workload.spec import generate, replay_source

    train, evaluation = split_real_sessions(replay_source(kw["src"]), train_fraction)
    return generate("replay", {**kw, "seed": gen_seed}, real=train if part == "train" else evaluation)


@functools.lru_cache(maxsize=16)
def _base(source: str, gen_seed: int | None, part: str = "eval", train_fraction: float = 0.0) -> Any:
    from optsched.workload.spec import parse_generator_spec, workload_from_spec

    if gen_seed is None:
        return workload_from_spec(source)
    kind, kw = parse_generator_spec(source)
    if kind == "replay":
        return _replay(kw, gen_seed, part, train_fraction)
    kw["seed"] = gen_seed
    spec = f"{kind}:" + ",".join(f"{k}={v}" for k, v in kw.items())
    try:
        return workload_from_spec(spec)
    except ValueError as exc:  # name the spec the user wrote, not the one with the replication's seed added
        raise ValueError(str(exc).replace(repr(spec), f"{source!r} (generator seed {gen_seed})")) from None


def per_session(wl: Any, max_calls_per_session: int) -> Any:
    """Each session cut to its first ``max_calls_per_session`` calls (0 = unchanged)."""
    if max_calls_per_session <= 0:
        return wl
    from optsched.workload import Session

    return dataclasses.replace(wl, sessions=tuple(
        s if len(s.calls) <= max_calls_per_session
        else Session(s.session_id, tuple(s.calls[:max_calls_per_session]), start_s=s.start_s) for s in wl.sessions))


def scale_arrivals(wl: Any, load: float) -> Any:
    """``wl`` at ``load`` x its arrival rate: every call ``arrival_s`` and session ``start_s`` divided by
    ``load``; think times, tokens and the set of calls unchanged. Raises ValueError for load <= 0."""
    if not (isinstance(load, (int, float)) and load > 0 and math.isfinite(load)):
        raise ValueError(f"load must be a finite number > 0, got {load!r}")
    if load == 1.0:
        return wl
    from optsched.workload import Session

    sessions = []
    for s in wl.sessions:
        calls = tuple(c if c.arrival_s is None else dataclasses.replace(c, arrival_s=c.arrival_s / load)
                      for c in s.calls)
        sessions.append(Session(s.session_id, calls, start_s=s.start_s / load))
    return dataclasses.replace(wl, sessions=tuple(sessions))


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


def split_sessions(wl: Any, train_fraction: float) -> tuple[Any, Any]:
    """(training part, evaluation part) of ``wl`` (module docstring, ``split``); ``train_fraction`` 0 gives
    (None, wl). Raises ValueError when either part would be empty or the fraction is outside [0, 1)."""
    if not (isinstance(train_fraction, (int, float)) and 0.0 <= train_fraction < 1.0):
        raise ValueError(f"train_fraction must be in [0, 1), got {train_fraction!r}")
    if train_fraction == 0.0:
        return None, wl
    order = sorted(wl.sessions, key=lambda s: (s.start_s, s.session_id))
    k = math.ceil(train_fraction * len(order))
    if k < 1 or k >= len(order):
        raise ValueError(f"{wl.name}: {len(order)} sessions cannot be split {train_fraction:g} / "
                         f"{1 - train_fraction:g} into a training and an evaluation part (each needs a session: keep more "
                         "calls, --max-calls or sessions=, or compare heuristics only with --train-fraction 0)")
    train_ids = {s.session_id for s in order[:k]}
    return (dataclasses.replace(wl, sessions=tuple(s for s in wl.sessions if s.session_id in train_ids)),
            dataclasses.replace(wl, sessions=tuple(s for s in wl.sessions if s.session_id not in train_ids)))


def _permuted(times: list[float], rng: np.random.Generator) -> list[float]:
    order = sorted(range(len(times)), key=lambda i: (times[i], i))
    t = [times[i] for i in order]
    gaps = np.diff(np.asarray(t, dtype=float))
    new = np.concatenate([[t[0]], t[0] + np.cumsum(gaps[rng.permutation(len(gaps))])]) if t else np.zeros(0)
    out = [0.0] * len(times)
    for j, i in enumerate(order):
        out[i] = float(new[j])
    return out


def _stagger(wl: Any, rng: np.random.Generator) -> Any:
    """Closed-loop sessions that all start at one instant get exponential start gaps of mean = the mean
    session span with no contention (`optsched.workload.timeline`, on the compare default H200 / Llama-3-70B
    TP4 cost model), so that about one session is active at load 1 (module docstring)."""
    if not wl.closed_loop or len(wl.sessions) < 2 or len({s.start_s for s in wl.sessions}) > 1:
        return wl
    from optsched.cost import CostModel
    from optsched.workload import Session
    from optsched.workload.timeline import uncontended_timeline

    times = uncontended_timeline(wl, CostModel.from_names("h200-sxm", "llama-3-70b", tp=4))
    spans = []
    for s in wl.sessions:
        ts = [times[c.call_id] for c in s.calls if c.call_id in times]
        spans.append(max(b for _, b in ts) - min(a for a, _ in ts) if ts else 0.0)
    mean_gap = max(float(np.mean(spans)), 1e-3)
    t0 = wl.sessions[0].start_s
    starts = t0 + np.concatenate([[0.0], np.cumsum(rng.exponential(mean_gap, size=len(wl.sessions) - 1))])
    return dataclasses.replace(wl, sessions=tuple(Session(s.session_id, s.calls, start_s=float(t))
                                                  for s, t in zip(wl.sessions, starts)))


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


def _prepared(source: str, gen_seed: int | None, max_context_tokens: int, max_calls: int,
              max_calls_per_session: int, part: str = "eval", train_fraction: float = 0.0) -> tuple[Any, dict[str, int]]:
    if gen_seed is None or not _is_replay(source):  # one cache entry per trace / draw, whichever part asks
        part, train_fraction = "eval", 0.0
    wl = _base(source, gen_seed, part, float(train_fraction))
    wl = per_session(wl if gen_seed is not None else trim_calls(wl, max_calls), max_calls_per_session)
    return cap_context(wl, max_context_tokens)


def build_replication(source: str, seed: int, load: float, max_context_tokens: int, max_calls: int = 0,
                      max_calls_per_session: int = 0, train_fraction: float = 0.0) -> tuple[Any, dict[str, int]]:
    """(evaluation workload of replication ``seed`` at ``load``, context-cut counts). Deterministic in its
    arguments; the calls are the same at every ``load`` (module docstring).

    Raises:
        ValueError / FileNotFoundError: a bad source (as ``workload_from_spec``), load <= 0, a split that
            leaves a part empty.
    """
    if not (isinstance(load, (int, float)) and load > 0):
        raise ValueError(f"load must be > 0, got {load!r}")
    gen_seed = _generator_seed(source, seed, "eval")
    wl, cut = _prepared(source, gen_seed, max_context_tokens, max_calls, max_calls_per_session, "eval", train_fraction)
    if gen_seed is None:
        wl = split_sessions(wl, train_fraction)[1]
    rng = stream(seed, "arrivals")
    wl = permute_arrivals(_stagger(wl, rng), rng)
    return scale_arrivals(wl, float(load)), cut


def training_workload(source: str, base_seed: int, max_context_tokens: int, max_calls: int = 0,
                      max_calls_per_session: int = 0, train_fraction: float = 0.0) -> tuple[Any, dict[str, Any]]:
    """(the workload optimized policies are derived on, a record of how it was kept apart from the evaluated
    workloads) for a comparison of base seed ``base_seed`` (module docstring, ``split``).

    Raises:
        ValueError: a trace with ``train_fraction`` 0 (the derivation would see every evaluated call), or as
            `build_replication`.
    """
    gen_seed = _generator_seed(source, base_seed, "train")
    wl, _ = _prepared(source, gen_seed, max_context_tokens, max_calls, max_calls_per_session, "train", train_fraction)
    if gen_seed is None:
        if not train_fraction > 0:
            raise ValueError(f"{source}: deriving optimized policies on a trace needs a training split "
                             "(train_fraction > 0): with none, the derivation would see every evaluated call")
        train, evaluation = split_sessions(wl, train_fraction)
        rec = {"method": "trace split by session start", "train_fraction": train_fraction,
               "train_sessions": len(train.sessions), "train_calls": train.num_calls,
               "eval_sessions": len(evaluation.sessions), "eval_calls": evaluation.num_calls}
        wl = train
    else:
        rec = {"method": "generator draw never evaluated", "train_generator_seed": gen_seed,
               "eval_generator_seed": ("the spec's seed" if "seed=" in source
                                       else "drawn per replication from stream 'workload'")}
        if _is_replay(source):
            from optsched.workload.spec import parse_generator_spec, replay_source

            real = replay_source(parse_generator_spec(source)[1]["src"])
            tr, ev = split_real_sessions(real, train_fraction)
            rec.update(method="replay of real sessions that no evaluated replication replays" if train_fraction
                       else "replay draw never evaluated (train_fraction 0: the same real sessions in both)",
                       train_fraction=train_fraction, train_real_sessions=sorted(s.session_id for s in tr.sessions),
                       eval_real_sessions=len(ev.sessions), train_calls=wl.num_calls)
    rng = stream(base_seed, "train")
    return permute_arrivals(_stagger(wl, rng), rng), rec
