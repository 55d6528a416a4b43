"""Hot-shared-prompt sessions with staggered starts: the workload where cache-aware routing collapses.

Every session starts with the same long system prompt (``prompt_tokens``, block hashes shared by all
sessions, as one product's agent prompt), then grows its own history: call k of a session has input
``prompt + Σ_{j<k} (new_j + out_j) + new_k`` tokens (new lognormal, median ``new_median_tokens``), output
lognormal (median ``output_median_tokens``), and a tool pause after it (lognormal median ``think_median_s``,
sigma 1.0). Session s starts at ``s · stagger_s``. A router that follows the longest prefix match
(SGLang cache-aware: match rate > 0.3) sends every new session to the instance that cached the prompt
first, and stickiness keeps them there (measured: max/mean instance load 4.0 on 4 instances).
Randomness: one ``numpy.random.Generator``, named child streams (STYLE habit 5).
"""

from __future__ import annotations

import math

import numpy as np

from optsched.workload.calibrate import named_streams
from optsched.workload.prefix_model import HashSource, global_prompt_hashes
from optsched.workload.types import Call, Session, Workload

__all__ = ["generate_hotprompt"]


def generate_hotprompt(n_sessions: int, rng: np.random.Generator, calls_per_session: int = 8,
                       prompt_tokens: int = 16_384, new_median_tokens: float = 1_024,
                       output_median_tokens: float = 256, think_median_s: float = 5.0, stagger_s: float = 2.0,
                       block_size: int = 512, max_context_tokens: int = 120_000) -> Workload:
    """``n_sessions`` closed-loop chains of ``calls_per_session`` calls (module docstring).

    Raises:
        ValueError: a count < 1, a non-positive length / time, or a negative stagger.
    """
    for name, v in (("n_sessions", n_sessions), ("calls_per_session", calls_per_session),
                    ("prompt_tokens", prompt_tokens), ("block_size", block_size)):
        if not (isinstance(v, int) and v >= 1):
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    for name, v in (("new_median_tokens", new_median_tokens), ("output_median_tokens", output_median_tokens),
                    ("think_median_s", think_median_s)):
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be finite and > 0, got {v!r}")
    if not (math.isfinite(stagger_s) and stagger_s >= 0):
        raise ValueError(f"stagger_s must be finite and >= 0, got {stagger_s!r}")
    st = named_streams(rng, "lengths", "outputs", "gaps", "prefix")
    hs = HashSource(st["prefix"])
    bs = block_size
    glob = global_prompt_hashes(prompt_tokens // bs, "optsched-hotprompt-system")
    sessions = []
    for s in range(n_sessions):
        sid = f"hot-{s:05d}"
        news = np.maximum(1, np.rint(st["lengths"].lognormal(math.log(new_median_tokens), 1.0, calls_per_session)))
        outs = np.maximum(1, np.rint(st["outputs"].lognormal(math.log(output_median_tokens), 0.8, calls_per_session)))
        gaps = st["gaps"].lognormal(math.log(think_median_s), 1.0, calls_per_session)
        stream = list(glob)
        ctx = prompt_tokens
        calls, prev = [], None
        for k in range(calls_per_session):
            new = int(news[k]) if k else 0
            xin = min(max_context_tokens, ctx + new)
            full = xin // bs
            if full > len(stream):
                stream.extend(hs.take(full - len(stream)))
            hashes = tuple(stream[:full]) + (tuple(hs.take(1)) if xin % bs else ())
            last = k == calls_per_session - 1
            c = Call(f"{sid}-{k}", sid, xin, int(outs[k]), new_tokens=xin - (ctx if k else 0) if k else xin,
                     parents=(prev,) if prev else (), block_hashes=hashes, block_size=bs, turn=k,
                     think_time_s=0.0 if last else float(gaps[k]), tool="" if last else "tool")
            calls.append(c)
            prev = c.call_id
            ctx = xin + int(outs[k])
        sessions.append(Session(sid, tuple(calls), start_s=s * stagger_s))
    return Workload(f"hotprompt-{n_sessions}", tuple(sessions), block_size=bs, closed_loop=True,
                    source="generated:hotprompt")
