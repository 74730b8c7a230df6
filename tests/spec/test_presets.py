"""The architecture presets: figures transcribed from the models' config.json, cross-checked against the
published parameter counts (an independent figure: a mistyped width or layer count would miss it)."""

from __future__ import annotations

import pytest

from modelfleet.plan.llm.speed.performance import shape_from_fields
from modelfleet.spec.presets import LLM_PRESETS, family, presets_of_size, sizes_named

# Gemma 3 4B and up are multimodal: the published count includes the vision tower (about 0.4B), which the
# text config does not describe.
MULTIMODAL = {"gemma-3-4b", "gemma-3-12b", "gemma-3-27b"}


@pytest.mark.parametrize("name", sorted(LLM_PRESETS))
def test_the_figures_add_up_to_the_published_parameter_count(name):
    preset = LLM_PRESETS[name]
    counted = shape_from_fields(preset.fields).params()
    if name in MULTIMODAL:
        assert 0.88 < counted / preset.params < 1.0
    else:
        assert counted == pytest.approx(preset.params, rel=0.013), preset.repo


def test_the_issue_asks_for_these_families():
    wanted = {"llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.3-70b", "llama-3.1-405b",
              "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b",
              "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b", "mistral-7b", "mixtral-8x7b",
              "mixtral-8x22b", "gemma-2-9b", "gemma-3-27b", "phi-3-mini", "phi-4", "deepseek-v3", "deepseek-r1",
              "gpt-oss-20b", "gpt-oss-120b"}
    assert wanted <= set(LLM_PRESETS)


def test_active_parameters_of_the_moe_presets():
    # published: Qwen3-30B-A3B 3.3B active, Qwen3-235B-A22B 22B, Mixtral 8x7B 12.9B, DeepSeek-V3 37B,
    # gpt-oss-120b 5.1B (its 4 of 128 experts; the embeddings count too here: 5.7B)
    active = {name: shape_from_fields(LLM_PRESETS[name].fields).params(active=True) / 1e9
              for name in ("qwen3-30b-a3b", "qwen3-235b-a22b", "mixtral-8x7b", "deepseek-v3", "gpt-oss-120b")}
    assert active["qwen3-30b-a3b"] == pytest.approx(3.3, abs=0.1)
    assert active["qwen3-235b-a22b"] == pytest.approx(22.2, abs=0.2)
    assert active["mixtral-8x7b"] == pytest.approx(12.9, abs=0.1)
    assert active["deepseek-v3"] == pytest.approx(37.6, abs=0.6)
    assert active["gpt-oss-120b"] == pytest.approx(5.7, abs=0.2)


def test_windows_and_mla_come_through():
    gemma3 = LLM_PRESETS["gemma-3-27b"].fields
    assert (gemma3["sliding_window"], gemma3["sliding_window_layers"]) == (1024, 62 - 62 // 6)  # 52 of 62
    gpt_oss = LLM_PRESETS["gpt-oss-20b"].fields
    assert (gpt_oss["sliding_window"], gpt_oss["sliding_window_layers"]) == (128, 12)  # every other layer
    deepseek = LLM_PRESETS["deepseek-v3"].fields
    assert (deepseek["kv_lora_rank"], deepseek["qk_rope_head_dim"], deepseek["experts"]) == (512, 64, 256)


def test_sizes_in_names():
    assert sizes_named("Qwen/Qwen2.5-32B-Instruct") == {"32"}
    assert sizes_named("mistralai/Mixtral-8x7B-Instruct-v0.1") == {"8x7"}
    assert sizes_named("Qwen/Qwen3-30B-A3B") == {"30"}  # A3B is the active count, not a size
    assert sizes_named("s3://acme/hf/Llama-3.3-70B-Instruct") == {"70"}
    assert sizes_named("deepseek-ai/DeepSeek-V3") == set()
    assert sizes_named("qwen2.5-0.5b") == {"0.5"} and family("qwen2.5-0.5b") == "qwen2.5"
    assert presets_of_size("32", near="qwen2.5-72b")[0] == "qwen2.5-32b"  # the same family first
