"""A run's metrics under AIPerf's names and units (``metrics_aiperf.json``), so a simulated run lines up
with an AIPerf / AgentX benchmark run.

Source of names, units and formulas: AIPerf ``docs/metrics-reference.md`` and
``docs/reference/json-export-schema.md`` (``profile_export_aiperf.json``: per metric ``unit``, ``avg``,
``min``, ``max``, ``p1``..``p99``, ``std``, ``count``, ``sum`` for record metrics; ``unit`` + ``avg`` for
derived / aggregate ones). Only metrics that exist in both tools are written:

| AIPerf tag | unit | optsched source (per call) |
|---|---|---|
| time_to_first_token | ms | ``ttft_s`` x 1000 (first token - release) |
| request_latency | ms | ``e2e_s`` x 1000 (finish - release) |
| inter_token_latency | ms | ``tpot_s`` x 1000 ((finish - first token) / (output - 1)); calls with 1 output token omitted, as AIPerf |
| output_token_throughput_per_user | tokens/sec/user | 1 / ``tpot_s`` (AIPerf: 1 / ITL) |
| input_sequence_length | tokens | ``input_tokens`` |
| output_sequence_length | tokens | ``output_tokens`` |
| request_count | requests | calls |
| benchmark_duration | sec | last finish - first release |
| request_throughput | requests/sec | request_count / benchmark_duration |
| output_token_throughput | tokens/sec | total output tokens / benchmark_duration |
| total_token_throughput | tokens/sec | (input + output tokens) / benchmark_duration |
| total_output_tokens, total_isl | tokens | sums |

Differences: the "request start" is optsched's release time (the closed-loop client sends then), no
network or tokenization time is included, and ``std`` is the sample standard deviation (ddof 1) as
AIPerf. Percentiles are numpy's linear interpolation. Records: ``records`` holds one entry per call
(``metadata`` with session, call id, lane; ``metrics`` ``{tag: {value, unit}}``), AIPerf's per-record
export shape.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring_ascii as _enc
from pathlib import Path

import numpy as np

__all__ = ["aiperf_metrics", "write_aiperf_metrics"]

_PCTS = (1, 5, 10, 25, 50, 75, 90, 95, 99)
_RECORD = (("time_to_first_token", "ms"), ("request_latency", "ms"), ("inter_token_latency", "ms"),
           ("output_token_throughput_per_user", "tokens/sec/user"), ("input_sequence_length", "tokens"),
           ("output_sequence_length", "tokens"))
_SLOT = "<records: written by _records_text>"  # stands for the records in the json.dumps of the rest


def _stats(x: np.ndarray, unit: str) -> dict:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"unit": unit, "count": 0}
    out = {"unit": unit, "avg": float(x.mean()), "min": float(x.min()), "max": float(x.max())}
    out.update({f"p{p}": float(v) for p, v in zip(_PCTS, np.percentile(x, _PCTS), strict=True)})
    out.update(std=float(x.std(ddof=1)) if x.size > 1 else 0.0, count=int(x.size), sum=float(x.sum()))
    return out


def aiperf_metrics(calls, with_records: bool = True) -> dict:
    """AIPerf-shaped metrics dict of a run's per-call table (``SimResult.calls``; module docstring)."""
    out, cols = _metrics(calls)
    if with_records:
        recs = []
        for i, (cid, sid, lane) in enumerate(zip(calls["call_id"], calls["session_id"], calls["lane"], strict=True)):
            m = {tag: {"value": float(cols[tag][i]), "unit": unit} for tag, unit in _RECORD
                 if math.isfinite(float(cols[tag][i]))}
            recs.append({"metadata": {"session_id": str(sid), "call_id": str(cid), "lane": int(lane)}, "metrics": m})
        out["records"] = recs
    return out


