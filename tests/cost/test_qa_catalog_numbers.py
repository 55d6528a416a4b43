"""QA regressions: KV bytes/token of every catalog model against its public config, and DeepSeek-V3 in the
fp8 weights of its official release (fits on 8x H200, as it is served)."""

import dataclasses

import pytest

from optsched.cost import CostModel, load_model

# layers x 2 (K, V) x kv_heads x head_dim x 2 B (bf16), from each model's HF config.json (catalog ``source``);
# MLA: layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B (DeepSeek-V2 paper Sec. 2.1.2).
KV_BYTES_TP1 = {
    "llama-2-7b": 32 * 2 * 32 * 128 * 2, "llama-2-70b": 80 * 2 * 8 * 128 * 2, "llama-3-8b": 32 * 2 * 8 * 128 * 2,
    "llama-3-70b": 327_680, "opt-13b": 40 * 2 * 40 * 128 * 2, "codellama-34b": 48 * 2 * 8 * 128 * 2,
    "qwen-72b": 80 * 2 * 64 * 128 * 2, "internlm-20b": 60 * 2 * 40 * 128 * 2, "phi-2": 32 * 2 * 32 * 80 * 2,
    "mistral-7b": 32 * 2 * 8 * 128 * 2, "qwen3-235b-a22b": 94 * 2 * 4 * 128 * 2, "deepseek-v3": 61 * 576 * 2,
}


@pytest.mark.parametrize("name", sorted(KV_BYTES_TP1))
def test_kv_bytes_per_token_match_public_config(name):
    m = load_model(name)
    assert CostModel("h200", m, tp=1).kv_bytes_per_token == KV_BYTES_TP1[name]


def test_kv_replication_under_tp_is_counted():
    # Qwen3-235B has 4 KV heads: at tp=8 each rank stores one (replicated) head -> twice the tp=1 bytes
    assert CostModel("h200", "qwen3-235b-a22b", tp=8).kv_bytes_per_token == 2 * KV_BYTES_TP1["qwen3-235b-a22b"]
    # MLA latent is replicated on every TP rank
    assert CostModel("h200", "deepseek-v3", tp=8).kv_bytes_per_token == 8 * KV_BYTES_TP1["deepseek-v3"]


def test_deepseek_v3_is_fp8_and_fits_on_8_h200():
    m = load_model("deepseek-v3")
    assert m.weight_bytes == 1.0 and m.activation_bytes == 2.0  # HF config quantization_config fmt e4m3
    assert m.weight_total_bytes / 1e9 == pytest.approx(671, abs=3)  # 671B params x 1 B
    cm = CostModel.from_names("h200", "deepseek-v3", tp=8)
    assert cm.fits and cm.gemm_peak_flops == cm.gpu.fp8_flops
    # per GPU: 0.9 x 151.4 GB - 83.9 GB weights - reserve ~ 51 GB of KV, / (61 x 576 x 2 B) per token and rank
    assert 650_000 < cm.kv_capacity_tokens() < 760_000
    assert not CostModel.from_names("h200", "deepseek-v3", tp=4).fits
    assert CostModel.from_names("a100-80gb", "deepseek-v3", tp=8).gemm_peak_flops == 312e12  # no fp8 on A100


def test_fp8_weights_do_not_shrink_allreduce_or_activation_bytes():
    m = load_model("llama-3-70b")
    bf16 = CostModel("h200", m, tp=4).step_breakdown(256, 0, 0, 0, 0)
    fp8 = CostModel("h200", dataclasses.replace(m, weight_bytes=1.0), tp=4).step_breakdown(256, 0, 0, 0, 0)
    assert fp8["allreduce_bytes"] == bf16["allreduce_bytes"] == 2 * 80 * 256 * 8192 * 2
    assert fp8["communication_s"] == pytest.approx(bf16["communication_s"])
    # weights read once: the linear bytes drop by exactly one weight copy (all matrices, LM head on 1 row)
    assert bf16["linear_bytes"] - fp8["linear_bytes"] > 0.9 * m.total_params


def test_llama3_70b_decode_bytes_on_paper():
    # decode batch 64 at 8k context on 4x H200: KV read = 64 * 8192 * 327,680 B; plus per rank and layer the
    # query in and output out, 2 * 16 heads * 128 * 2 B = 8,192 B per sequence -> x 64 x 80 layers x 4 ranks
    cm = CostModel.from_names("h200", "llama-3-70b", tp=4)
    bd = cm.step_breakdown(0, 0, 0, 64, 64 * 8192)
    assert bd["attention_bytes"] == 64 * 8192 * 327_680 + 8_192 * 64 * 80 * 4
    # decode attention FLOPs: 4 * heads * head_dim per KV token and layer (QK^T and PV)
    assert bd["attention_flops"] == 4 * 64 * 128 * 80 * 64 * 8192
    assert bd["attention_bound"] == "memory" and bd["linear_bound"] == "memory"
    # time floor: KV + weights must stream through 4 x 4.8 TB/s
    assert bd["time_s"] > (bd["attention_bytes"] + cm.model.weight_total_bytes) / (4 * 4.8e12)


def test_llama3_70b_prefill_flops_on_paper():
    # 8192-token prefill from empty: linear = 2 * (active params - LM head) * 8192 + LM head on the ONE row that
    # needs logits (vLLM computes logits for the last token only); attention = 4 * layers * heads * head_dim *
    # causal pairs, pairs = 8192 * 8193 / 2
    cm = CostModel.from_names("h200", "llama-3-70b", tp=4)
    m = cm.model
    pairs = 8192 * 8193 / 2
    bd = cm.step_breakdown(8192, pairs, 8192, 0, 0)
    lm_head = m.vocab_size * m.hidden_size
    assert bd["linear_flops"] == pytest.approx(2 * (m.active_params - lm_head) * 8192 + 2 * lm_head, rel=1e-9)
    assert bd["attention_flops"] == pytest.approx(4 * 80 * 64 * 128 * pairs, rel=1e-12)
    assert bd["linear_bound"] == "compute"
