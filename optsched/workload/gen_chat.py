"""Plain chat baseline: independent single-call requests with Poisson arrivals (open loop).

Lengths default to the Azure LLM inference trace 2023, conversation service (shared/data/azure_llm_2023/
SOURCE.md): ContextTokens median 1,020, p95 4,083; GeneratedTokens median 129, p95 451. Each is a
lognormal solved from median and p95 (``calibrate.lognormal_from_median_p95``: input sigma =
ln(4083/1020)/1.6449 = 0.8434, output sigma = ln(451/129)/1.6449 = 0.7609), capped at ``input_cap_tokens``
/ ``output_cap_tokens``. Arrivals: exponential gaps with mean ``1 / rate_per_s`` from t = 0. Each request
is its own session and carries fresh block hashes (no shared prefix: independent requests). Vectorized:
all random draws happen in numpy up front, so 1M calls generate in seconds.
"""

from __future__ import annotations

import numpy as np

from optsched.workload.calibrate import lognormal_from_median_p95, named_streams
from optsched.workload.types import Call, Session, Workload

__all__ = ["generate_chat"]


def generate_chat(
    n_calls: int,
    rng: np.random.Generator,
    rate_per_s: float = 10.0,
    input_median_tokens: float = 1_020,
    input_p95_tokens: float = 4_083,
    output_median_tokens: float = 129,
    output_p95_tokens: float = 451,
    input_cap_tokens: int = 16_384,
    output_cap_tokens: int = 4_096,
    block_size: int = 512,
    name: str = "chat",
) -> Workload:
    """``n_calls`` independent requests (module docstring); returns ``Workload(closed_loop=False)``.

    Raises:
        ValueError: ``n_calls`` < 1, ``rate_per_s`` not finite and > 0, a median >= its p95.
    """
    if not (isinstance(n_calls, int) and n_calls >= 1):
        raise ValueError(f"n_calls must be an int >= 1, got {n_calls!r}")
    if not (0 < rate_per_s < float("inf")):
        raise ValueError(f"rate_per_s must be a finite number > 0, got {rate_per_s!r}")
    st = named_streams(rng, "arrivals", "lengths", "prefix")
    gaps = st["arrivals"].exponential(1.0 / rate_per_s, size=n_calls)
    gaps[0] = 0.0
    t = np.cumsum(gaps).tolist()
    mu, sig = lognormal_from_median_p95(input_median_tokens, input_p95_tokens)
    inp = np.clip(np.rint(st["lengths"].lognormal(mu, sig, size=n_calls)), 1, input_cap_tokens).astype(np.int64)
    mu, sig = lognormal_from_median_p95(output_median_tokens, output_p95_tokens)
    out = np.clip(np.rint(st["lengths"].lognormal(mu, sig, size=n_calls)), 1, output_cap_tokens).astype(np.int64)
    nblocks = -(-inp // block_size)
    flat = st["prefix"].integers(0, 2**63 - 1, size=int(nblocks.sum()), dtype=np.int64).tolist()
    ends = np.cumsum(nblocks).tolist()
    inp_l, out_l = inp.tolist(), out.tolist()
    sessions = []
    start = 0
    for i in range(n_calls):
        cid = f"chat-{i:07d}"
        c = Call(cid, cid, inp_l[i], out_l[i], block_hashes=tuple(flat[start : ends[i]]), block_size=block_size,
                 arrival_s=t[i])
        start = ends[i]
        sessions.append(Session(cid, (c,), start_s=t[i]))
    return Workload(name, tuple(sessions), block_size=block_size, closed_loop=False, source="generated:chat")
