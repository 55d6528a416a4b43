"""Multi-agent lane reconstruction for agent logs whose orchestrator and sub-agents share one session id.

Input: a session's calls in time order, each as its prompt token ids plus an optional agent key (an
``agent_id`` or system-prompt field of the log). Output per call: lane, parents, and ``new_tokens``
against the call's own lane context.

Heuristics (documented; the log does not record the agent structure):

1. Lane assignment. A call's key is its agent key when the log has one, else its first ``key_tokens``
   prompt tokens (the system prompt region: agents of different types have different system prompts).
   A call continues the lane with the same key whose last prompt shares the longest common token prefix
   with it, provided that prefix covers at least ``continue_fraction`` of that last prompt (an agent
   re-sends its own growing context); otherwise it opens a new lane. The lane of the session's first call
   is the orchestrator, lane 0; the others are sub-agent lanes 1, 2, ... in order of their first call.
2. Fork: a sub-agent lane's first call has as parent the last orchestrator call before it (none when
   the sub-agent starts before the orchestrator's first call: then it is a root).
3. Join: the first orchestrator call after a sub-agent lane's last call also waits for that last call.
4. ``new_tokens`` = prompt tokens minus the common prefix with the call's first parent (the previous
   call of its own lane, or the fork call for a lane's first call), so a sub-agent's calls are measured
   against its own context, not the orchestrator's.

Failure modes: two sub-agents with the same system prompt whose first prompts overlap by more than
``continue_fraction`` of the other's last prompt are merged into one lane; context compaction (an agent
rewriting its history so that less than ``continue_fraction`` survives) opens a spurious lane; nested
sub-agents (a sub-agent spawning its own) are attached to the orchestrator, not their real parent; a
sub-agent still running when the orchestrator's last call starts has no join; a session whose first
call is a sub-agent's makes that sub-agent lane 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from optsched.workload.tokenizer import common_prefix_len

__all__ = ["LaneCall", "reconstruct_lanes"]


@dataclass(frozen=True, slots=True)
class LaneCall:
    """Result for one call: ``lane`` (0 = orchestrator), ``parents`` (indices into the input, fork parent
    or lane predecessor first, then joined sub-agent calls), ``new_tokens`` (tokens)."""

    lane: int
    parents: tuple[int, ...]
    new_tokens: int


def reconstruct_lanes(prompts: Sequence[Sequence[int]], keys: Sequence[str | None] | None = None,
                      key_tokens: int = 64, continue_fraction: float = 0.5) -> list[LaneCall]:
    """Lanes, fork/join parents and per-lane ``new_tokens`` of one session's calls (module docstring).

    Args:
        prompts: token ids of each call's prompt, in time order.
        keys: per call an explicit agent key (agent id or system prompt text) or None.
        key_tokens: prompt tokens used as the key when ``keys`` gives none (>= 1).
        continue_fraction: share of a lane's last prompt a call must extend to continue it, in (0, 1].

    Raises:
        ValueError: ``key_tokens < 1``, ``continue_fraction`` outside (0, 1], or ``keys`` of another length.
    """
    if key_tokens < 1:
        raise ValueError(f"key_tokens must be >= 1, got {key_tokens!r}")
    if not 0.0 < continue_fraction <= 1.0:
        raise ValueError(f"continue_fraction must be in (0, 1], got {continue_fraction!r}")
    if keys is not None and len(keys) != len(prompts):
        raise ValueError(f"keys has {len(keys)} entries for {len(prompts)} prompts")
    lane_of: list[int] = []
    lanes: list[tuple[str, int]] = []  # (key, index of the lane's last call)
    for i, ids in enumerate(prompts):
        key = keys[i] if keys is not None and keys[i] is not None else "\0" + ",".join(map(str, ids[:key_tokens]))
        best, best_cp = -1, -1
        for k, (lk, last) in enumerate(lanes):
            if lk != key:
                continue
            cp = common_prefix_len(ids, prompts[last])
            if cp >= continue_fraction * len(prompts[last]) and cp > best_cp:
                best, best_cp = k, cp
        if best < 0:
            best = len(lanes)
            lanes.append((key, i))
        lanes[best] = (key, i)
        lane_of.append(best)
    parents: list[list[int]] = [[] for _ in prompts]
    prev_in_lane: dict[int, int] = {}
    last_main = -1
    for i, ln in enumerate(lane_of):
        if ln in prev_in_lane:
            parents[i].append(prev_in_lane[ln])
        elif ln != 0 and last_main >= 0:
            parents[i].append(last_main)
        prev_in_lane[ln] = i
        if ln == 0:
            last_main = i
    main_calls = [i for i, ln in enumerate(lane_of) if ln == 0]
    for ln, last in sorted(prev_in_lane.items()):
        if ln == 0:
            continue
        join = next((j for j in main_calls if j > last), None)
        if join is not None:
            parents[join].append(last)
    out = []
    for i, ids in enumerate(prompts):
        shared = common_prefix_len(ids, prompts[parents[i][0]]) if parents[i] else 0
        out.append(LaneCall(lane_of[i], tuple(parents[i]), len(ids) - shared))
    return out
