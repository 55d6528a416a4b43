"""``load_any(path)``: pick the right loader from the file extension and its first line; a directory by
the trace files inside it."""

from __future__ import annotations

import json
from pathlib import Path

from optsched.workload._io import iter_text_lines, json_hint, loads_limited, read_json_document, trace_suffix
from optsched.workload.errors import TraceFormatError
from optsched.workload.types import Workload

__all__ = ["BLOCK_SIZE_FORMATS", "detect_format", "load_any", "resolve_trace"]

_KNOWN = ("native session JSONL, Mooncake JSONL (open loop or multi-turn session_id rows), Agentic Mooncake JSONL, "
          "Weka trace JSON (file or directory), LMCache agent JSONL (file or directory), Azure 2023 CSV, Vidur CSV")
_SUFFIXES = (".jsonl", ".json", ".csv")


def _detect_file(path: Path) -> str:
    """Format of one existing file; ``"lmcache"`` for an empty ``.jsonl``/``.json`` (see detect_format)."""
    suffix = trace_suffix(path)
    if suffix not in _SUFFIXES:
        raise TraceFormatError(path, 0, f"a .jsonl, .json or .csv file (optionally .gz) or a directory ({_KNOWN})",
                               path.suffix.lower())
    first = next((line for _, line in iter_text_lines(path)), "")
    if suffix in (".jsonl", ".json"):
        if not first.strip():
            return "lmcache"
        try:
            obj = loads_limited(first)
        except json.JSONDecodeError as exc:
            if suffix == ".json" and _is_weka_doc(path):
                return "weka"
            raise TraceFormatError(path, 1, f"one JSON object per line ({json_hint(first, exc)})",
                                   first.strip()[:80]) from None
        except ValueError as exc:
            raise TraceFormatError(path, 1, f"one JSON object per line ({exc})") from None
        if isinstance(obj, dict):
            if "format" in obj:
                return "native"
            if "request_id" in obj:
                return "agentic-mooncake"
            if "requests" in obj and "block_size" in obj:
                return "weka"
            if "hash_ids" in obj or "input_length" in obj:
                return "mooncake-sessions" if "session_id" in obj else "mooncake"
            if "input" in obj and "timestamp" in obj:
                return "lmcache"
        raise TraceFormatError(path, 1, f"a record of a known format ({_KNOWN})", first.strip()[:80])
    if suffix == ".csv":
        if not first.strip():
            raise TraceFormatError(path, 0, "a CSV header with TIMESTAMP (Azure) or num_prefill_tokens (Vidur) "
                                            "(the file is empty or starts with a blank line)")
        cols = [c.strip() for c in first.split(",")]
        if "TIMESTAMP" in cols:
            return "azure"
        if "num_prefill_tokens" in cols:
            return "vidur"
        raise TraceFormatError(path, 1, "a CSV header with TIMESTAMP (Azure) or num_prefill_tokens (Vidur)", first.strip())
    raise TraceFormatError(path, 0, f"a .jsonl, .json or .csv file or a directory ({_KNOWN})", suffix)


def _is_weka_doc(path: Path) -> bool:
    """True when the whole file is one JSON object with ``requests`` and ``block_size`` (a pretty-printed
    Weka trace)."""
    try:
        obj = read_json_document(path)
    except (json.JSONDecodeError, TraceFormatError):
        return False
    return isinstance(obj, dict) and "requests" in obj and "block_size" in obj


