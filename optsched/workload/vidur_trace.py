"""Loader for Vidur's processed request traces (CSV).

Source: ``data/processed_traces/*.csv`` of ``microsoft/vidur`` (Agrawal et al., "Vidur: A Large-Scale
Simulation Framework for LLM Inference", MLSys 2024); see ``shared/data/vidur/SOURCE.md``.
Columns: ``num_prefill_tokens``, ``num_decode_tokens`` (tokens), optional ``arrived_at`` (s since the
first request; splitwise traces), optional ``num_total_tokens`` (checked = prefill + decode) and
``pd_ratio`` (ignored: derived).

Arrivals for lengths-only traces (arxiv, sharegpt): the file has no times. By default every call gets
``arrival_s = None`` and its session ``start_s = 0.0`` (an offline batch, all released at t = 0). Pass
``rate_per_s`` and ``rng`` to draw Poisson arrivals instead: gaps ~ Exponential(mean 1/rate_per_s) from
``rng``, cumulated from t = 0 in file order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from optsched.workload._csv import float_cell, int_cell, iter_csv_rows
from optsched.workload._io import sorted_order, trace_stem
from optsched.workload.errors import TraceFormatError
from optsched.workload.types import Call, Session, Workload

__all__ = ["load_vidur_trace"]


def load_vidur_trace(
    path: str | Path,
    rate_per_s: float | None = None,
    rng: np.random.Generator | None = None,
    name: str | None = None,
) -> Workload:
    """Load a Vidur processed trace as an open-loop workload (one call per row, each its own session).

    Args:
        path: CSV file.
        rate_per_s: Poisson arrival rate (requests/s) for files without ``arrived_at``; requires ``rng``.
            Ignored (error) when the file has ``arrived_at``.
        rng: generator for the Poisson gaps.

    Raises:
        FileNotFoundError: missing file.
        TraceFormatError: empty file, missing column, non-numeric / negative cell, decode tokens < 1,
            ``num_total_tokens`` != prefill + decode.
        ValueError: ``rate_per_s`` without ``rng``, not > 0, or given for a file that has ``arrived_at``.
    """
    path = Path(path)
    rows: list[tuple[int, float | None, int, int]] = []
    has_time = None
    for line, row in iter_csv_rows(path, ("num_prefill_tokens", "num_decode_tokens")):
        if has_time is None:
            has_time = "arrived_at" in row
        t = float_cell(row, "arrived_at", path, line) if has_time else None
        p = int_cell(row, "num_prefill_tokens", path, line)
        d = int_cell(row, "num_decode_tokens", path, line, minimum=1)
        if "num_total_tokens" in row and int_cell(row, "num_total_tokens", path, line) != p + d:
            raise TraceFormatError(path, line, f"num_total_tokens = prefill + decode = {p + d}", row["num_total_tokens"])
        rows.append((line, t, p, d))
    if rate_per_s is not None:
        if has_time:
            raise ValueError(f"{path}: has arrived_at; rate_per_s must not be given")
        if rng is None or not (rate_per_s > 0):
            raise ValueError(f"rate_per_s must be > 0 and needs rng, got rate_per_s={rate_per_s!r}, rng={rng!r}")
        times = np.cumsum(rng.exponential(1.0 / rate_per_s, size=len(rows)))
        times = (times - times[0]).tolist()  # first request at t = 0, as in the splitwise files
        rows = [(ln, times[i], p, d) for i, (ln, _, p, d) in enumerate(rows)]
    order = sorted_order([r[1] for r in rows], path, "arrived_at", [r[0] for r in rows]) if rows[0][1] is not None else range(len(rows))
    sessions = []
    for i in order:
        line, t, p, d = rows[i]
        cid = f"L{line}"
        sessions.append(Session(cid, (Call(cid, cid, p, d, arrival_s=t),), start_s=t if t is not None else 0.0))
    return Workload(name or trace_stem(path), tuple(sessions), closed_loop=False, source=str(path))
