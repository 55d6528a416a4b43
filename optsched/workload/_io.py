"""Shared reading helpers for the trace loaders: JSONL lines with 1-based line numbers, the documented
stable re-sort of unsorted timestamps (with a warning naming the file and line), and warnings attributed
to the caller's code rather than to this package."""

from __future__ import annotations

import gzip
import json
import logging
import sys
import warnings
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from optsched.workload.errors import TraceFormatError, TraceOrderWarning
from optsched.workload.limits import MAX_JSON_DEPTH

__all__ = [
    "JSON_DEPTH_EXCEEDED",
    "iter_jsonl_objects",
    "iter_text_lines",
    "json_depth",
    "json_hint",
    "loads_limited",
    "open_trace",
    "read_json_document",
    "resort",
    "sorted_order",
    "trace_stem",
    "trace_suffix",
    "warn_caller",
]

log = logging.getLogger(__name__)
_PKG_DIR = str(Path(__file__).resolve().parent)


def warn_caller(warning: Warning) -> None:
    """``warnings.warn(warning)`` attributed to the first calling frame outside ``optsched/workload/``
    (so the location shown is the user's call, not a loader's internals)."""
    frame, level = sys._getframe(0), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PKG_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(warning, stacklevel=level)


GZIP_MAGIC = b"\x1f\x8b"

# the value of `loads_limited` for a text nested too deep (a ValueError subclass, never a RecursionError)
JSON_DEPTH_EXCEEDED = "JSON nested deeper than MAX_JSON_DEPTH"


def json_depth(value: object) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0, ``[]`` and ``{}`` are 1), computed without
    recursion."""
    depth, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = v.values()
        elif not isinstance(v, list):
            continue
        depth = max(depth, d)
        stack.extend((x, d + 1) for x in v if isinstance(x, (dict, list)))
    return depth


class _DuplicateKey(ValueError):
    """A JSON object that names one key twice (raised by `_unique_keys`)."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object as a dict; a key given twice raises ``ValueError`` naming it (``json.loads`` would keep
    the last value silently, so ``{"timestamp": 0, "timestamp": 5}`` would load as 5)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _DuplicateKey(f"each key once per JSON object, got {dup!r} twice")
    return out


def loads_limited(text: str | bytes) -> object:
    """``json.loads(text)`` for untrusted input: a value nested deeper than
    `optsched.workload.limits.MAX_JSON_DEPTH` and a number the parser refuses (an integer of more than
    4,300 digits) raise ``ValueError`` with a clear message instead of ``RecursionError`` (or a later
    ``repr`` failure); a key given twice in one object raises ``ValueError`` naming it. Malformed JSON raises
    ``json.JSONDecodeError`` (a ValueError) as ``json.loads`` does.
    """
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise ValueError(f"{JSON_DEPTH_EXCEEDED} ({MAX_JSON_DEPTH} levels)") from None
    except (json.JSONDecodeError, _DuplicateKey):
        raise
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise ValueError(f"a number the JSON parser refuses ({str(exc).split(';')[0]})") from None
    # cheap test first: a text with fewer brackets than the limit cannot nest deeper
    t = text if isinstance(text, str) else text.decode("utf-8", "replace")
    if t.count("[") + t.count("{") > MAX_JSON_DEPTH and json_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"{JSON_DEPTH_EXCEEDED} ({MAX_JSON_DEPTH} levels)")
    return value


def trace_suffix(path: str | Path) -> str:
    """The format suffix of a trace file, lower case, ignoring a trailing ``.gz`` (``a.jsonl.gz`` ->
    ``.jsonl``)."""
    p = Path(path)
    if p.suffix.lower() == ".gz":
        p = p.with_suffix("")
    return p.suffix.lower()


def trace_stem(path: str | Path) -> str:
    """The file name without its format suffix and a trailing ``.gz`` (``a.jsonl.gz`` -> ``a``): the
    default workload name."""
    p = Path(path)
    if p.suffix.lower() == ".gz":
        p = p.with_suffix("")
    return p.stem


def open_trace(path: str | Path) -> BinaryIO:
    """Open a trace file for binary reading; gzip-compressed files (recognised by their magic bytes
    ``1f 8b``, whatever the name) are decompressed on the fly. The one opener of every loader.

    Raises:
        FileNotFoundError: the file does not exist.
        TraceFormatError: a gzip file that is corrupt or truncated (raised while reading).
    """
    path = Path(path)
    if path.exists() and not path.is_file() and not path.is_dir():
        # a FIFO, socket or device: reading could block forever or never end
        raise TraceFormatError(path, 0, "a regular file (this is a FIFO, socket or device)")
    fh = path.open("rb")
    if fh.read(2) == GZIP_MAGIC:
        fh.close()
        return _GzipLines(path)
    fh.seek(0)
    return fh


class _GzipLines(gzip.GzipFile):
    """``gzip.GzipFile`` whose read errors name the file (a truncated or corrupt ``.gz``)."""

    def __init__(self, path: Path) -> None:
        super().__init__(filename=str(path), mode="rb")
        self._path = path

    def __iter__(self) -> Iterator[bytes]:
        n = 0
        while True:
            try:
                line = self.readline()
            except (OSError, EOFError, zlib.error) as exc:
                raise TraceFormatError(self._path, n + 1, "a complete gzip stream", str(exc)) from None
            if not line:
                return
            n += 1
            yield line