def _names(paths: list[Path], root: Path, limit: int = 4) -> str:
    shown = ", ".join(str(p.relative_to(root)) for p in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _resolve_dir(path: Path) -> tuple[str, Path]:
    files = sorted(p for p in path.rglob("*") if p.is_file() and trace_suffix(p) in _SUFFIXES
                   and not any(part.startswith(".") for part in p.relative_to(path).parts))
    if not files:
        others = sorted(p for p in path.rglob("*") if p.is_file())
        found = f"found {len(others)} other file(s): {_names(others, path)}" if others else "the directory is empty"
        raise TraceFormatError(path, 0, f"a directory holding trace files (*.jsonl, *.json, *.csv); {found}")
    by_kind: dict[str, list[Path]] = {}
    for f in files:
        if f.stat().st_size == 0:
            by_kind.setdefault("empty", []).append(f)
            continue
        try:
            kind = _detect_file(f)
        except TraceFormatError:
            kind = "unrecognized"
        by_kind.setdefault(kind, []).append(f)
    real = {k: v for k, v in by_kind.items() if k != "empty"}
    if set(real) == {"lmcache"}:
        return "lmcache", path  # the LMCache loader reads every *.jsonl and skips empty ones with a warning
    if set(real) == {"weka"} and "empty" not in by_kind:
        return "weka", path  # a corpus of Weka trace files
    if len(real) == 1 and "unrecognized" not in real and len(next(iter(real.values()))) == 1 and "empty" not in by_kind:
        kind, (only,) = next(iter(real.items()))
        return kind, only
    found = "; ".join(f"{len(v)} {k} ({_names(v, path)})" for k, v in sorted(by_kind.items()))
    raise TraceFormatError(
        path, 0,
        "a directory of LMCache agent session files (*.jsonl) or holding exactly one trace file "
        f"(otherwise pass the file itself); found {found}",
    )


def resolve_trace(path: str | Path) -> tuple[str, Path]:
    """``(format, path to load)`` for a trace file or directory; format as :func:`detect_format`.

    A directory is looked into (recursively; hidden files and files other than ``*.jsonl``, ``*.json``,
    ``*.csv`` are ignored): if every non-empty trace file in it is an LMCache agent session file, the
    directory itself is returned (``"lmcache"``); if it holds exactly one trace file of another format,
    that file is returned (e.g. a folder with one Mooncake JSONL next to its ``SOURCE.md``).

    Raises:
        FileNotFoundError: missing path.
        TraceFormatError: unknown extension or content (names the file, line 1, the formats known); a
            directory with no trace file, or whose files cannot be told apart (mixed formats, several
            non-LMCache files, unrecognized files): the message lists what was found, per format.
    """
    path = Path(path)
    if path.is_dir():
        return _resolve_dir(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    return _detect_file(path), path


def detect_format(path: str | Path) -> str:
    """One of ``"native"``, ``"mooncake"``, ``"mooncake-sessions"``, ``"agentic-mooncake"``, ``"weka"``,
    ``"lmcache"``, ``"azure"``, ``"vidur"``.

    Rules: ``.jsonl``/``.json`` files are told apart by the keys of their first line (``format`` ->
    native, ``request_id`` -> Agentic Mooncake, ``requests``+``block_size`` -> Weka (also a pretty-printed
    ``.json`` document; a directory of them), ``hash_ids``/``input_length`` -> Mooncake, with
    ``session_id`` -> multi-turn Mooncake sessions, ``input``+``timestamp`` -> LMCache; an empty
    ``.jsonl`` is taken as an LMCache session file); ``.csv`` files by their header (``TIMESTAMP`` ->
    Azure, ``num_prefill_tokens`` -> Vidur); a directory by the files inside (:func:`resolve_trace`).

    Raises:
        FileNotFoundError, TraceFormatError: as :func:`resolve_trace`.
    """
    return resolve_trace(path)[0]


# formats whose rows do not record their hash block size: the loader takes it as an argument
BLOCK_SIZE_FORMATS = ("mooncake", "mooncake-sessions", "agentic-mooncake", "lmcache")


def load_any(path: str | Path, block_size: int | None = None) -> Workload:
    """Load any supported trace file or directory with the loader :func:`resolve_trace` picks.

    ``block_size`` (tokens per hash id / block hash) is passed to the loaders of formats that do not
    record it (:data:`BLOCK_SIZE_FORMATS`; each loader's default when None: 512 for Mooncake / Agentic
    Mooncake, AIPerf's and Mooncake's block; 512 for LMCache logs, optsched's choice as they carry raw
    text). Native and Weka files record their own block size: a different explicit ``block_size`` is
    an error; CSV traces carry no hashes, so it only sets the workload's ``block_size``.

    Raises:
        ValueError: ``block_size`` < 1, or one that contradicts the file's own.
        FileNotFoundError, TraceFormatError: what :func:`resolve_trace` and the loader raise.
    """
    if block_size is not None and (isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1):
        raise ValueError(f"block_size must be an int >= 1 (tokens per block), got {block_size!r}")
    from optsched.workload.limits import MAX_BLOCK_SIZE

    if block_size is not None and block_size > MAX_BLOCK_SIZE:
        raise ValueError(f"block_size expects at most {MAX_BLOCK_SIZE:,} tokens (MAX_BLOCK_SIZE, the plausibility "
                         f"limit, optsched.workload.limits), got {block_size:,}")
    kind, path = resolve_trace(path)
    kw = {} if block_size is None else {"block_size": block_size}
    w = _load(kind, path, kw if kind in BLOCK_SIZE_FORMATS else {})
    if block_size is not None and kind not in BLOCK_SIZE_FORMATS:
        if kind in ("native", "weka") and w.block_size != block_size:
            raise ValueError(f"{path}: the {kind} trace records block_size {w.block_size}, not the "
                             f"{block_size} given (leave --block-size unset for this format)")
        if w.block_size != block_size:
            import dataclasses

            w = dataclasses.replace(w, block_size=block_size)
    return w


def _load(kind: str, path: Path, kw: dict) -> Workload:
    if kind == "native":
        from optsched.workload.native import load_jsonl

        return load_jsonl(path)
    if kind == "mooncake":
        from optsched.workload.mooncake import load_mooncake

        return load_mooncake(path, **kw)
    if kind == "mooncake-sessions":
        from optsched.workload.mooncake_sessions import load_mooncake_sessions

        return load_mooncake_sessions(path, **kw)
    if kind == "agentic-mooncake":
        from optsched.workload.agentic_mooncake import load_agentic_mooncake

        return load_agentic_mooncake(path, **kw)
    if kind == "weka":
        from optsched.workload.weka import load_weka

        return load_weka(path)
    if kind == "lmcache":
        from optsched.workload.lmcache import load_lmcache_agent

        return load_lmcache_agent(path, **kw)
    if kind == "azure":
        from optsched.workload.azure import load_azure

        return load_azure(path)
    from optsched.workload.vidur_trace import load_vidur_trace

    return load_vidur_trace(path)
