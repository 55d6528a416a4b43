"""A hand-edited session-router plan file with a bad ``deviate`` (or any SessionRouterConfig field) is one load error
naming the field as every other policy's is (``field 'parameters.deviate' of routing/session``); before, the field
was named only inside the message ("parameters of routing/session: SessionRouterConfig.deviate must be ...")."""

import json

import pytest

from optsched.export import load_policy, policy_of

PARAMS = {"gpu": "h200-sxm", "model": "llama-3-70b", "tp": 4, "incumbent": "cache_aware"}


def _file(tmp_path, **kw):
    from optsched.export import plan_to_json
    from optsched.plan import Plan

    doc = plan_to_json(Plan("routing", "session", {**PARAMS, **kw}))
    p = tmp_path / "p.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("kw, field, reason", [
    ({"deviate": "no"}, "deviate", "must be true or false, got 'no'"),
    ({"deviate": 0}, "deviate", "must be true or false, got 0"),
    ({"deviate": None}, "deviate", "must be true or false, got None"),
    ({"deviate": False, "incumbent": ""}, "deviate", "False needs an incumbent to route as"),
    ({"link": "x"}, "link", "must be 'rdma' or 'nvlink', got 'x'"),
])
def test_bad_field_is_named(tmp_path, kw, field, reason):
    p = _file(tmp_path, **kw)
    with pytest.raises(ValueError) as e:
        policy_of(load_policy(p), p)
    msg = str(e.value)
    assert f"invalid optsched.policy/v1 policy: field 'parameters.{field}' of routing/session: " in msg, msg
    assert reason in msg and "\n" not in msg


def test_deviate_false_with_an_incumbent_loads(tmp_path):
    p = _file(tmp_path, deviate=False)
    assert policy_of(load_policy(p), p).config.deviate is False


def test_a_misspelt_field_is_refused_not_dropped(tmp_path):
    """Before: "devaite": false loaded, the key was dropped and the router deviated."""
    p = _file(tmp_path, devaite=False)
    with pytest.raises(ValueError, match=r"field 'parameters.devaite' of routing/session: not a parameter of this policy"):
        policy_of(load_policy(p), p)