def iter_text_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for each line of a UTF-8 file, plain or gzip-compressed
    (`open_trace`) (1-based, line ending kept; a leading UTF-8 byte-order mark is dropped). Decoding
    line by line, so a bad byte is reported at its line.

    Raises:
        FileNotFoundError: the file does not exist.
        TraceFormatError: a line that is not valid UTF-8 (e.g. a binary file given as a trace).
    """
    path = Path(path)
    with open_trace(path) as fh:
        for n, raw in enumerate(fh, start=1):
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield n, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TraceFormatError(
                    path, n, "UTF-8 text (is this a trace file?)",
                    f"byte 0x{raw[exc.start]:02x} at column {exc.start + 1}") from None


def read_json_document(path: str | Path) -> object:
    """The whole file as one JSON value, read through the shared opener (gzip-aware `open_trace`);
    ``json.JSONDecodeError`` when it is not one document (e.g. JSON lines).

    Raises:
        TraceFormatError: not UTF-8, or a corrupt gzip stream.
    """
    path = Path(path)
    with open_trace(path) as fh:
        try:
            raw = fh.read()
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(path, 0, "a complete gzip stream", str(exc)) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, 0, "UTF-8 text (is this a trace file?)", f"byte at offset {exc.start}") from None
    try:
        return loads_limited(text)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        raise TraceFormatError(path, 0, f"one JSON document ({exc})") from None


def json_hint(line: str, exc: json.JSONDecodeError) -> str:
    """The decoder's message, plus a hint when ``line`` looks like the start of a pretty-printed JSON
    document (traces are JSON Lines: one whole object per line)."""
    if line.strip() in ("{", "["):
        return f"{exc.msg}; a multi-line JSON document? traces are JSON Lines, one whole object per line"
    return exc.msg


def _head(line: str) -> str:
    """The start of a long line, for an error message."""
    s = line.strip()
    return s if len(s) <= 80 else s[:80] + "..."


def iter_jsonl_objects(path: str | Path, allow_empty: bool = False) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each line of a JSON-lines file (line numbers 1-based).

    Blank lines at the end of the file (after the last record) are accepted, as editors and ``echo``
    leave them; a blank line followed by a record is an error.

    Raises:
        FileNotFoundError: the file does not exist.
        TraceFormatError: a line that is not UTF-8 or not valid JSON, a line that is not a JSON object
            (a blank line between records included: nothing is skipped silently), or an empty file
            (no record) unless ``allow_empty``.
    """
    path = Path(path)
    n = 0
    blank = 0  # first blank line since the last record
    records = 0
    for n, line in iter_text_lines(path):
        if not line.strip():
            blank = blank or n
            continue
        if blank:
            raise TraceFormatError(path, blank, "one JSON object per line, got a blank line")
        records += 1
        try:
            obj = loads_limited(line)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(path, n, f"one JSON object per line ({json_hint(line, exc)})",
                                   _head(line)) from None
        except ValueError as exc:
            raise TraceFormatError(path, n, f"one JSON object per line ({exc})") from None
        if not isinstance(obj, dict):
            raise TraceFormatError(path, n, "a JSON object", _head(line))
        yield n, obj
    if records == 0 and not allow_empty:
        raise TraceFormatError(path, 0, "at least one record (the file is empty)")


def resort(times: Sequence[float], lines: Sequence[int] | None = None) -> tuple[list[int], tuple[int, int] | None]:
    """``(order, bad)``: indices that order ``times`` ascending with a stable sort (equal times keep file
    order), and ``bad = (line, previous_line)``: the 1-based file line of the first record earlier than
    its predecessor and that predecessor's line (``lines[i]`` is the line of record ``i``, default
    ``i + 1``), or None when already sorted."""
    i = next((i for i in range(1, len(times)) if times[i] < times[i - 1]), None)
    if i is None:
        return list(range(len(times))), None
    ln = lines if lines is not None else range(1, len(times) + 1)
    return sorted(range(len(times)), key=times.__getitem__), (int(ln[i]), int(ln[i - 1]))


def sorted_order(times: Sequence[float], path: str | Path, what: str = "timestamp",
                 lines: Sequence[int] | None = None) -> list[int]:
    """Indices that order ``times`` ascending, stable (equal times keep file order).

    Unsorted input is not an error: the records are re-sorted with this stable sort and one
    :class:`~optsched.workload.errors.TraceOrderWarning` (a ``UserWarning``) names the file and the first
    out-of-order line (``lines[i]`` is the 1-based file line of record ``i``; default ``i + 1``, right
    for JSONL), e.g. ``m.jsonl:2: timestamps are not sorted (line 2 is earlier than line 1); ...``.
    """
    order, bad = resort(times, lines)
    if bad is not None:
        msg = (f"{path}:{bad[0]}: {what}s are not sorted (line {bad[0]} is earlier than line {bad[1]}); "
               f"re-sorted by {what} with a stable sort (equal {what}s keep file order)")
        log.debug(msg)
        warn_caller(TraceOrderWarning(msg, ((str(path), bad[0]),)))
    return order
