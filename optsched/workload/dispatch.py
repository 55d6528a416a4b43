"""``load_any(path)``: pick the right loader from the file extension and its first line."""

from __future__ import annotations

import json
from pathlib import Path

from optsched.workload.errors import TraceFormatError
from optsched.workload.types import Workload

__all__ = ["detect_format", "load_any"]

_KNOWN = "native session JSONL, Mooncake JSONL, LMCache agent JSONL (file or directory), Azure 2023 CSV, Vidur CSV"


def detect_format(path: str | Path) -> str:
    """One of ``"native"``, ``"mooncake"``, ``"lmcache"``, ``"azure"``, ``"vidur"``.

    Rules: a directory is an LMCache agent-trace folder; ``.jsonl``/``.json`` files are told apart by the
    keys of their first line (``format`` -> native, ``hash_ids``/``input_length`` -> Mooncake,
    ``input``+``timestamp`` -> LMCache; an empty ``.jsonl`` is taken as an LMCache session file);
    ``.csv`` files by their header (``TIMESTAMP`` -> Azure, ``num_prefill_tokens`` -> Vidur).

    Raises:
        FileNotFoundError: missing path.
        TraceFormatError: unknown extension or content (names the file, line 1, the formats known).
    """
    path = Path(path)
    if path.is_dir():
        return "lmcache"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    with path.open("r", encoding="utf-8") as fh:
        first = fh.readline()
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        if not first.strip():
            return "lmcache"
        try:
            obj = json.loads(first)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(path, 1, f"one JSON object per line ({exc.msg})", first.strip()) from None
        if isinstance(obj, dict):
            if "format" in obj:
                return "native"
            if "hash_ids" in obj or "input_length" in obj:
                return "mooncake"
            if "input" in obj and "timestamp" in obj:
                return "lmcache"
        raise TraceFormatError(path, 1, f"a record of a known format ({_KNOWN})", obj)
    if suffix == ".csv":
        cols = [c.strip() for c in first.split(",")]
        if "TIMESTAMP" in cols:
            return "azure"
        if "num_prefill_tokens" in cols:
            return "vidur"
        raise TraceFormatError(path, 1, "a CSV header with TIMESTAMP (Azure) or num_prefill_tokens (Vidur)", first.strip())
    raise TraceFormatError(path, 0, f"a .jsonl, .json or .csv file or a directory ({_KNOWN})", suffix)


def load_any(path: str | Path) -> Workload:
    """Load any supported trace with the loader :func:`detect_format` picks (default options)."""
    kind = detect_format(path)
    if kind == "native":
        from optsched.workload.native import load_jsonl

        return load_jsonl(path)
    if kind == "mooncake":
        from optsched.workload.mooncake import load_mooncake

        return load_mooncake(path)
    if kind == "lmcache":
        from optsched.workload.lmcache import load_lmcache_agent

        return load_lmcache_agent(path)
    if kind == "azure":
        from optsched.workload.azure import load_azure

        return load_azure(path)
    from optsched.workload.vidur_trace import load_vidur_trace

    return load_vidur_trace(path)
