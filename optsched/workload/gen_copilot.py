"""Copilot-like agent sessions: user turns of tool-calling loops, deep-loop retry cascades, model switches.

Published targets (DESIGN.md, "Workload"): median 4 calls a turn; 9.1% of turns are deep loops where a
failed tool triggers a retry cascade of up to 36 calls; model switches at turn boundaries.

Construction:

- Turns per session: ``1 + Poisson(turns_mean - 1)`` (assumption). Exactly ``round(0.091 * T)`` of the
  ``T`` turns are deep loops (stratified): their calls are ``cascade_min..36`` (uniform integers); the
  calls after the first in a deep loop are retries of the failed tool (``tool="retry"``).
- Ordinary turns draw their call count from ``NORMAL_TURN_PMF`` (1..8 calls; an assumption chosen so that
  the overall median is 4: P(normal <= 3) = 0.45 and P(normal <= 4) = 0.65, so the overall CDF is
  0.909 * 0.45 = 0.41 < 0.5 at 3 and 0.909 * 0.65 = 0.59 >= 0.5 at 4 — deep loops all exceed 4).
- Context: a global system prompt (``system_prompt_tokens``), then every call appends its output plus a
  tool result (lognormal, median ``tool_result_median_tokens``), every turn starts with a user message
  (lognormal, median ``user_message_median_tokens``). Lengths are assumptions (not published).
- Turn boundary: with probability ``keep_fraction`` < 1 only the first ``floor(keep_fraction * L)``
  tokens of the context ``L`` survive (history truncation/summarization), so later blocks are fresh; with
  probability ``model_switch_prob`` the new turn runs on another model from ``models`` and all its
  block hashes are salted by the model id (``prefix_model.salt_hashes``): no KV reuse across models.
- Think times: user think time between turns (lognormal median ``user_think_median_s``), tool time
  within a turn (median ``tool_median_s``), failed-tool retries (median ``retry_median_s``); sigma 1.0
  (assumptions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optsched.workload.calibrate import named_streams, stratified_count
from optsched.workload.prefix_model import HashSource, global_prompt_hashes, salt_hashes
from optsched.workload.types import Call, Session, Workload

__all__ = ["NORMAL_TURN_PMF", "CopilotParams", "generate_copilot"]

NORMAL_TURN_PMF = (0.10, 0.15, 0.20, 0.20, 0.15, 0.10, 0.05, 0.05)  # P(1 call) .. P(8 calls), assumption


@dataclass(frozen=True, slots=True)
class CopilotParams:
    """Copilot-like generator parameters (tokens, seconds, probabilities).

    Raises:
        ValueError: a probability outside [0, 1], ``keep_fraction`` outside (0, 1], an empty model list,
            ``cascade_min`` outside 2..``cascade_max``, non-positive lengths/times.
    """

    turns_mean: float = 8.0
    deep_loop_share: float = 0.091
    cascade_min: int = 8
    cascade_max: int = 36
    model_switch_prob: float = 0.1
    keep_fraction: float = 1.0
    models: tuple[str, ...] = ("copilot-a", "copilot-b", "copilot-c")
    system_prompt_tokens: int = 6_000
    user_message_median_tokens: float = 300.0
    tool_result_median_tokens: float = 800.0
    output_median_tokens: float = 150.0
    user_think_median_s: float = 30.0
    tool_median_s: float = 2.0
    retry_median_s: float = 1.0
    session_rate_per_s: float = 0.1
    block_size: int = 512

    def __post_init__(self) -> None:
        for f in ("deep_loop_share", "model_switch_prob"):
            if not (0.0 <= getattr(self, f) <= 1.0):
                raise ValueError(f"{f} must be in [0, 1], got {getattr(self, f)!r}")
        if not (0.0 < self.keep_fraction <= 1.0):
            raise ValueError(f"keep_fraction must be in (0, 1], got {self.keep_fraction!r}")
        if not self.models:
            raise ValueError("models must name at least one model")
        if not (2 <= self.cascade_min <= self.cascade_max):
            raise ValueError(f"need 2 <= cascade_min <= cascade_max, got {self.cascade_min}, {self.cascade_max}")
        for f in ("turns_mean", "user_message_median_tokens", "tool_result_median_tokens", "output_median_tokens",
                  "user_think_median_s", "tool_median_s", "retry_median_s", "session_rate_per_s"):
            if not (getattr(self, f) > 0):
                raise ValueError(f"{f} must be > 0, got {getattr(self, f)!r}")
        if self.turns_mean < 1 or self.block_size < 1 or self.system_prompt_tokens < 0:
            raise ValueError("turns_mean must be >= 1, block_size >= 1, system_prompt_tokens >= 0")


def _ln(rng: np.random.Generator, median: float, n: int) -> list[int]:
    return np.maximum(1, np.rint(rng.lognormal(math.log(median), 1.0, size=n))).astype(np.int64).tolist()


def generate_copilot(n_sessions: int, rng: np.random.Generator, params: CopilotParams | None = None,
                     name: str = "copilot", **overrides) -> Workload:
    """Generate ``n_sessions`` Copilot-like closed-loop sessions (module docstring).

    ``overrides`` set single :class:`CopilotParams` fields (e.g. ``model_switch_prob=0.3``,
    ``keep_fraction=0.5``). Returns ``Workload(closed_loop=True)``.

    Raises:
        ValueError: ``n_sessions`` < 1 or invalid parameters.
    """
    if not (isinstance(n_sessions, int) and n_sessions >= 1):
        raise ValueError(f"n_sessions must be an int >= 1, got {n_sessions!r}")
    from optsched.workload.limits import MAX_GENERATED_SESSIONS

    if n_sessions > MAX_GENERATED_SESSIONS:
        raise ValueError(f"n_sessions expects at most {MAX_GENERATED_SESSIONS:,} (the generator cap, "
                         f"optsched.workload.limits), got {n_sessions:,}")
    p = params or CopilotParams(**overrides)
    if params is not None and overrides:
        raise ValueError("give either params or keyword overrides, not both")
    st = named_streams(rng, "structure", "lengths", "times", "prefix", "arrivals", "models")
    turns = (1 + st["structure"].poisson(p.turns_mean - 1, size=n_sessions)).tolist()
    deep = stratified_count(st["structure"], sum(turns), p.deep_loop_share).tolist()
    normal_n = (1 + st["structure"].choice(len(NORMAL_TURN_PMF), size=len(deep), p=NORMAL_TURN_PMF)).tolist()
    cascade_n = st["structure"].integers(p.cascade_min, p.cascade_max + 1, size=len(deep)).tolist()
    starts = np.cumsum(st["arrivals"].exponential(1.0 / p.session_rate_per_s, size=n_sessions)).tolist()
    hs = HashSource(st["prefix"])
    bs = p.block_size
    glob = global_prompt_hashes(p.system_prompt_tokens // bs, "optsched-copilot-system-prompt")
    lr, tr, mr = st["lengths"], st["times"], st["models"]
    sessions = []
    t_index = 0
    for s in range(n_sessions):
        sid = f"copilot-{s:05d}"
        model = p.models[0]
        stream = list(glob)  # full-block content ids of the context (unsalted)
        ctx = p.system_prompt_tokens
        common = 0  # tokens of the context shared (same model, same prefix) with the previous call's input
        calls: list[Call] = []
        for turn in range(turns[s]):
            is_deep = deep[t_index]
            n = cascade_n[t_index] if is_deep else normal_n[t_index]
            t_index += 1
            if turn > 0:
                common = calls[-1].input_tokens
                if p.keep_fraction < 1.0:
                    ctx = int(p.keep_fraction * ctx)
                    del stream[ctx // bs:]
                    common = min(common, ctx)
                if mr.random() < p.model_switch_prob and len(p.models) > 1:
                    model = p.models[(p.models.index(model) + 1 + int(mr.integers(len(p.models) - 1))) % len(p.models)]
                    common = 0
            ctx += _ln(lr, p.user_message_median_tokens, 1)[0]
            outs = _ln(lr, p.output_median_tokens, n)
            results = _ln(lr, p.tool_result_median_tokens, n)
            for i in range(n):
                full = ctx // bs
                if full > len(stream):
                    stream.extend(hs.take(full - len(stream)))
                raw = stream[:full] + (hs.take(1) if ctx % bs else [])
                prev = calls[-1] if calls else None
                last_of_turn = i == n - 1
                retry = is_deep and i > 0
                if last_of_turn:
                    think = float(tr.lognormal(math.log(p.user_think_median_s), 1.0))
                else:
                    think = float(tr.lognormal(math.log(p.retry_median_s if is_deep else p.tool_median_s), 1.0))
                if i > 0:
                    common = prev.input_tokens
                calls.append(Call(
                    f"{sid}-t{turn}.{i}", sid, ctx, outs[i], new_tokens=ctx - common,
                    parents=(prev.call_id,) if prev else (), block_hashes=salt_hashes(raw, model), block_size=bs,
                    model=model, turn=turn, think_time_s=0.0 if last_of_turn and turn == turns[s] - 1 else think,
                    tool="retry" if retry else ("" if last_of_turn else "tool"),
                ))
                if not last_of_turn:
                    ctx += outs[i] + results[i]
                else:
                    ctx += outs[i]
        sessions.append(Session(sid, tuple(calls), start_s=starts[s]))
    return Workload(name, tuple(sessions), block_size=bs, closed_loop=True, source="generated:copilot")
