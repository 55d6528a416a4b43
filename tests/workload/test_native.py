"""Native session JSONL: hypothesis round trip, schema agreement of the fast checks, hash deltas."""

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from optsched.workload import Call, Session, Workload, load_jsonl, write_jsonl
from optsched.workload.native import dumps_workload, session_schema
from optsched.workload.native_check import check_call, check_header, check_session

floats = st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_infinity=False)  # MAX_TIME_S
hashes = st.integers(min_value=0, max_value=2**63 - 1)
text = st.text(min_size=0, max_size=8)


@st.composite
def sessions(draw, sid: str, block_size: int):
    n = draw(st.integers(1, 5))
    calls = []
    prev_hashes: tuple[int, ...] = ()
    for i in range(n):
        inp = draw(st.integers(0, 5 * block_size))
        nb = -(-inp // block_size)
        keep = draw(st.integers(0, min(nb, len(prev_hashes))))
        hs = prev_hashes[:keep] + tuple(draw(st.lists(hashes, min_size=nb - keep, max_size=nb - keep)))
        if draw(st.booleans()):
            hs = ()
        parents = tuple(sorted(set(draw(st.lists(st.sampled_from([c.call_id for c in calls]), max_size=2))))) if calls else ()
        calls.append(Call(
            f"{sid}-c{i}", sid, inp, draw(st.integers(1, 10_000)), new_tokens=draw(st.integers(0, inp)),
            lane=draw(st.integers(0, 3)), parents=parents, block_hashes=hs, block_size=block_size,
            model=draw(text), turn=draw(st.integers(0, 5)), think_time_s=draw(floats),
            arrival_s=draw(st.none() | floats), tool=draw(text),
        ))
        prev_hashes = hs or prev_hashes
    return Session(sid, tuple(calls), start_s=draw(floats))


@st.composite
def workloads(draw):
    bs = draw(st.sampled_from([1, 16, 512]))
    n = draw(st.integers(1, 4))
    ss = tuple(draw(sessions(f"s{i}{draw(text)}", bs)) for i in range(n))
    return Workload(draw(text), ss, block_size=bs, closed_loop=draw(st.booleans()), source=draw(text))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_round_trip_is_exact(tmp_path_factory, w):
    f = tmp_path_factory.mktemp("rt") / "w.jsonl"
    write_jsonl(w, f)
    for mode in ("fast", "schema"):
        assert load_jsonl(f, validate=mode) == w
    assert dumps_workload(load_jsonl(f)) == f.read_text()  # re-writing is byte-identical
    schema = Draft202012Validator(session_schema())
    for line in f.read_text().splitlines():
        schema.validate(json.loads(line))  # every written line is valid under the whole schema


def _call_record():
    return {"call_id": "a", "input_tokens": 5, "output_tokens": 1, "new_tokens": 5, "lane": 0, "parents": ["p"],
            "model": "m", "turn": 0, "think_time_s": 0.5, "arrival_s": None, "tool": "", "hash_base": "p",
            "hash_keep": 1, "hash_append": [3]}


BAD_VALUES = [None, -1, 0, 1, 2.5, 3.0, "", "x", True, [], ["a", "a"], [1, -2], [2**63], {}, 2**63]


def test_fast_checks_agree_with_json_schema():
    defs = session_schema()["$defs"]
    v = {k: Draft202012Validator({"$ref": f"#/$defs/{k}", "$defs": defs}) for k in ("header", "session", "call")}
    bases = {
        "header": ({"format": "optsched.session/v1", "name": "n", "block_size": 512, "closed_loop": True, "source": ""},
                   check_header),
        "session": ({"session": "s", "start_s": 0.0, "calls": 3}, check_session),
        "call": (_call_record(), check_call),
    }
    n = 0
    for kind, (base, fast) in bases.items():
        assert fast(base) and v[kind].is_valid(base)
        keys = list(base) + ["block_hashes", "block_size", "extra"]
        for key in keys:
            variants = [{k: x for k, x in base.items() if k != key}]  # field removed
            for bad in BAD_VALUES:
                r = copy.deepcopy(base)
                r[key] = bad
                variants.append(r)
            for r in variants:
                n += 1
                assert fast(r) == v[kind].is_valid(r), (kind, key, r)
    assert n > 300


def test_shipped_schema_is_a_valid_2020_12_schema():
    Draft202012Validator.check_schema(session_schema())
    assert session_schema()["$defs"]["header"]["properties"]["format"]["const"] == "optsched.session/v1"


def test_delta_encoding_keeps_files_small(tmp_path):
    big = tuple(range(1000))
    c1 = Call("a", "s", 1000 * 16, 10, block_hashes=big, block_size=16)
    c2 = Call("b", "s", 1001 * 16, 10, new_tokens=16, parents=("a",), block_hashes=big + (5000,), block_size=16)
    w = Workload("w", (Session("s", (c1, c2)),), block_size=16)
    lines = dumps_workload(w).splitlines()
    rec = json.loads(lines[3])
    assert (rec["hash_base"], rec["hash_keep"], rec["hash_append"]) == ("a", 1000, [5000])
    f = write_jsonl(w, tmp_path / "w.jsonl")
    assert load_jsonl(f) == w


def test_every_schema_field_is_described():
    """The shipped schema is the format's documentation: each field says its meaning and unit."""
    defs = session_schema()["$defs"]
    for kind in ("header", "session", "call"):
        for name, prop in defs[kind]["properties"].items():
            assert prop.get("description"), f"{kind}.{name}"
            if name.endswith("_s"):
                assert "(s)" in prop["description"], f"{kind}.{name}"
            if name.endswith("_tokens"):
                assert "tokens" in prop["description"], f"{kind}.{name}"
