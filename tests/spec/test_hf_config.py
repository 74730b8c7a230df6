"""config.json files read as their families spell them (values copied from the published files)."""

from __future__ import annotations

import pytest

from modelfleet.plan.llm.speed.performance import shape_from_fields
from modelfleet.spec.hf_config import shape_fields

LLAMA_31_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
               "max_position_embeddings": 131072, "num_attention_heads": 32, "num_hidden_layers": 32,
               "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False}
DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "first_k_dense_replace": 3, "hidden_size": 7168,
               "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
               "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
               "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
               "num_key_value_heads": 128, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
               "v_head_dim": 128, "vocab_size": 129280}
MIXTRAL_8X7B = {"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
                "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
                "sliding_window": None, "max_position_embeddings": 32768}
GPT_OSS_20B = {"hidden_size": 2880, "intermediate_size": 2880, "num_attention_heads": 64, "num_hidden_layers": 24,
               "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32, "experts_per_token": 4,
               "sliding_window": 128, "vocab_size": 201088,
               "layer_types": ["sliding_attention", "full_attention"] * 12}
GEMMA_3_27B = {"model_type": "gemma3", "text_config": {
    "model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504, "num_attention_heads": 32,
    "num_hidden_layers": 62, "num_key_value_heads": 16, "head_dim": 128, "sliding_window": 1024,
    "sliding_window_pattern": 6, "vocab_size": 262208}}
QWEN25_7B = {"hidden_size": 3584, "intermediate_size": 18944, "num_attention_heads": 28, "num_hidden_layers": 28,
             "num_key_value_heads": 4, "vocab_size": 152064, "sliding_window": 131072, "use_sliding_window": False}


def test_dense_gqa():
    fields = shape_fields(LLAMA_31_8B)
    assert fields == {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
                      "intermediate": 14336, "vocab": 128256, "max_position_embeddings": 131072,
                      "tied_embeddings": False}
    assert shape_from_fields(fields).params() == pytest.approx(8.03e9, rel=0.001)


def test_moe_with_mla_and_leading_dense_layers():
    shape = shape_from_fields(shape_fields(DEEPSEEK_V3), weight_bytes=1.0)
    assert (shape.experts, shape.experts_per_token, shape.moe_intermediate) == (256, 8, 2048)
    assert (shape.shared_expert_intermediate, shape.dense_layers, shape.moe_layers) == (2048, 3, 58)
    assert (shape.kv_lora_rank, shape.qk_rope_head_dim) == (512, 64)
    assert shape.params() == pytest.approx(671e9, rel=0.005)
    assert shape.params(active=True) == pytest.approx(37.5e9, rel=0.03)


def test_mixtral_sizes_its_experts_with_intermediate_size():
    shape = shape_from_fields(shape_fields(MIXTRAL_8X7B))
    assert (shape.experts, shape.moe_intermediate, shape.dense_layers, shape.sliding_window) == (8, 14336, 0, 0)
    assert shape.params() == pytest.approx(46.7e9, rel=0.002)


def test_sliding_window_layers_as_each_family_says():
    gpt_oss = shape_fields(GPT_OSS_20B)
    assert (gpt_oss["sliding_window"], gpt_oss["sliding_window_layers"], gpt_oss["experts_per_token"]) == (128, 12, 4)
    gemma = shape_fields(GEMMA_3_27B)  # the language model lives under text_config; 5 of every 6 layers local
    assert (gemma["layers"], gemma["sliding_window"], gemma["sliding_window_layers"]) == (62, 1024, 52)
    assert "sliding_window" not in shape_fields(QWEN25_7B)  # declared but switched off


def test_missing_figures_are_named_with_their_spellings():
    with pytest.raises(ValueError, match=r"layers \(num_hidden_layers or n_layer or num_layers\)"):
        shape_fields({"hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 32000})
    with pytest.raises(ValueError, match="kv_lora_rank .* lacks qk_rope_head_dim"):
        shape_fields({**LLAMA_31_8B, "kv_lora_rank": 512})
