"""Fuzz every trace loader and the policy loader with mutations of valid files: truncation, type swaps,
extreme numbers, duplicated / missing keys, rows of another format, byte damage.

Each mutated file must either load or raise the optsched error for bad input (`TraceFormatError` naming the
file and a line; for policies a ValueError whose message starts with the file) — never another exception,
never a hang (each example is time-boxed by SIGALRM). Examples are derandomized (the same ones every run) and
few, so the module stays within seconds in CI; raise FUZZ_EXAMPLES to search longer locally.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.workload import Call, Session, TraceFormatError, Workload, load_any, write_jsonl
from optsched.workload.limits import MAX_CALL_TOKENS, MAX_TIME_S

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
SECONDS_PER_EXAMPLE = 10
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("FUZZ_RANDOM") is None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])

# JSON values a field may be swapped for: every type, and the numbers that break arithmetic
EXTREME = st.sampled_from([0, -1, -0.0, 1e308, -1e308, 1e-320, 2**63, 2**64 + 1, 10**30, 1e300, 0.5, 3.0,
                           math.nan, math.inf, -math.inf])
VALUE = st.one_of(st.none(), st.booleans(), EXTREME, st.integers(-10, 10**6), st.text(max_size=8),
                  st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
FOREIGN_KEYS = ["request_id", "wait_for", "session_id", "delay", "format", "call_id", "input", "output", "requests",
                "hash_ids", "input_length", "timestamp", "tool_wait_ms", "optsched", "block_size"]


@contextlib.contextmanager
def time_box(seconds: int = SECONDS_PER_EXAMPLE):
    """Fail (not hang) when the body runs longer than ``seconds``."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def boom(*_):
        raise TimeoutError(f"loader ran longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ---- valid seeds, one per format ------------------------------------------------------------------------------

def _rows_text(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _native_text(tmp: Path) -> str:
    c0 = Call("c0", "s0", 1024, 5, block_hashes=(1, 2), block_size=512)
    c1 = Call("c1", "s0", 1536, 4, parents=("c0",), block_hashes=(1, 2, 3), block_size=512, think_time_s=1.5)
    w = Workload("w", (Session("s0", (c0, c1), start_s=2.0),), block_size=512)
    return write_jsonl(w, tmp / "seed.jsonl").read_text()


SEEDS = {
    "mooncake.jsonl": _rows_text([{"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]},
                                  {"timestamp": 7, "input_length": 600, "output_length": 3, "hash_ids": [1, 3]}]),
    "sessions.jsonl": _rows_text([{"session_id": "s", "timestamp": 0, "input_length": 1024, "output_length": 5,
                                   "hash_ids": [1, 2]},
                                  {"session_id": "s", "delay": 2000, "input_length": 1536, "output_length": 3,
                                   "hash_ids": [1, 2, 4]}]),
    "agentic.jsonl": _rows_text([{"request_id": "a", "session_id": "s", "timestamp": 0, "input_length": 1024,
                                  "output_length": 5, "hash_ids": [1, 2]},
                                 {"request_id": "b", "session_id": "t", "wait_for": ["a"], "delay": 10,
                                  "input_length": 600, "output_length": 3, "hash_ids": [1, 3]},
                                 {"request_id": "c", "session_id": "s", "wait_for": ["a", "b"], "tool_wait_ms": 50,
                                  "input_length": 900, "output_length": 2, "hash_ids": [1, 2],
                                  "tool_events": [{"tool_class": "bash"}]}]),
    "lmcache.jsonl": _rows_text([{"timestamp": 1700000000000000, "input": "system: hi\nuser: fix the bug",
                                  "output": "ok", "session_id": "s"},
                                 {"timestamp": 1700000002000000, "input": "system: hi\nuser: fix the bug\nok\nmore",
                                  "output": "done", "session_id": "s"}]),
    "weka.json": json.dumps({"id": "t1", "block_size": 64, "requests": [
        {"type": "n", "t": 0.0, "in": 100, "out": 5, "hash_ids": [1, 2], "api_time": 0.5},
        {"type": "subagent", "agent_id": "a1", "requests": [{"type": "s", "t": 1.0, "in": 70, "out": 3,
                                                              "hash_ids": [1, 9]}]},
        {"type": "n", "t": 3.0, "in": 130, "out": 4, "hash_ids": [1, 2, 5], "think_time": 0.2}]}),
    "azure.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n"
                 "2023-11-16 18:17:04.0319600,3180,8\n",
    "vidur.csv": "arrived_at,num_prefill_tokens,num_decode_tokens,num_total_tokens\n0.0,100,5,105\n0.5,300,7,307\n",
}


def _seed_text(name: str, tmp: Path) -> str:
    return _native_text(tmp) if name == "native.jsonl" else SEEDS[name]


ALL_SEEDS = sorted([*SEEDS, "native.jsonl"])


# ---- mutations -------------------------------------------------------------------------------------------------

def _mutate_json(value, data, depth: int = 0):
    """``value`` with one random change somewhere inside: a value swapped, a key dropped / added / renamed, a
    list element duplicated or removed."""
    if isinstance(value, dict) and value and depth < 6 and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(value)))
        return {**value, key: _mutate_json(value[key], data, depth + 1)}
    if isinstance(value, list) and value and depth < 6 and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(value) - 1))
        return value[:i] + [_mutate_json(value[i], data, depth + 1)] + value[i + 1:]
    op = data.draw(st.sampled_from(["swap", "drop", "add", "dup"]))
    if isinstance(value, dict) and value and op in ("drop", "add", "dup"):
        key = data.draw(st.sampled_from(sorted(value)))
        if op == "drop":
            return {k: v for k, v in value.items() if k != key}
        return {**value, data.draw(st.sampled_from(FOREIGN_KEYS)): data.draw(VALUE)}
    if isinstance(value, list) and value and op in ("drop", "dup"):
        i = data.draw(st.integers(0, len(value) - 1))
        return value[:i] + value[i + 1:] if op == "drop" else value[: i + 1] + value[i:]
    return data.draw(VALUE)