def _metrics(calls) -> tuple[dict, dict[str, np.ndarray]]:
    """`aiperf_metrics` without ``records``, and the per-call columns of the records (float64, by tag)."""
    tpot = calls["tpot_s"].to_numpy(dtype=float)
    cols = {
        "time_to_first_token": calls["ttft_s"].to_numpy(dtype=float) * 1e3,
        "request_latency": calls["e2e_s"].to_numpy(dtype=float) * 1e3,
        "inter_token_latency": tpot * 1e3,
        "output_token_throughput_per_user": np.where(tpot > 0, 1.0 / np.where(tpot > 0, tpot, 1.0), np.nan),
        "input_sequence_length": calls["input_tokens"].to_numpy(dtype=float),
        "output_sequence_length": calls["output_tokens"].to_numpy(dtype=float),
    }
    out: dict = {"schema": "optsched.aiperf_metrics/v1", "aiperf_schema_version": "1.5"}
    for tag, unit in _RECORD:
        out[tag] = _stats(cols[tag], unit)
    n = len(calls)
    dur = float(calls["finish_s"].max() - calls["release_s"].min()) if n else 0.0
    tin, tout = float(cols["input_sequence_length"].sum()), float(cols["output_sequence_length"].sum())
    out["request_count"] = {"unit": "requests", "avg": float(n)}
    out["benchmark_duration"] = {"unit": "sec", "avg": dur}
    out["total_isl"] = {"unit": "tokens", "avg": tin}
    out["total_output_tokens"] = {"unit": "tokens", "avg": tout}
    if dur > 0:
        out["request_throughput"] = {"unit": "requests/sec", "avg": n / dur}
        out["output_token_throughput"] = {"unit": "tokens/sec", "avg": tout / dur}
        out["total_token_throughput"] = {"unit": "tokens/sec", "avg": (tin + tout) / dur}
    return out, cols


def _records_text(calls, cols: dict[str, np.ndarray]) -> str:
    """The text ``json.dumps(..., sort_keys=True, indent=1)`` writes for `aiperf_metrics`'s ``records`` list
    as a top-level value (items at two spaces), built from one template per record: with ``indent`` set,
    ``json`` encodes in pure Python, 1.2 s of a 19k-call file. Same leaf encoders as ``json``
    (``encode_basestring_ascii``, ``float.__repr__``, ``int.__repr__``), keys in sorted order; the records hold
    finite values only. Equality with ``json`` is tested (``tests/sim/test_aiperf_writer.py``)."""
    if len(calls) == 0:
        return "[]"
    heads = [(f'\n    {_enc(tag)}: {{\n     "unit": {_enc(unit)},\n     "value": ', cols[tag].tolist())
             for tag, unit in sorted(_RECORD)]
    isfinite, frepr = math.isfinite, float.__repr__
    parts = []
    for i, (cid, sid, lane) in enumerate(zip(calls["call_id"], calls["session_id"], calls["lane"], strict=True)):
        m = [head + frepr(v[i]) + "\n    }" for head, v in heads if isfinite(v[i])]
        parts.append('\n  {\n   "metadata": {\n    "call_id": ' + _enc(str(cid)) + ',\n    "lane": ' + int.__repr__(int(lane))
                     + ',\n    "session_id": ' + _enc(str(sid)) + '\n   },\n   "metrics": '
                     + ("{" + ",".join(m) + "\n   }" if m else "{}") + "\n  }")
    return "[" + ",".join(parts) + "\n ]"


def write_aiperf_metrics(calls, path: str | Path) -> Path:
    """Write :func:`aiperf_metrics` of ``calls`` as JSON (sorted keys; same run -> same bytes): exactly
    ``json.dumps(aiperf_metrics(calls), sort_keys=True, indent=1) + "\\n"``, the records written by
    `_records_text`."""
    path = Path(path)
    out, cols = _metrics(calls)
    out["records"] = _SLOT
    text = json.dumps(out, sort_keys=True, indent=1)
    path.write_text(text.replace(json.dumps(_SLOT), _records_text(calls, cols), 1) + "\n")
    return path
