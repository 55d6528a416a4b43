"""One format per file: the keys that mark a JSONL row as one trace format, and the check every JSONL
loader runs on each row (a row of another format inside a file is an error naming the line and both
formats, never a silently dropped field)."""

from __future__ import annotations

from pathlib import Path

from optsched.workload.errors import TraceFormatError

__all__ = ["check_row_format", "row_formats"]

# format -> keys only rows of that format (or a format that extends it) carry; in reporting order
MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("native", ("format", "call_id", "calls")),
    ("agentic-mooncake", ("request_id", "wait_for", "tool_wait_ms", "tool_events", "branches", "prefix_reset")),
    ("weka", ("requests",)),
    ("lmcache", ("input", "output")),
    ("mooncake-sessions", ("session_id", "delay", "delay_ms")),
    ("mooncake", ("input_length", "output_length", "hash_ids")),
)
# file format -> row formats its loader reads in full (an extension's rows carry the base format's keys)
ALLOWED: dict[str, frozenset[str]] = {
    "native": frozenset({"native"}),
    "mooncake": frozenset({"mooncake"}),
    "mooncake-sessions": frozenset({"mooncake", "mooncake-sessions"}),
    "agentic-mooncake": frozenset({"mooncake", "mooncake-sessions", "agentic-mooncake"}),
    "lmcache": frozenset({"lmcache", "mooncake-sessions"}),  # LMCache rows carry session_id
}


def row_formats(obj: dict) -> list[tuple[str, str]]:
    """``[(format, key), ...]``: each format whose marker key ``obj`` carries (first such key), in
    `MARKERS` order."""
    out = []
    for fmt, keys in MARKERS:
        key = next((k for k in keys if k in obj), None)
        if key is not None:
            out.append((fmt, key))
    return out


def check_row_format(obj: dict, fmt: str, path: str | Path, line: int) -> None:
    """Raise when row ``obj`` (at ``line``) carries a key of a format the ``fmt`` loader does not read.

    Raises:
        TraceFormatError: naming the line, the file's format and the row's format with the key that marks it,
            e.g. ``t.jsonl:7: expected a mooncake row (one format per file), got an agentic-mooncake row
            (key 'wait_for')``.
    """
    allowed = ALLOWED[fmt]
    for other, key in row_formats(obj):
        if other not in allowed:
            article = "an" if other[0] in "aeiou" else "a"
            raise TraceFormatError(path, line, f"a {fmt} row (one format per file, as line 1 and the loader say); "
                                               f"got {article} {other} row (key {key!r})")
