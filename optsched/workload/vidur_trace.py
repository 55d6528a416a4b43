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

import gc
import zlib
from pathlib import Path

import numpy as np

from optsched.workload._csv import float_cell, int_cell, iter_csv_rows
from optsched.workload._io import open_trace, sorted_order, trace_stem
from optsched.workload.errors import TraceFormatError
from optsched.workload.limits import MAX_CALL_TOKENS, MAX_TIME_S, check_call
from optsched.workload.types import Call, Session, Workload

__all__ = ["load_vidur_trace"]

_REQUIRED = ("num_prefill_tokens", "num_decode_tokens")
_FAST = True  # `_fast_rows` first (tests switch it off to compare with the reference `_rows`)


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
    rows = (_fast_rows(path) if _FAST else None) or _rows(path)
    has_time = rows[0][1] is not None
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
    # 2 objects a row, none in a cycle: the cyclic collector's passes over them (~0.1 s for 19k rows, each
    # pass rescanning what was built so far) find nothing; paused, reference counting frees them as ever
    was_on = gc.isenabled()
    gc.disable()
    try:
        for i in order:
            line, t, p, d = rows[i]
            cid = f"L{line}"
            c = Call(cid, cid, p, d, arrival_s=t)
            if p > MAX_CALL_TOKENS or d > MAX_CALL_TOKENS or (t is not None and t > MAX_TIME_S):
                check_call(c, path, line)
            sessions.append(Session(cid, (c,), start_s=t if t is not None else 0.0))
    finally:
        if was_on:
            gc.enable()
    return Workload(name or trace_stem(path), tuple(sessions), closed_loop=False, source=str(path))


def _rows(path: Path) -> list[tuple[int, float | None, int, int]]:
    """``(line, arrived_at or None, prefill, decode)`` per data row: the reference reader (csv module,
    every cell checked by `float_cell` / `int_cell`; the errors of `load_vidur_trace`)."""
    rows: list[tuple[int, float | None, int, int]] = []
    has_time = None
    for line, row in iter_csv_rows(path, _REQUIRED):
        if has_time is None:
            has_time = "arrived_at" in row
        t = float_cell(row, "arrived_at", path, line) if has_time else None
        p = int_cell(row, "num_prefill_tokens", path, line)
        d = int_cell(row, "num_decode_tokens", path, line, minimum=1)
        if "num_total_tokens" in row and int_cell(row, "num_total_tokens", path, line) != p + d:
            raise TraceFormatError(path, line, f"num_total_tokens = prefill + decode = {p + d}", row["num_total_tokens"])
        rows.append((line, t, p, d))
    return rows


def _fast_rows(path: Path) -> list[tuple[int, float | None, int, int]] | None:
    """`_rows` for a plain file (~4x faster: the whole text split on newlines and commas, cells converted by
    ``float`` / ``int`` directly), or None when the file is anything but plain: not UTF-8, a quote, CR, NUL,
    blank line or ragged row, a missing or repeated column, a cell ``int`` / ``float`` refuse or out of range (an
    integral float such as ``12.0``, NaN, inf). `_rows` then reads it, so results and errors are exactly the
    reference's (``tests/workload/test_vidur_fast.py``). ``float`` and ``int`` strip whitespace as
    ``float_cell`` / ``int_cell`` do; without quotes the csv module splits a line on commas."""
    with open_trace(path) as fh:
        try:
            raw = fh.read()
        except (OSError, EOFError, zlib.error):
            return None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    if '"' in text or "\r" in text or "\x00" in text:
        return None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        return None
    header = [h.strip() for h in lines[0].split(",")]
    if any(c not in header for c in _REQUIRED) or len(set(header)) != len(header):
        return None  # a repeated name: the reference's dict keeps that name's LAST cell, `index` finds the first
    width = len(header)
    ip, idc = header.index("num_prefill_tokens"), header.index("num_decode_tokens")
    it = header.index("arrived_at") if "arrived_at" in header else -1
    itot = header.index("num_total_tokens") if "num_total_tokens" in header else -1
    inf = float("inf")
    rows: list[tuple[int, float | None, int, int]] = []
    append = rows.append
    try:
        for line, text_row in enumerate(lines[1:], start=2):
            cells = text_row.split(",")
            if len(cells) != width:
                return None
            p, d = int(cells[ip]), int(cells[idc])
            t = float(cells[it]) if it >= 0 else None
            if p < 0 or d < 1 or (t is not None and not (0.0 <= t < inf)) or (itot >= 0 and int(cells[itot]) != p + d):
                return None
            append((line, t, p, d))
    except ValueError:
        return None
    return rows
