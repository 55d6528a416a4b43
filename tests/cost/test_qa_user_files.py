"""QA regressions: user GPU/model files with wrong field types fail with one line naming file and field."""

import json

import pytest

from optsched.cost import load_gpu, load_model

_MODEL = {"name": "tiny", "num_layers": 2, "hidden_size": 64, "num_heads": 4, "num_kv_heads": 4, "head_dim": 16,
          "intermediate_size": 128, "vocab_size": 100}


def _write(tmp_path, data, name):
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return str(p)


@pytest.mark.parametrize("field, value, msg", [
    ("gated_mlp", "yes", "gated_mlp must be true or false, got 'yes'"),
    ("gated_mlp", 5, "gated_mlp must be true or false, got 5"),  # was silently truthy
    ("tie_embeddings", 0, "tie_embeddings must be true or false"),
    ("aliases", "abc", "'aliases' must be a list of names"),  # was split into ('a', 'b', 'c')
    ("num_layers", 2.5, "num_layers must be an int"),
])
def test_model_field_types_named(tmp_path, field, value, msg):
    p = _write(tmp_path, _MODEL | {field: value}, f"m_{field}.json")
    with pytest.raises(ValueError, match=msg) as err:
        load_model(p)
    assert p in str(err.value)


def test_gpu_int_field_rejects_fraction_and_bool(tmp_path):
    g = load_gpu("h100-sxm")
    d = {f: getattr(g, f) for f in g.__slots__ if f != "aliases"} | {"name": "g"}
    with pytest.raises(ValueError, match="num_sms must be an int, got 132.5"):
        load_gpu(_write(tmp_path, d | {"num_sms": 132.5}, "g1.json"))
    with pytest.raises(ValueError, match="gpus_per_node must be an int, got True"):
        load_gpu(_write(tmp_path, d | {"gpus_per_node": True}, "g2.json"))


def test_edited_user_file_is_reread(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps(_MODEL))
    assert load_model(str(p)).num_layers == 2
    p.write_text(json.dumps(_MODEL | {"num_layers": 3}))
    assert load_model(str(p)).num_layers == 3  # was a stale cached spec for the same path