def _dump_line(obj) -> str:
    return json.dumps(obj, allow_nan=True)


def _mutate_text(name: str, text: str, data) -> str:
    kind = data.draw(st.sampled_from(["truncate", "json", "json", "json", "dup_key", "mix", "bytes", "lines", "deep"]))
    if kind == "truncate":
        return text[: data.draw(st.integers(0, max(0, len(text) - 1)))]
    if kind == "bytes":
        i = data.draw(st.integers(0, max(0, len(text) - 1)))
        return text[:i] + data.draw(st.sampled_from(["\x00", "\ufffd", '"', "{", "]", ",", "\n", "\n\n", "1e999",
                                                     "1" + "0" * 5000])) + text[i + 1:]
    lines = text.splitlines()
    if kind == "deep":  # a line (or the document) nested far deeper than any trace
        n = data.draw(st.sampled_from([70, 2_000, 200_000]))
        deep = '{"timestamp": 0, "x": ' + "[" * n + "]" * n + "}"
        i = data.draw(st.integers(0, len(lines) - 1))
        lines[i] = deep
        return "\n".join(lines) + "\n"
    if kind == "lines":
        i = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["dup", "drop", "swap"]))
        if op == "dup":
            lines.insert(i, lines[i])
        elif op == "drop":
            del lines[i]
        else:
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines) + "\n"
    if name.endswith(".csv"):
        i = data.draw(st.integers(0, len(lines) - 1))
        cells = lines[i].split(",")
        c = data.draw(st.integers(0, len(cells) - 1))
        cells[c] = data.draw(st.sampled_from(["", "nan", "inf", "-1", "1e400", "9" * 40, "12.5", "x", "2023-13-99 99:99",
                                              "0", "1e7", "99999999999"]))
        lines[i] = ",".join(cells)
        return "\n".join(lines) + "\n"
    i = data.draw(st.integers(0, len(lines) - 1))
    try:
        obj = json.loads(lines[i])
    except json.JSONDecodeError:
        return text
    if kind == "dup_key" and isinstance(obj, dict) and obj:
        key = data.draw(st.sampled_from(sorted(obj)))
        lines[i] = lines[i].rstrip()[:-1] + f", {json.dumps(key)}: {_dump_line(data.draw(VALUE))}}}"
    elif kind == "mix":  # a row of another format
        other = data.draw(st.sampled_from(sorted(SEEDS)))
        row = SEEDS[other].splitlines()[0]
        lines.insert(data.draw(st.integers(0, len(lines))), row)
    else:
        lines[i] = _dump_line(_mutate_json(obj, data))
    return "\n".join(lines) + "\n"


