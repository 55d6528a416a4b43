"""Scale a workload down to the executor's size (torch-free).

Every token count is divided by ``factor`` (rounded up) and so is the block size, while the block
hashes are kept one for one: scaled block i still stands for the tokens of original block i, so which
calls share which prefix is unchanged (a call's ``ceil(input / block_size)`` hash count is preserved:
with input = (n-1)·B + r, 1 <= r <= B, ceil(input / f) = (n-1)·B/f + ceil(r / f) and 1 <= ceil(r/f) <= B/f).
Outputs are divided the same way (at least 1 token). Times (session starts, think times) are multiplied
by ``time_scale`` (default 1: the closed-loop release rule release = max(parents' finish) + think is the
simulator's own driver, unchanged).
"""

from __future__ import annotations

import dataclasses

from optsched.workload.types import Workload

__all__ = ["scale_workload"]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def scale_workload(w: Workload, factor: int, time_scale: float = 1.0) -> Workload:
    """``w`` with token counts and block size divided by ``factor`` (an int >= 1 dividing ``w.block_size``).

    Raises:
        ValueError: ``factor`` not a positive int dividing the block size, or ``time_scale`` <= 0.
    """
    if not isinstance(factor, int) or isinstance(factor, bool) or factor < 1:
        raise ValueError(f"scale factor must be an int >= 1, got {factor!r}")
    if w.block_size % factor:
        raise ValueError(f"scale factor {factor} must divide the workload's block size {w.block_size}")
    if not time_scale > 0:
        raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
    bs = w.block_size // factor
    sessions = []
    for s in w.sessions:
        calls = []
        for c in s.calls:
            inp = _ceil_div(c.input_tokens, factor)
            calls.append(dataclasses.replace(
                c, input_tokens=inp, new_tokens=min(inp, _ceil_div(c.new_tokens, factor)),
                output_tokens=max(1, _ceil_div(c.output_tokens, factor)), block_size=bs,
                think_time_s=c.think_time_s * time_scale,
                arrival_s=None if c.arrival_s is None else c.arrival_s * time_scale))
        sessions.append(dataclasses.replace(s, calls=tuple(calls), start_s=s.start_s * time_scale, _index={}))
    return dataclasses.replace(w, name=f"{w.name}/scaled{factor}", sessions=tuple(sessions), block_size=bs)
