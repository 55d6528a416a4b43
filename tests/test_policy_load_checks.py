"""`load_policy` checks what export used to reject only later: the kind/type pair, finite numbers, the argument
type, the nesting depth."""

from __future__ import annotations

import json

import pytest

from optsched.export import dump_policy, load_policy
from optsched.plan import Plan


@pytest.fixture
def doc(tmp_path):
    p = dump_policy(Plan("admission", "vllm_threshold", {"long_prefill_token_threshold": 512}), tmp_path / "a.json")
    return json.loads(p.read_text())


def _write(tmp_path, text: str):
    p = tmp_path / "p.json"
    p.write_text(text)
    return p


def test_kind_type_pair_that_names_no_policy(tmp_path, doc):
    p = _write(tmp_path, json.dumps({**doc, "type": "price"}))
    with pytest.raises(ValueError, match=rf"{p}: unknown admission policy type 'price' \(field 'type'"):
        load_policy(p)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_parameter(tmp_path, doc, value):
    text = json.dumps(doc).replace('"long_prefill_token_threshold": 512', f'"long_prefill_token_threshold": {value}')
    p = _write(tmp_path, text)
    with pytest.raises(ValueError, match=rf"{p}: .*field 'parameters.long_prefill_token_threshold': a finite number"):
        load_policy(p)


def test_non_finite_provenance(tmp_path, doc):
    doc["provenance"]["objective"] = 1.0
    p = _write(tmp_path, json.dumps(doc).replace('"objective": 1.0', '"objective": NaN'))
    with pytest.raises(ValueError, match="field 'provenance.objective': a finite number"):
        load_policy(p)


@pytest.mark.parametrize("arg", [42, None, 1.5, ["a.json"]])
def test_non_path_argument_names_it(arg):
    with pytest.raises(TypeError, match=r"load_policy: path must be a str or os.PathLike .*, got "):
        load_policy(arg)


def test_deep_nesting(tmp_path):
    p = _write(tmp_path, '{"schema": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ValueError, match=rf"{p}: not a usable JSON document \(JSON nested deeper than MAX_JSON_DEPTH"):
        load_policy(p)


def test_policy_of_names_the_file_and_the_field(tmp_path):
    """A parameter the policy refuses (checked only when it is built, `Plan.to_policy`) is reported as the file's
    load error: file, field, reason; it used to read "admission/vllm_threshold: invalid parameters (given: ...)"
    with no file."""
    from optsched.export import policy_of
    from optsched.plan import PolicyParameterError

    p = dump_policy(Plan("admission", "vllm_threshold", {"long_prefill_token_threshold": -5}), tmp_path / "n.json")
    plan = load_policy(p)
    with pytest.raises(PolicyParameterError) as e:
        plan.to_policy()
    assert (e.value.field, e.value.reason) == ("long_prefill_token_threshold", "must be an int >= 1, got -5")
    with pytest.raises(ValueError) as e:
        policy_of(plan, p)
    assert str(e.value) == (f"{p}: invalid optsched.policy/v1 policy: field 'parameters.long_prefill_token_threshold' "
                            "of admission/vllm_threshold: must be an int >= 1, got -5")
    assert type(policy_of(load_policy(dump_policy(Plan("admission", "fcfs", {}), tmp_path / "f.json")), "f")).__name__ \
        == "FCFSAdmission"


@pytest.mark.parametrize(("message", "expected"), [
    ("x must be >= 0, got -1", ("x", "must be >= 0, got -1")),
    ("xy: must be finite", ("xy", "must be finite")),
    ("__init__() got an unexpected keyword argument 'z'", ("z", "not a parameter of this policy")),
    ("plan needs parameters.counts (list)", ("counts", "plan needs parameters.counts (list)")),
    ("something else", (None, "something else")),
])
def test_parameter_named_in_a_refusal(message, expected):
    from optsched.plan import _parameter_of

    assert _parameter_of(message, {"x": 1, "xy": 2}) == expected
