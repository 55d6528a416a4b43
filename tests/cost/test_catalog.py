"""Catalog: every shipped GPU/model loads, public config numbers, and bad user files fail naming the field."""

import json

import pytest

from optsched.cost import list_gpus, list_models, load_gpu, load_model


def test_catalog_has_contract_names():
    assert {"a100-80gb", "h100-sxm", "h200-sxm", "b200"} <= set(list_gpus())
    assert {"llama-2-7b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "opt-13b", "codellama-34b", "qwen-72b",
            "internlm-20b", "phi-2", "mistral-7b", "qwen3-235b-a22b", "deepseek-v3"} <= set(list_models())
    assert load_gpu("h200").name == "h200-sxm"
    assert load_model("meta-llama/Meta-Llama-3-70B").name == "llama-3-70b"


@pytest.mark.parametrize("name, billions, tol", [
    ("llama-2-7b", 6.74, 0.02), ("llama-2-70b", 68.98, 0.5), ("llama-3-8b", 8.03, 0.05),
    ("llama-3-70b", 70.55, 0.5), ("opt-13b", 12.85, 0.2), ("mistral-7b", 7.24, 0.05),
    ("deepseek-v3", 671.0, 3.0), ("qwen3-235b-a22b", 235.0, 2.0), ("phi-2", 2.78, 0.05)])
def test_parameter_counts_match_published(name, billions, tol):
    # published sizes: HF model cards (Llama-2-7b 6.74B, Llama-3-70B 70.6B, DeepSeek-V3 671B total, ...)
    assert abs(load_model(name).total_params / 1e9 - billions) <= tol


def test_moe_active_params_published():
    assert abs(load_model("deepseek-v3").active_params / 1e9 - 37) < 1.0  # "37B activated" (DeepSeek-V3 report)
    assert abs(load_model("qwen3-235b-a22b").active_params / 1e9 - 22) < 1.0  # "A22B"


def test_gpu_numbers():
    a100, h200 = load_gpu("a100-80gb"), load_gpu("h200-sxm")
    assert a100.bf16_flops == 312e12 and a100.hbm_bw == 2.039e12
    assert h200.hbm_bw == 4.8e12 and h200.hbm_bytes == 151397597184


def _write(tmp_path, data, name="g.json"):
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def _gpu_dict():
    g = load_gpu("h100-sxm")
    return {f: getattr(g, f) for f in g.__slots__ if f != "aliases"}


def test_user_gpu_file_roundtrip_yaml(tmp_path):
    p = tmp_path / "my.yaml"
    p.write_text("\n".join(f"{k}: {v}" for k, v in _gpu_dict().items()) + "\nname: mygpu\n")
    assert load_gpu(str(p)).name == "mygpu"


def test_negative_bandwidth_names_field(tmp_path):
    d = _gpu_dict() | {"hbm_bw": -1.0, "name": "bad1"}
    with pytest.raises(ValueError, match="hbm_bw"):
        load_gpu(str(_write(tmp_path, d)))


def test_unknown_field_names_field(tmp_path):
    d = _gpu_dict() | {"hbm_bandwith": 1e12, "name": "bad2"}
    with pytest.raises(ValueError, match="unknown field 'hbm_bandwith'"):
        load_gpu(str(_write(tmp_path, d, "g2.json")))


def test_missing_field_and_bad_model(tmp_path):
    d = _gpu_dict()
    del d["pcie_bw"]
    with pytest.raises(ValueError, match="pcie_bw"):
        load_gpu(str(_write(tmp_path, d | {"name": "bad3"}, "g3.json")))
    m = {"name": "m", "num_layers": 2, "hidden_size": 64, "num_heads": 6, "num_kv_heads": 4, "head_dim": 8,
         "intermediate_size": 128, "vocab_size": 100}
    with pytest.raises(ValueError, match="num_kv_heads"):
        load_model(str(_write(tmp_path, m, "m.json")))
    with pytest.raises(ValueError, match="unknown model"):
        load_model("no-such-model")


def test_empty_name_or_directory_is_a_named_error(tmp_path):
    # "" became Path("") == "." (the working directory) and read_text raised IsADirectoryError: "[Errno 21] Is a
    # directory: '.'" was all `optsched cost predict --gpu ''` said
    for load in (load_gpu, load_model):
        with pytest.raises(ValueError, match="empty name"):
            load("")
        with pytest.raises(ValueError, match=f"{tmp_path}: is a directory"):
            load(tmp_path)
