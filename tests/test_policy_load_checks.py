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
