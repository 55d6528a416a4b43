"""Loader for the Azure LLM inference trace 2023 (Splitwise) CSVs.

Source: Patel et al., "Splitwise: Efficient generative LLM inference using phase splitting", ISCA 2024;
files ``data/AzureLLMInferenceTrace_{code,conv}.csv`` of ``Azure/AzurePublicDataset`` (see
``shared/data/azure_llm_2023/SOURCE.md``). Columns: ``TIMESTAMP`` (wall clock, no timezone, up to 7
fractional digits), ``ContextTokens`` (prompt tokens), ``GeneratedTokens`` (output tokens).
"""

from __future__ import annotations

import calendar
import re
from pathlib import Path

from optsched.workload._csv import int_cell, iter_csv_rows
from optsched.workload._io import sorted_order, trace_stem
from optsched.workload.errors import TraceFormatError
from optsched.workload.limits import check_call
from optsched.workload.types import Call, Session, Workload

__all__ = ["load_azure", "parse_azure_timestamp_ticks"]

_TS = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$")
TICKS_PER_S = 10**9  # timestamps are kept as integer nanoseconds so that differences are exact


def parse_azure_timestamp_ticks(text: str) -> int | None:
    """``"2023-11-16 18:17:03.9799600"`` -> integer nanoseconds since the Unix epoch (read as UTC),
    or None if the text does not match ``YYYY-MM-DD HH:MM:SS[.fraction]``."""
    m = _TS.match(text.strip())
    if m is None:
        return None
    y, mo, d, h, mi, s, frac = m.groups()
    secs = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s), 0, 0, 0))
    frac_ns = int((frac or "0").ljust(9, "0"))
    return secs * TICKS_PER_S + frac_ns


def load_azure(path: str | Path, name: str | None = None) -> Workload:
    """Load an Azure 2023 LLM inference CSV as an open-loop workload (one call per row, each its own
    session; the trace has no session ids and no prefix hashes).

    ``arrival_s`` = seconds since the earliest ``TIMESTAMP`` (exact integer-nanosecond differences);
    ``input_tokens = ContextTokens``; ``output_tokens = GeneratedTokens``. Call id ``"L<line>"``.
    Unsorted timestamps are re-sorted (stable) with a warning naming the file.

    Raises:
        FileNotFoundError: missing file.
        TraceFormatError: empty file, missing column, a malformed TIMESTAMP, a non-numeric or negative
            token cell, ``GeneratedTokens`` < 1 (names file, line and column).
    """
    path = Path(path)
    rows: list[tuple[int, int, int, int]] = []
    for line, row in iter_csv_rows(path, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")):
        ticks = parse_azure_timestamp_ticks(row["TIMESTAMP"])
        if ticks is None:
            raise TraceFormatError(path, line, "column 'TIMESTAMP' like 2023-11-16 18:17:03.9799600", row["TIMESTAMP"])
        inp = int_cell(row, "ContextTokens", path, line)
        out = int_cell(row, "GeneratedTokens", path, line, minimum=1)
        rows.append((line, ticks, inp, out))
    order = sorted_order([r[1] for r in rows], path, "TIMESTAMP", [r[0] for r in rows])
    t0 = min(r[1] for r in rows)
    sessions = []
    for i in order:
        line, ticks, inp, out = rows[i]
        cid = f"L{line}"
        t = (ticks - t0) / TICKS_PER_S
        c = Call(cid, cid, inp, out, arrival_s=t)
        check_call(c, path, line)
        sessions.append(Session(cid, (c,), start_s=t))
    return Workload(name or trace_stem(path), tuple(sessions), closed_loop=False, source=str(path))
