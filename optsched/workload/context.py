"""Fitting a workload into a model's context window: the one rule every config and generator uses.

A serving engine rejects a request whose prompt plus requested output exceeds the model's context
(vLLM: ``max_model_len``; the OpenAI server answers 400), and the simulator does the same
(`optsched.sim.simulate` raises ValueError). Workloads are therefore made to fit *before* simulation,
by a documented rule whose effect is counted in ``Workload.context_cut`` (reported by
``workload_stats`` under ``context_cut``):

- ``cap_context`` (``rule="end_session"``, for sessions): each session ends before its first call
  whose ``input_tokens + output_tokens`` exceed ``max_context_tokens``. A prefix of a session (in call
  order, which is topological) is a valid session DAG; sessions left empty are dropped. Nothing is
  truncated, so block hashes and prefix hits of the calls kept are unchanged. This is what an agent does
  when its context is full (the session ends or is compacted into a new one).
- ``clip_prompts`` (``rule="clip_prompt"``, for single-call traces without block hashes): a call whose
  total exceeds the context loses the excess from its prompt, as Vidur's
  ``TraceRequestLengthGenerator`` does (``num_prefill_tokens -= max(0, total - max_tokens)``, SOURCE:
  microsoft/vidur ``vidur/request_generator/trace_request_length_generator.py``, default max_tokens
  4096). Refused for calls with block hashes (clipping would change their content identity).
"""

from __future__ import annotations

import dataclasses

from optsched.workload.types import ContextCut, Session, Workload

__all__ = ["cap_context", "check_context", "clip_prompts"]


def _check_limit(max_context_tokens: int) -> None:
    if not (isinstance(max_context_tokens, int) and not isinstance(max_context_tokens, bool)
            and max_context_tokens >= 2):
        raise ValueError(f"max_context_tokens must be an int >= 2, got {max_context_tokens!r}")


def cap_context(wl: Workload, max_context_tokens: int) -> tuple[Workload, dict[str, int]]:
    """``(workload, {"calls_cut", "sessions_cut"})``: each session cut before its first call longer than
    the context (module docstring, rule ``end_session``); the workload records the cut in ``context_cut``.

    Raises:
        ValueError: ``max_context_tokens`` not an int >= 2, or every session's first call is too long.
    """
    _check_limit(max_context_tokens)
    kept, calls_cut, sess_cut = [], 0, 0
    for s in wl.sessions:
        k = next((i for i, c in enumerate(s.calls) if c.input_tokens + c.output_tokens > max_context_tokens),
                 len(s.calls))
        if k == len(s.calls):
            kept.append(s)
            continue
        calls_cut += len(s.calls) - k
        sess_cut += 1
        if k > 0:
            kept.append(Session(s.session_id, tuple(s.calls[:k]), start_s=s.start_s))
    if not kept:
        raise ValueError(f"every session's first call exceeds the model context of {max_context_tokens} tokens")
    cut = ContextCut(max_context_tokens, "end_session", calls_cut, sess_cut)
    return dataclasses.replace(wl, sessions=tuple(kept), context_cut=cut), {"calls_cut": calls_cut,
                                                                           "sessions_cut": sess_cut}


def clip_prompts(wl: Workload, max_context_tokens: int) -> Workload:
    """``wl`` with every too-long call's prompt shortened by its excess (module docstring, rule
    ``clip_prompt``; Vidur's rule); counts in ``context_cut``.

    Raises:
        ValueError: bad ``max_context_tokens``; a call with block hashes would be clipped; a call whose
            output alone leaves no room for a 1-token prompt.
    """
    _check_limit(max_context_tokens)
    sessions, n, toks, sess = [], 0, 0, 0
    for s in wl.sessions:
        calls, changed = [], False
        for c in s.calls:
            excess = c.input_tokens + c.output_tokens - max_context_tokens
            if excess <= 0:
                calls.append(c)
                continue
            if c.block_hashes:
                raise ValueError(f"call {c.call_id} has block hashes: clipping its prompt would change its "
                                 "content; use cap_context (end the session) instead")
            if c.input_tokens - excess < 1:
                raise ValueError(f"call {c.call_id}: output {c.output_tokens} tokens leaves no room for a prompt "
                                 f"within the context of {max_context_tokens} tokens")
            new_in = c.input_tokens - excess
            calls.append(dataclasses.replace(c, input_tokens=new_in, new_tokens=min(c.new_tokens, new_in)))
            n += 1
            toks += excess
            changed = True
        sess += changed
        sessions.append(Session(s.session_id, tuple(calls), start_s=s.start_s) if changed else s)
    return dataclasses.replace(wl, sessions=tuple(sessions),
                               context_cut=ContextCut(max_context_tokens, "clip_prompt", n, sess, toks))


def check_context(calls, max_context_tokens: int, where: str) -> None:
    """Raise ValueError naming the first call whose ``input_tokens + output_tokens`` exceed
    ``max_context_tokens`` (``where``: the model and instance it would run on, for the message)."""
    for c in calls:
        total = c.input_tokens + c.output_tokens
        if total > max_context_tokens:
            raise ValueError(
                f"call {c.call_id}: {c.input_tokens} input + {c.output_tokens} output = {total} tokens exceed "
                f"{where} max_context_tokens {max_context_tokens}; fit the workload first "
                "(optsched.workload.context.cap_context, or a generator's max_context)"
            )
