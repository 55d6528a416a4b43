"""Plausibility limits on every loaded workload field: the one table of them.

A trace number beyond these is not a workload optsched can say anything true about: a ``timestamp`` of
1e300 ms absorbs every later addition in float arithmetic (a 1e297 s makespan with TTFT 0), an
``output_length`` of 10^13 tokens is ~10^8 times the largest model context in the catalog. Loaders reject
such a value with a :class:`~optsched.workload.errors.TraceFormatError` naming the file, the line and the
field; generator specs reject sizes past the generator caps. DESIGN.md "Input limits" shows
:func:`limits_markdown` (``tests/workload/test_hostile_inputs.py`` checks that it is the same table).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from optsched.workload.errors import TraceFormatError, require_int, require_number

__all__ = ["LIMITS", "MAX_BLOCK_SIZE", "MAX_CALL_TOKENS", "MAX_GENERATED_CALLS", "MAX_GENERATED_SESSIONS", "MAX_JSON_DEPTH",
           "MAX_TIME_S", "Limit", "check_call", "check_start", "limits_markdown", "require_time", "require_tokens"]

# seconds: timestamps (from the trace's start), delays, think / tool / wait times, session starts. 10^7 s is
# 116 days, past any published trace (Mooncake FAST'25: 1 h; Azure 2023: 1 week); at 10^7 s a float64 still
# resolves 2e-9 s, so no event time is absorbed.
MAX_TIME_S = 1e7
# tokens of one call (input, new or output). 2^24 = 16,777,216 is 102x the largest context in the cost catalog
# (DeepSeek-V3, 163,840) and 16x the AgentX generator's 1M input cap.
MAX_CALL_TOKENS = 2**24
# tokens per hash block (a trace's block_size): engines use 16-512; 2^20 is a whole long context in one block.
MAX_BLOCK_SIZE = 2**20
# nesting of one JSON value (a trace line, a Weka document, a policy file): traces nest 3-4 levels deep;
# Python's parser recurses per level and fails with RecursionError near 1,000.
MAX_JSON_DEPTH = 64
# generator specs (`agentx:sessions=N`, `chat:calls=N`, ...): 10^5 sessions of AgentX-like calls is ~10^7
# calls, minutes of generation and GBs of memory; past it the request is almost surely a typo.
MAX_GENERATED_SESSIONS = 100_000
MAX_GENERATED_CALLS = 10_000_000  # chat calls, and sessions x calls for hotprompt


@dataclass(frozen=True, slots=True)
class Limit:
    """One row of the limits table: ``name`` (the constant), ``value``, ``unit``, ``applies_to`` (the fields)."""

    name: str
    value: float
    unit: str
    applies_to: str


LIMITS: tuple[Limit, ...] = (
    Limit("MAX_TIME_S", MAX_TIME_S, "s", "timestamps (as seconds from 0), delays, think / tool / wait times, "
                                         "session starts, in every trace format (ms fields: x 1000)"),
    Limit("MAX_CALL_TOKENS", MAX_CALL_TOKENS, "tokens", "input, new and output tokens of one call (input_length, "
                                                        "output_length, ContextTokens, num_prefill_tokens, ...)"),
    Limit("MAX_BLOCK_SIZE", MAX_BLOCK_SIZE, "tokens", "block_size of a Weka trace, a native header or call, the "
                                                      "optsched extension of Agentic Mooncake rows"),
    Limit("MAX_JSON_DEPTH", MAX_JSON_DEPTH, "levels", "nesting of one JSON value: a trace line, a Weka document, "
                                                      "a policy file"),
    Limit("MAX_GENERATED_SESSIONS", MAX_GENERATED_SESSIONS, "sessions", "`sessions=` of a generator spec "
                                                                        "(agentx, copilot, hotprompt, replay)"),
    Limit("MAX_GENERATED_CALLS", MAX_GENERATED_CALLS, "calls", "`calls=` of `chat:`; sessions x calls of "
                                                               "`hotprompt:`"),
)


def _fmt(v: float) -> str:
    return f"{int(v):,}" if float(v).is_integer() and v < 1e9 else f"{v:g}"


def limits_markdown() -> str:
    """The limits as a Markdown table (the one DESIGN.md "Input limits" shows)."""
    rows = ["| limit | value | unit | applies to |", "|---|---|---|---|"]
    rows += [f"| `{x.name}` | {_fmt(x.value)} | {x.unit} | {x.applies_to} |" for x in LIMITS]
    return "\n".join(rows) + "\n"


def require_tokens(value: object, field: str, path: str | Path, line: int, minimum: int = 0) -> int:
    """``value`` as a token count in [``minimum``, `MAX_CALL_TOKENS`].

    Raises:
        TraceFormatError: missing, not an integer, or out of that range (file, line and field named).
    """
    return require_int(value, field, path, line, minimum=minimum, maximum=MAX_CALL_TOKENS)


def require_time(value: object, field: str, path: str | Path, line: int, unit_s: float = 1.0) -> float:
    """``value`` (a time in units of ``unit_s`` seconds: 1e-3 for ms) as a finite float in
    [0, `MAX_TIME_S` / ``unit_s``].

    Raises:
        TraceFormatError: missing, not a number, NaN / inf, negative or beyond the limit.
    """
    return require_number(value, field, path, line, maximum=MAX_TIME_S / unit_s)


def check_call(call, path: str | Path, line: int) -> None:
    """Check a built :class:`~optsched.workload.types.Call` against the limits (for loaders whose fields map
    one-to-one to the call's, or are derived: native JSONL, tokenized LMCache text, Azure / Vidur rows).

    Raises:
        TraceFormatError: a token count over `MAX_CALL_TOKENS` or a time over `MAX_TIME_S`, naming the field.
    """
    for f in ("input_tokens", "new_tokens", "output_tokens"):
        v = getattr(call, f)
        if v > MAX_CALL_TOKENS:
            raise TraceFormatError(path, line, f"{f!r} <= {MAX_CALL_TOKENS:,} tokens (MAX_CALL_TOKENS, the "
                                               "plausibility limit)", v)
    for f in ("arrival_s", "think_time_s", "wait_s"):
        v = getattr(call, f)
        if v is not None and not v <= MAX_TIME_S:
            raise TraceFormatError(path, line, f"{f!r} <= {MAX_TIME_S:g} s (MAX_TIME_S, the plausibility limit)", v)


def check_start(start_s: float, path: str | Path, line: int, field: str = "start_s") -> None:
    """A session start within [0, `MAX_TIME_S`] s.

    Raises:
        TraceFormatError: beyond the limit (file, line and field named).
    """
    if not start_s <= MAX_TIME_S:
        raise TraceFormatError(path, line, f"{field!r} <= {MAX_TIME_S:g} s (MAX_TIME_S, the plausibility limit)",
                               start_s)
