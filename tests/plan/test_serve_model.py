"""Models to serve: Hugging Face configs (dense, GQA, sliding window, MoE, MLA, gpt-oss) and presets."""
import json
import os

import pytest

from trnsim.errors import TrnsimError
from trnsim.plan.serve import ServeModelError, load

HERE = os.path.join(os.path.dirname(__file__), "hf_configs")


def cfg(name):
    return os.path.join(HERE, name)


def test_dense_config_counts_its_weights_and_kv():
    m = load(cfg("dense.json"))
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim) == (8, 1024, 16, 16, 64)
    h, f, v = 1024, 2816, 32000
    per_layer = 4 * h * h + 3 * h * f + 2 * h  # MHA: q, k, v, o; SwiGLU; two norms
    assert m.params == per_layer * 8 + 2 * v * h + h
    assert m.kv_bytes_per_token(2) == 8 * 2 * 1024 * 2  # K and V of every layer, bf16


def test_gqa_config_shrinks_the_kv_cache_and_splits_it_over_tp():
    m = load(cfg("gqa.json"))
    assert (m.heads, m.kv_heads, m.head_dim, m.tied_embeddings) == (32, 8, 64, True)
    assert m.kv_bytes_per_token(2) == 16 * 2 * 8 * 64 * 2
    assert m.kv_bytes_per_token(2, tp=4) == 16 * 2 * 2 * 64 * 2
    assert m.kv_bytes_per_token(2, tp=32) == 16 * 2 * 1 * 64 * 2  # tp past kv_heads replicates one head


def test_sliding_window_caps_the_cache_of_its_layers():
    m = load(cfg("sliding.json"))
    assert (m.window, m.window_layers) == (1024, 12)
    full = 12 * 2 * 4 * 64 * 1
    assert m.kv_bytes_per_token(1, context=1024) == full
    assert m.kv_bytes_per_token(1, context=4096) == pytest.approx(full * 1024 / 4096)


def test_moe_config_counts_active_and_total_experts():
    m = load(cfg("moe.json"))
    assert (m.experts, m.top_k, m.expert_ffn, m.window) == (8, 2, 2048, 0)
    h, f = 1024, 2048
    assert m.params - m.active_params == 8 * 3 * h * f * (8 - 2)


def test_deepseek_style_mla_caches_the_latent():
    raw = {"model_type": "deepseek_v3", "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
           "num_key_value_heads": 8, "vocab_size": 1000, "intermediate_size": 4096, "moe_intermediate_size": 512,
           "n_routed_experts": 16, "num_experts_per_tok": 4, "n_shared_experts": 1, "first_k_dense_replace": 1,
           "kv_lora_rank": 128, "q_lora_rank": 256, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64}
    from trnsim.plan.serve import from_hf

    m = from_hf(raw)
    assert m.mla and m.kv_width(tp=8) == 128 + 32  # the compressed latent and RoPE key, on every rank
    assert (m.dense_layers, m.moe_layers, m.shared_ffn, m.head_dim) == (1, 3, 512, 96)


def test_gpt_oss_layer_types_count_the_window_layers():
    from trnsim.plan.serve import from_hf

    raw = {"model_type": "gpt_oss", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
           "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000, "intermediate_size": 512,
           "num_local_experts": 8, "experts_per_token": 2, "sliding_window": 128,
           "layer_types": ["sliding_attention", "full_attention"] * 2}
    m = from_hf(raw)
    assert (m.window_layers, m.top_k, m.experts) == (2, 2, 8)


def test_a_bad_config_names_the_field_and_line():
    with pytest.raises(ServeModelError) as e:
        load(cfg("bad.json"))
    msg = str(e.value)
    assert "\n" not in msg
    assert f"{cfg('bad.json')}:7:" in msg and "'num_key_value_heads'" in msg and "16" in msg and "5" in msg


@pytest.mark.parametrize("change, field", [
    ({"model_type": "bert"}, "model_type"),
    ({"hidden_size": -4}, "hidden_size"),
    ({"num_hidden_layers": None}, "num_hidden_layers"),
    ({"num_experts_per_tok": 9}, "num_experts_per_tok"),
])
def test_each_bad_field_is_named(tmp_path, change, field):
    raw = json.load(open(cfg("moe.json")))
    raw.update(change)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(raw, indent=2))
    with pytest.raises(TrnsimError, match=f"'{field}'"):
        load(str(p))


def test_presets_load_as_serving_models():
    m = load("llama3-8b")
    assert (m.layers, m.kv_heads, m.head_dim) == (32, 8, 128)
    assert load("mixtral-8x7b").moe


def test_qwen_moe_counts_its_dense_layers():
    from trnsim.plan.serve import from_hf

    raw = {"model_type": "qwen2_moe", "hidden_size": 512, "num_hidden_layers": 8, "num_attention_heads": 8,
           "num_key_value_heads": 2, "vocab_size": 1000, "intermediate_size": 1024, "moe_intermediate_size": 256,
           "num_experts": 16, "num_experts_per_tok": 2, "shared_expert_intermediate_size": 512,
           "decoder_sparse_step": 2, "mlp_only_layers": [1]}
    m = from_hf(raw)
    # layers 1, 3, 5, 7 route ((i + 1) % 2 == 0) but layer 1 is listed dense: 3 MoE layers, 5 dense
    assert (m.moe_layers, m.dense_layers, m.shared_ffn) == (3, 5, 512)