def _check_load(path: Path) -> None:
    with time_box():
        try:
            w = load_any(path)
        except TraceFormatError as exc:
            assert exc.path.startswith(str(path)) and exc.line >= 0, exc
            assert str(exc).startswith(str(path)), exc
            assert "\n" not in str(exc), exc
            return
    # a clean load is within the plausibility limits (optsched.workload.limits): nothing absurd gets through
    for s in w.sessions:
        assert 0 <= s.start_s <= MAX_TIME_S, s.start_s
        for c in s.calls:
            assert max(c.input_tokens, c.new_tokens, c.output_tokens) <= MAX_CALL_TOKENS, c
            for t in (c.think_time_s, c.wait_s, 0.0 if c.arrival_s is None else c.arrival_s):
                assert 0 <= t <= MAX_TIME_S, c


@pytest.mark.parametrize("name", ALL_SEEDS)
def test_seed_files_load(tmp_path, name):
    p = tmp_path / name
    p.write_text(_seed_text(name, tmp_path))
    assert load_any(p).num_calls >= 2


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", ALL_SEEDS)
@FUZZ
@given(data=st.data())
def test_mutated_trace_loads_or_names_file_and_line(tmp_path, name, data):
    text = _mutate_text(name, _seed_text(name, tmp_path), data)
    p = tmp_path / f"m_{name}"
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    _check_load(p)


# ---- the policy loader ---------------------------------------------------------------------------------------------

def _policy_seeds(tmp: Path) -> list[str]:
    from optsched.export import dump_policy
    from optsched.plan import Plan, Provenance

    prov = Provenance(workload_digest="x", solver="highs", objective=1.0, gap=0.0, seed=0)
    plans = [Plan("admission", "vllm_threshold", {"long_prefill_token_threshold": 512}, prov),
             Plan("routing", "cache_aware", {"cache_threshold": 0.3, "balance_abs_threshold": 8}, prov),
             Plan("pd_ratio", "counts", {"counts": [{"gpu": "h200", "model": "llama-3-70b", "tp": 4,
                                                      "role": "prefill", "instances": 1}], "gpu_budget": 8}, prov)]
    return [dump_policy(p, tmp / f"seed{i}.json").read_text() for i, p in enumerate(plans)]


@FUZZ
@given(data=st.data())
def test_mutated_policy_loads_or_names_the_file(tmp_path, data):
    from optsched.export import load_policy

    seed = data.draw(st.sampled_from(_policy_seeds(tmp_path)))
    kind = data.draw(st.sampled_from(["json", "json", "json", "truncate", "bytes"]))
    if kind == "json":
        text = _dump_line(_mutate_json(json.loads(seed), data))
    else:
        text = _mutate_text("policy.json", seed, data) if kind == "bytes" else \
            seed[: data.draw(st.integers(0, len(seed) - 1))]
    p = tmp_path / "mutated.json"
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    with time_box():
        try:
            plan = load_policy(p)
        except ValueError as exc:
            assert str(exc).startswith(str(p)) and "\n" not in str(exc), exc
            return
    for v in (plan.parameters, plan.provenance):
        assert "NaN" not in json.dumps(v, default=str) and "Infinity" not in json.dumps(v, default=str)
