"""Trace-input errors that name the file, the 1-based line and what was expected.

Every loader in ``optsched.workload`` reports bad input through :class:`TraceFormatError` (a
``ValueError``, so the CLI prints it as one clean line) and never drops a record silently.
"""

from __future__ import annotations

import math
from pathlib import Path

__all__ = ["TraceFormatError", "TraceOrderWarning", "require_int", "require_number"]


class TraceFormatError(ValueError):
    """Bad trace input.

    Attributes:
        path: the file (str).
        line: 1-based line number (CSV: the physical line, header = line 1), or 0 for the whole file.
        expected: what the loader expected there.
    """

    def __init__(self, path: str | Path, line: int, expected: str, got: object = None) -> None:
        self.path = str(path)
        self.line = int(line)
        self.expected = expected
        where = f"{self.path}:{self.line}" if self.line > 0 else self.path
        msg = f"{where}: expected {expected}"
        if got is not None:
            text = repr(got)
            msg += f", got {text[:80] + '...' if len(text) > 80 else text}"
        super().__init__(msg)


class TraceOrderWarning(UserWarning):
    """Records were not in time order and were re-sorted with a stable sort (not an error).

    Attributes:
        unsorted: ``((file, line), ...)``: for each re-sorted file, its first out-of-order 1-based line.
        files: number of files loaded (so ``len(unsorted)`` of ``files`` were unsorted).
    """

    def __init__(self, message: str, unsorted: tuple[tuple[str, int], ...] = (), files: int = 1) -> None:
        super().__init__(message)
        self.unsorted = tuple(unsorted)
        self.files = int(files)


def _range(minimum: float, maximum: float | None, value: object = None) -> str:
    """``">= minimum"``, or ``"<= maximum (...)"`` when ``value`` is a number above ``maximum``."""
    if maximum is None or not isinstance(value, (int, float)) or not value > maximum:
        return f">= {minimum}"
    top = f"{int(maximum):,}" if float(maximum).is_integer() and maximum < 1e9 else f"{maximum:g}"
    return f"<= {top} (the plausibility limit, optsched.workload.limits)"


def require_int(value: object, field: str, path: str | Path, line: int, minimum: int = 0,
                maximum: float | None = None) -> int:
    """``value`` as an int >= ``minimum`` (and <= ``maximum`` when given); integral floats (``12.0``) are
    accepted.

    Raises:
        TraceFormatError: missing (None), non-numeric, non-integral, below ``minimum`` or above ``maximum``.
    """
    if value is None:
        raise TraceFormatError(path, line, f"field {field!r} (an integer >= {minimum})", "missing")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceFormatError(path, line, f"field {field!r} to be an integer >= {minimum}", value)
    if value < minimum or (maximum is not None and value > maximum):
        raise TraceFormatError(path, line, f"field {field!r} to be an integer {_range(minimum, maximum, value)}", value)
    if isinstance(value, float):
        if not value.is_integer():
            raise TraceFormatError(path, line, f"field {field!r} to be an integer >= {minimum}", value)
        value = int(value)
    return value


def require_number(value: object, field: str, path: str | Path, line: int, minimum: float = 0.0,
                   maximum: float | None = None) -> float:
    """``value`` as a finite float >= ``minimum`` (and <= ``maximum`` when given).

    Raises:
        TraceFormatError: missing, non-numeric, NaN/inf, below ``minimum`` or above ``maximum``.
    """
    if value is None:
        raise TraceFormatError(path, line, f"field {field!r} (a number >= {minimum})", "missing")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceFormatError(path, line, f"field {field!r} to be a number >= {minimum}", value)
    try:
        value = float(value)
    except OverflowError:  # an int too large for a float (10**400)
        raise TraceFormatError(path, line, f"field {field!r} to be a finite number {_range(minimum, maximum, 1e309)}",
                               value) from None
    if not math.isfinite(value) or value < minimum or (maximum is not None and value > maximum):
        shown = value if math.isfinite(value) else None
        raise TraceFormatError(path, line, f"field {field!r} to be a finite number {_range(minimum, maximum, shown)}",
                               value)
    return value
