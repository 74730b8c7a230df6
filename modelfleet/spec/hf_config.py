"""A Hugging Face ``config.json`` read as the figures that size and time an LLM.

Field names are the ones those files use; families spell the same thing differently (Mixtral's
``num_local_experts``, Qwen's ``num_experts``, DeepSeek's ``n_routed_experts``), so each figure lists the
spellings it accepts, first match wins. Multimodal configs keep the language model under ``text_config``.
The result uses the names of ``modelfleet.plan.llm.speed.performance.LlmShape``; a missing required figure is a
``ValueError`` naming the fields it looked for, which the loader reports at the ``config:`` line.
"""

from __future__ import annotations

from typing import Any, Mapping

_SPELLINGS: dict[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads"),
    "head_dim": ("head_dim",),
    "intermediate": ("intermediate_size", "ffn_hidden_size", "n_inner"),
    "vocab": ("vocab_size",),
    "experts": ("n_routed_experts", "num_local_experts", "num_experts"),
    "experts_per_token": ("num_experts_per_tok", "experts_per_token", "moe_topk"),
    "moe_intermediate": ("moe_intermediate_size",),
    "dense_layers": ("first_k_dense_replace",),
    "kv_lora_rank": ("kv_lora_rank",),
    "q_lora_rank": ("q_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "seq_length"),
}
_REQUIRED = ("layers", "hidden", "heads", "vocab")


def _first(config: Mapping[str, Any], name: str) -> int | None:
    for key in _SPELLINGS[name]:
        value = config.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return int(value)
    return None


def language_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    text = config.get("text_config")
    return text if isinstance(text, Mapping) and "num_hidden_layers" not in config else config


def shape_fields(config: Mapping[str, Any]) -> dict[str, int | bool]:
    """The figures of one config.json (see the module docstring); raises ValueError naming what is missing."""
    config = language_config(config)
    fields: dict[str, Any] = {name: _first(config, name) for name in _SPELLINGS}
    missing = [f"{name} ({' or '.join(_SPELLINGS[name])})" for name in _REQUIRED if fields[name] is None]
    if missing:
        raise ValueError("config.json lacks " + ", ".join(missing))
    fields["kv_heads"] = fields["kv_heads"] or fields["heads"]
    fields["head_dim"] = fields["head_dim"] or fields["hidden"] // fields["heads"]
    fields["intermediate"] = fields["intermediate"] or 4 * fields["hidden"]
    _moe(config, fields)
    _mla(fields)
    _window(config, fields)
    fields["tied_embeddings"] = bool(config.get("tie_word_embeddings", False))
    return {name: value for name, value in fields.items() if value is not None}


def _moe(config: Mapping[str, Any], fields: dict[str, Any]) -> None:
    if not fields["experts"]:
        for name in ("experts", "experts_per_token", "moe_intermediate", "dense_layers"):
            fields[name] = None
        return
    fields["experts_per_token"] = fields["experts_per_token"] or 2
    # Mixtral and gpt-oss size their experts with intermediate_size and have no dense MLP layers.
    fields["moe_intermediate"] = fields["moe_intermediate"] or fields["intermediate"]
    shared = config.get("shared_expert_intermediate_size") or (
        int(config.get("n_shared_experts") or 0) * fields["moe_intermediate"])
    fields["shared_expert_intermediate"] = int(shared) if shared else None
    fields["dense_layers"] = fields["dense_layers"] or None


def _mla(fields: dict[str, Any]) -> None:
    if not fields["kv_lora_rank"]:
        for name in ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            fields[name] = None
        return
    missing = [name for name in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim") if not fields[name]]
    if missing:
        raise ValueError("config.json has kv_lora_rank (MLA attention) but lacks " + ", ".join(missing))


def _window(config: Mapping[str, Any], fields: dict[str, Any]) -> None:
    """Sliding-window attention: which layers use it, as ``layer_types``, Gemma's pattern or Mistral say."""
    window = config.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0 or config.get("use_sliding_window") is False:
        return
    layers = fields["layers"]
    types = config.get("layer_types")
    if isinstance(types, list) and types:
        windowed = sum(1 for kind in types if kind == "sliding_attention")
    elif isinstance(config.get("sliding_window_pattern"), int) and config["sliding_window_pattern"] > 0:
        pattern = config["sliding_window_pattern"]  # Gemma 3: every pattern-th layer is global
        windowed = layers - layers // pattern
    elif str(config.get("model_type", "")).startswith("gemma2"):
        windowed = layers // 2  # Gemma 2 alternates local and global layers
    else:
        windowed = layers
    if windowed:
        fields["sliding_window"] = window
        fields["sliding_window_layers"] = windowed


TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
QUANTIZED_DTYPES = {"fp8": "fp8", "mxfp4": "int4", "awq": "int4"}  # quantization_config.quant_method -> weights


def published_dtype(config: dict[str, Any]) -> str | None:
    """The weights' dtype a Hugging Face config.json publishes: its quantization_config's format when it has
    one (fp8, mxfp4, awq; others: None, their bits vary), else ``torch_dtype`` (``dtype`` in newer
    transformers) as size.dtype names it."""
    quantized = config.get("quantization_config")
    if isinstance(quantized, dict):
        return QUANTIZED_DTYPES.get(str(quantized.get("quant_method", "")))
    return TORCH_DTYPES.get(str(config.get("torch_dtype") or config.get("dtype") or ""))
