"""Shared reading helpers for the trace loaders: JSONL lines with 1-based line numbers, and the
documented stable re-sort of unsorted timestamps (with a warning naming the file)."""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

from optsched.workload.errors import TraceFormatError

__all__ = ["iter_jsonl_objects", "sorted_order"]

log = logging.getLogger(__name__)


def iter_jsonl_objects(path: str | Path, allow_empty: bool = False) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each line of a JSON-lines file (line numbers 1-based).

    Raises:
        FileNotFoundError: the file does not exist.
        TraceFormatError: a line that is not valid JSON, a line that is not a JSON object (blank lines
            included: nothing is skipped silently), or an empty file unless ``allow_empty``.
    """
    path = Path(path)
    n = 0
    with path.open("r", encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceFormatError(path, n, f"one JSON object per line ({exc.msg})", line.strip()) from None
            if not isinstance(obj, dict):
                raise TraceFormatError(path, n, "a JSON object", obj)
            yield n, obj
    if n == 0 and not allow_empty:
        raise TraceFormatError(path, 0, "at least one record (the file is empty)")


def sorted_order(times: Sequence[float], path: str | Path, what: str = "timestamp",
                 lines: Sequence[int] | None = None) -> list[int]:
    """Indices that order ``times`` ascending, stable (equal times keep file order).

    Unsorted input is not an error: the records are re-sorted with this stable sort and a
    ``UserWarning`` names the file and the first out-of-order line (``lines[i]`` is the 1-based file
    line of record ``i``; default ``i + 1``, right for JSONL).
    """
    first_bad = next((i for i in range(1, len(times)) if times[i] < times[i - 1]), None)
    if first_bad is None:
        return list(range(len(times)))
    ln = lines if lines is not None else range(1, len(times) + 1)
    msg = (
        f"{path}:{ln[first_bad]}: {what}s are not sorted (line {ln[first_bad]} is earlier than line "
        f"{ln[first_bad - 1]}); re-sorted by {what} with a stable sort (equal {what}s keep file order)"
    )
    warnings.warn(msg, stacklevel=3)
    log.debug(msg)
    return sorted(range(len(times)), key=times.__getitem__)
