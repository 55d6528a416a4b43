"""Workload specs for the CLI and scripts: a trace path, or a generator spec ``kind:key=value,...``.

Generator specs (defaults in brackets):

- ``agentx:sessions=N[50],seed=S[0],variant=full|256k|full-iid-gaps[full]``
- ``copilot:sessions=N[50],seed=S[0],model_switch_prob=P[0.1],keep_fraction=F[1.0]``
- ``chat:calls=N[1000],seed=S[0],rate=R[10.0]`` (requests/s)
- ``hotprompt:sessions=N[32],seed=S[0],calls=K[8],stagger=S[2.0]`` (hot shared system prompt, session
  starts staggered by S seconds; `optsched.workload.gen_hotprompt`)
- ``replay:src=PATH,sessions=N[64],seed=S[0],rate=R[1.0]`` (the real closed-loop sessions of the trace at
  PATH, e.g. an LMCache agent folder, replayed N times in all at Poisson start times of R sessions/s; the
  calls are the recorded ones, only the starts are drawn; `optsched.workload.replay`). PATH must hold no
  comma. Under `optsched compare` the real sessions are split (``--train-fraction``) so that the optimized
  policies are derived on replays of real sessions that no evaluated replication replays
  (`optsched.compare.replication`).

Every generator also takes ``max_context=T`` (tokens; default none): each session ends before its first call
whose input + output tokens exceed T (`optsched.workload.context.cap_context`; counted in
``workload_stats``' ``context_cut``). Set it to the model's ``max_context_tokens``: the simulator rejects
longer calls.

Every generator gets ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np

from optsched.workload.types import Workload

__all__ = ["GENERATOR_KEYS", "generate", "is_generator_spec", "parse_generator_spec", "replay_source", "workload_from_spec"]

GENERATOR_KEYS: dict[str, dict[str, type]] = {
    "agentx": {"sessions": int, "seed": int, "variant": str},
    "copilot": {"sessions": int, "seed": int, "model_switch_prob": float, "keep_fraction": float},
    "chat": {"calls": int, "seed": int, "rate": float},
    "hotprompt": {"sessions": int, "seed": int, "calls": int, "stagger": float},
    "replay": {"src": str, "sessions": int, "seed": int, "rate": float},
}
_SPEC = re.compile(r"^(agentx|copilot|chat|hotprompt|replay)(?::(.*))?$")


def is_generator_spec(text: str) -> bool:
    """True when ``text`` names a generator (``agentx``, ``copilot``, ``chat``, ``hotprompt``, ``replay``,
    optionally ``:k=v,...``)."""
    return _SPEC.match(text) is not None


def parse_generator_spec(text: str) -> tuple[str, dict]:
    """``"agentx:sessions=50,seed=0"`` -> ``("agentx", {"sessions": 50, "seed": 0})``.

    Raises:
        ValueError: unknown generator or key, a value of the wrong type, a negative seed (names what was
            expected).
    """
    m = _SPEC.match(text)
    if m is None:
        raise ValueError(f"{text!r}: expected a trace path or a generator spec like 'agentx:sessions=50,seed=0'")
    kind, rest = m.group(1), m.group(2) or ""
    keys = {**GENERATOR_KEYS[kind], "max_context": int}
    out: dict = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        k, sep, v = (x.strip() for x in item.partition("="))
        if not sep or k not in keys:
            raise ValueError(f"{text!r}: expected key=value with key in {', '.join(keys)}, got {item!r}")
        if k in out:
            raise ValueError(f"{text!r}: key {k!r} given twice")
        try:
            out[k] = keys[k](v)
        except ValueError:
            raise ValueError(f"{text!r}: {k} expects {keys[k].__name__}, got {v!r}") from None
    if "max_context" in out and out["max_context"] < 2:
        raise ValueError(f"{text!r}: max_context expects an integer >= 2 (tokens), got {out['max_context']}")
    if out.get("seed", 0) < 0:
        raise ValueError(f"{text!r}: seed expects an integer >= 0, got {out['seed']}")
    if kind == "replay" and not out.get("src"):
        raise ValueError(f"{text!r}: replay expects src=PATH (a trace of closed-loop sessions)")
    _check_size(text, kind, out)
    return kind, out


def _check_size(text: str, kind: str, kw: dict) -> None:
    """Generator sizes within the caps of `optsched.workload.limits` (a typo such as sessions=1000000000 would
    otherwise run for hours with no output)."""
    from optsched.workload.limits import MAX_GENERATED_CALLS, MAX_GENERATED_SESSIONS

    for key, cap in (("sessions", MAX_GENERATED_SESSIONS), ("calls", MAX_GENERATED_CALLS)):
        if key in kw and kw[key] > cap:  # (below 1: the generator's own check names it)
            raise ValueError(f"{text!r}: {key} expects at most {cap:,} (the generator cap, "
                             f"optsched.workload.limits), got {kw[key]:,}")
    if kind == "hotprompt" and kw.get("sessions", 32) * kw.get("calls", 8) > MAX_GENERATED_CALLS:
        raise ValueError(f"{text!r}: sessions x calls expects at most {MAX_GENERATED_CALLS:,} calls (the generator "
                         f"cap, optsched.workload.limits), got {kw.get('sessions', 32) * kw.get('calls', 8):,}")


def workload_from_spec(text: str, block_size: int | None = None) -> Workload:
    """Load a trace (any format :func:`~optsched.workload.dispatch.load_any` knows; ``block_size`` is passed
    on: tokens per hash id for formats that do not record it) or run a generator spec.

    Raises:
        FileNotFoundError: neither an existing path nor a generator spec.
        ValueError: an empty ``text``, a malformed spec or bad trace (TraceFormatError), a ``block_size``
            with a generator spec (generators choose their own).
    """
    if not text.strip():  # Path("") is the current directory: never scan it by accident
        raise ValueError("empty source: expected a trace path or a generator spec like 'agentx:sessions=50,seed=0'")
    if Path(text).exists():
        from optsched.workload.dispatch import load_any

        return load_any(text, block_size=block_size)
    if block_size is not None and is_generator_spec(text):
        raise ValueError(f"{text!r}: --block-size applies to trace files; a generator chooses its own block size")
    if not is_generator_spec(text):
        raise FileNotFoundError(f"{text}: no such file, and not a generator spec "
                                "(agentx|copilot|chat|hotprompt|replay[:k=v,...])")
    kind, kw = parse_generator_spec(text)
    try:
        return generate(kind, kw)
    except ValueError as exc:  # a generator's parameter check: say which spec it came from
        raise ValueError(f"{text!r}: {exc}") from None


def generate(kind: str, kw: dict, real: Workload | None = None) -> Workload:
    """The workload of generator ``kind`` from its parsed keys ``kw`` (`parse_generator_spec`; consumed), with
    ``max_context`` applied. ``real``: for ``replay``, the real sessions to replay in place of the whole trace at
    ``src`` (a training or evaluation part of it, `optsched.compare.replication`). Raises what the generator raises."""
    cap = kw.pop("max_context", 0)
    wl = _run_generator(kind, kw, real)
    if cap:
        from optsched.workload.context import cap_context

        wl, _ = cap_context(wl, cap)
    return wl


@functools.lru_cache(maxsize=4)
def replay_source(src: str) -> Workload:
    """The real sessions a ``replay`` spec replays: the trace at ``src`` (any format
    :func:`~optsched.workload.dispatch.load_any` knows), loaded once per path. Raises FileNotFoundError for
    a missing path, and what the loader raises."""
    if not Path(src).exists():
        raise FileNotFoundError(f"{src}: no such file or directory (replay src=)")
    from optsched.workload.dispatch import load_any

    return load_any(src)


def _run_generator(kind: str, kw: dict, real: Workload | None = None) -> Workload:
    rng = np.random.default_rng(kw.pop("seed", 0))
    if kind == "replay":
        from optsched.workload.replay import replay_sessions

        src = kw.pop("src")
        return replay_sessions(replay_source(src) if real is None else real, kw.pop("sessions", 64), rng,
                               rate_per_s=kw.pop("rate", 1.0))
    if kind == "agentx":
        from optsched.workload.gen_agentx import generate_agentx

        return generate_agentx(kw.pop("sessions", 50), rng, variant=kw.pop("variant", "full"))  # cap: _generate
    if kind == "copilot":
        from optsched.workload.gen_copilot import generate_copilot

        return generate_copilot(kw.pop("sessions", 50), rng, **kw)
    if kind == "hotprompt":
        from optsched.workload.gen_hotprompt import generate_hotprompt

        return generate_hotprompt(kw.pop("sessions", 32), rng, calls_per_session=kw.pop("calls", 8),
                                  stagger_s=kw.pop("stagger", 2.0))
    from optsched.workload.gen_chat import generate_chat

    return generate_chat(kw.pop("calls", 1000), rng, rate_per_s=kw.pop("rate", 10.0))
