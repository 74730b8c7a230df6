"""Architectures of well-known LLMs, so a catalogue entry can say ``architecture: llama-3.1-70b``.

Figures are from each model's published ``config.json`` on Hugging Face (num_hidden_layers,
num_attention_heads, num_key_value_heads, hidden_size / num_attention_heads, max_position_embeddings),
checked 2026-11. ``params`` is the published total parameter count (all experts for MoE models).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArchitecturePreset:
    params: int
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    max_position_embeddings: int


LLM_PRESETS: dict[str, ArchitecturePreset] = {
    "llama-3.2-1b": ArchitecturePreset(1_240_000_000, 16, 32, 8, 64, 131_072),
    "llama-3.2-3b": ArchitecturePreset(3_210_000_000, 28, 24, 8, 128, 131_072),
    "llama-3.1-8b": ArchitecturePreset(8_030_000_000, 32, 32, 8, 128, 131_072),
    "llama-3.1-70b": ArchitecturePreset(70_550_000_000, 80, 64, 8, 128, 131_072),
    "llama-3.3-70b": ArchitecturePreset(70_550_000_000, 80, 64, 8, 128, 131_072),
    "llama-3.1-405b": ArchitecturePreset(405_850_000_000, 126, 128, 8, 128, 131_072),
    "mistral-7b": ArchitecturePreset(7_250_000_000, 32, 32, 8, 128, 32_768),
    "mixtral-8x7b": ArchitecturePreset(46_700_000_000, 32, 32, 8, 128, 32_768),
    "qwen2.5-7b": ArchitecturePreset(7_620_000_000, 28, 28, 4, 128, 32_768),
    "qwen2.5-72b": ArchitecturePreset(72_700_000_000, 80, 64, 8, 128, 32_768),
}
