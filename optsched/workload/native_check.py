"""Fast per-line checks equivalent to the shipped JSON Schema ``session_v1.json``.

``jsonschema`` costs ~0.2-2 ms per call line here (measured: 167 µs for a call without hashes, 2.4 ms
with 200 hashes), which would cap loading far below the 1M calls/min goal. These hand-written checks
accept exactly the records the schema accepts (``tests/workload/test_native.py`` asserts
agreement on valid records and on mutations of every field); on a rejection the loader asks
``jsonschema`` for the precise message. ``load_jsonl(..., validate="schema")`` runs jsonschema on
every line instead.
"""

from __future__ import annotations

__all__ = ["HASH_MAX", "check_call", "check_header", "check_session"]

HASH_MAX = 2**63 - 1
_HEADER = {"format", "name", "block_size", "closed_loop", "source"}
_SESSION = {"session", "start_s", "calls"}
_CALL_REQ = {"call_id", "input_tokens", "output_tokens", "new_tokens", "lane", "parents", "model", "turn",
             "think_time_s", "arrival_s", "tool"}
_CALL_ALL = _CALL_REQ | {"block_size", "block_hashes", "hash_base", "hash_keep", "hash_append", "wait_s"}


def _int(v: object, lo: int) -> bool:
    # JSON Schema "integer" also accepts integral floats such as 3.0
    if type(v) is int:
        return v >= lo
    return type(v) is float and v.is_integer() and v >= lo


_INF = float("inf")


def _num(v: object) -> bool:
    return (type(v) is int or type(v) is float) and 0 <= v < _INF  # NaN fails; Python's json parses Infinity


def _str(v: object, min_len: int = 0) -> bool:
    return type(v) is str and len(v) >= min_len


def _hashes(v: object) -> bool:
    if type(v) is not list:
        return False
    if not v:
        return True
    if set(map(type, v)) == {int}:  # common case, C-level loops
        return min(v) >= 0 and max(v) <= HASH_MAX
    return all(_int(h, 0) and h <= HASH_MAX for h in v)


_INT = int
_STR = str
_FULL = {"block_hashes"}
_DELTA = {"hash_base", "hash_keep", "hash_append"}


def check_header(o: dict) -> bool:
    """True iff ``o`` satisfies ``$defs/header``."""
    return (
        o.keys() == _HEADER and o["format"] == "optsched.session/v1" and _str(o["name"])
        and _int(o["block_size"], 1) and type(o["closed_loop"]) is bool and _str(o["source"])
    )


def check_session(o: dict) -> bool:
    """True iff ``o`` satisfies ``$defs/session``."""
    return o.keys() == _SESSION and _str(o["session"], 1) and _num(o["start_s"]) and _int(o["calls"], 1)


def check_call(o: dict) -> bool:
    """True iff ``o`` satisfies ``$defs/call``."""
    keys = o.keys()
    # fast path for what write_jsonl produces (exact ints; full hashes or a delta); else the general check
    if _CALL_REQ <= keys:
        p = o["parents"]
        it, ot, nt, ln, tn, th, ar = (o["input_tokens"], o["output_tokens"], o["new_tokens"], o["lane"], o["turn"],
                                      o["think_time_s"], o["arrival_s"])
        if (
            type(it) is _INT and it >= 0 and type(ot) is _INT and ot >= 1 and type(nt) is _INT and nt >= 0
            and type(ln) is _INT and ln >= 0 and type(tn) is _INT and tn >= 0
            and (type(th) is float or type(th) is _INT) and th >= 0
            and (ar is None or ((type(ar) is float or type(ar) is _INT) and ar >= 0))
            and type(o["call_id"]) is _STR and o["call_id"] and type(o["model"]) is _STR and type(o["tool"]) is _STR
            and type(p) is list and (not p or (set(map(type, p)) == {_STR} and all(p) and len(set(p)) == len(p)))
        ):
            extra = keys - _CALL_REQ
            if not extra:
                return True
            if extra == _FULL and _hashes(o["block_hashes"]):
                return True
            if extra == _DELTA:
                b, k = o["hash_base"], o["hash_keep"]
                if type(b) is _STR and b != "" and type(k) is _INT and k >= 1 and _hashes(o["hash_append"]):
                    return True
    return _check_call_general(o, keys)  # anything the fast path did not accept is decided here


def _check_call_general(o: dict, keys) -> bool:
    if not (_CALL_REQ <= keys <= _CALL_ALL):
        return False
    p = o["parents"]
    if not (
        _str(o["call_id"], 1) and _int(o["input_tokens"], 0) and _int(o["output_tokens"], 1)
        and _int(o["new_tokens"], 0) and _int(o["lane"], 0) and type(p) is list
        and all(_str(x, 1) for x in p) and len(set(p) if all(type(x) is str for x in p) else p) == len(p)
        and _str(o["model"]) and _int(o["turn"], 0) and _num(o["think_time_s"])
        and (o["arrival_s"] is None or _num(o["arrival_s"])) and _str(o["tool"])
    ):
        return False
    if "block_size" in keys and not _int(o["block_size"], 1):
        return False
    if "wait_s" in keys and not _num(o["wait_s"]):
        return False
    if "block_hashes" in keys and ("hash_base" in keys or not _hashes(o["block_hashes"])):
        return False
    delta = ("hash_base" in keys, "hash_keep" in keys, "hash_append" in keys)
    if any(delta):
        if not all(delta):
            return False
        return _str(o["hash_base"], 1) and _int(o["hash_keep"], 1) and _hashes(o["hash_append"])
    return True
