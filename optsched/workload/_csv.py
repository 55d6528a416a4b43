"""CSV reading helper: rows as dicts with 1-based physical line numbers and clear cell errors."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from optsched.workload._io import iter_text_lines
from optsched.workload.errors import TraceFormatError

__all__ = ["float_cell", "int_cell", "iter_csv_rows"]


def iter_csv_rows(path: str | Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line_number, row)`` for each data row (header is line 1, first data row line 2).

    Raises:
        FileNotFoundError: missing file.
        TraceFormatError: empty file, no data rows, a missing required column, a blank line, a row whose
            cell count differs from the header's, a line that is not UTF-8 (a leading BOM is dropped), or a
            line the csv module refuses (``csv.Error``: a CR inside an unquoted field, e.g. CR-only line
            endings; a field over ``csv.field_size_limit()``).
    """
    path = Path(path)
    reader = csv.reader(line for _, line in iter_text_lines(path))
    header = _next_row(reader, path)
    if header is None:
        raise TraceFormatError(path, 0, f"a CSV header with columns {', '.join(required)} (the file is empty)")
    header = [h.strip() for h in header]
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceFormatError(path, 1, f"header columns {', '.join(required)}", f"missing {', '.join(missing)}")
    n = 0
    while (row := _next_row(reader, path)) is not None:
        n += 1
        line = reader.line_num
        if not row:
            raise TraceFormatError(path, line, f"{len(header)} cells ({', '.join(header)}), got a blank line")
        if len(row) != len(header):
            raise TraceFormatError(path, line, f"{len(header)} cells ({', '.join(header)})", row)
        yield line, dict(zip(header, row))
    if n == 0:
        raise TraceFormatError(path, 0, "at least one data row after the header")


def _next_row(reader, path: Path) -> list[str] | None:
    """The reader's next row (None at the end), its ``csv.Error`` as a `TraceFormatError` at its line."""
    try:
        return next(reader, None)
    except csv.Error as exc:
        raise TraceFormatError(path, reader.line_num, "CSV text (one row per LF or CRLF line)", str(exc)) from None


def int_cell(row: dict[str, str], col: str, path: str | Path, line: int, minimum: int = 0) -> int:
    """Cell ``col`` as an int >= ``minimum`` (integral floats like ``"12.0"`` accepted).

    Raises:
        TraceFormatError: non-numeric, non-integral or too small (names file, line and column).
    """
    text = row[col].strip()
    try:
        value = int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            raise TraceFormatError(path, line, f"column {col!r} to be an integer >= {minimum}", text) from None
        if not f.is_integer():
            raise TraceFormatError(path, line, f"column {col!r} to be an integer >= {minimum}", text) from None
        value = int(f)
    if value < minimum:
        raise TraceFormatError(path, line, f"column {col!r} to be an integer >= {minimum}", text)
    return value


def float_cell(row: dict[str, str], col: str, path: str | Path, line: int, minimum: float = 0.0) -> float:
    """Cell ``col`` as a finite float >= ``minimum``.

    Raises:
        TraceFormatError: non-numeric, NaN/inf or too small.
    """
    text = row[col].strip()
    try:
        value = float(text)
    except ValueError:
        raise TraceFormatError(path, line, f"column {col!r} to be a number >= {minimum}", text) from None
    if not (value >= minimum) or value == float("inf"):
        raise TraceFormatError(path, line, f"column {col!r} to be a finite number >= {minimum}", text)
    return value
