"""Architectures of well-known LLMs, so a catalogue entry can say ``architecture: llama-3.1-8b``.

Each preset is the part of the model's published ``config.json`` (Hugging Face, the ``repo`` named) that sizes
and times it, under the names that file uses, so a preset and ``architecture: {config: PATH}`` go through the
same reader (``hf_config.shape_fields``). Figures were read from the configs themselves (NVIDIA
AIConfigurator 0.12.0 ships copies of Llama 3.1, Qwen3, Mixtral, DeepSeek and gpt-oss configs; the others from
the repositories' config.json), checked 2026-11. ``params`` is the published total parameter count, every
expert of a MoE model included (and a multimodal model's vision tower, which vLLM loads too).

``torch_dtype`` (and a pre-quantized checkpoint's ``quantization_config``) is the published weights' dtype,
against which ``size.dtype`` is checked; Gemma 2's 2B and 9B are left without one (not re-checked).

Instruct variants are the ones teams serve: where a family's base and instruct configs differ (Qwen2.5's
``max_position_embeddings``: 131,072 base, 32,768 instruct), the instruct figure is here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .hf_config import published_dtype, shape_fields


@dataclass(frozen=True)
class ArchitecturePreset:
    repo: str  # the Hugging Face repository whose config.json this is
    params: int  # published total parameters (all experts)
    config: Mapping[str, Any] = field(repr=False)

    @property
    def gated(self) -> bool | None:
        """Whether the repository asks a reader to accept its licence first (GATED_ORGS); None: not recorded."""
        return GATED_ORGS.get(self.repo.split("/")[0])

    @property
    def fields(self) -> dict[str, Any]:
        return shape_fields(self.config)

    @property
    def dtype(self) -> str | None:
        """The weights' dtype the config.json publishes (architecture.published_dtype); None: not recorded."""
        return published_dtype(dict(self.config))

    @property
    def layers(self) -> int:
        return int(self.config["num_hidden_layers"])

    @property
    def attention_heads(self) -> int:
        return int(self.config["num_attention_heads"])

    @property
    def kv_heads(self) -> int:
        return int(self.config.get("num_key_value_heads") or self.attention_heads)

    @property
    def head_dim(self) -> int:
        return int(self.fields["head_dim"])

    @property
    def max_position_embeddings(self) -> int:
        return int(self.config["max_position_embeddings"])


# Whether an organisation's repositories named by the presets are gated on the Hub, as their licences read in
# 2026-11 (not checked live: `validate --online` reads a pinned repository's own answer): Meta's Llama and
# Google's Gemma ask for the licence to be accepted first; Qwen (Apache-2.0), Microsoft's Phi (MIT), DeepSeek
# and OpenAI's gpt-oss (Apache-2.0) do not. Mistral's differ by model: not recorded.
GATED_ORGS = {"meta-llama": True, "google": True, "Qwen": False, "microsoft": False, "deepseek-ai": False,
              "openai": False}


def _dense(repo: str, params: float, layers: int, hidden: int, heads: int, kv: int, inter: int, vocab: int,
           context: int, torch_dtype: str | None = "bfloat16", **extra: Any) -> ArchitecturePreset:
    config = {"num_hidden_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
              "num_key_value_heads": kv, "intermediate_size": inter, "vocab_size": vocab,
              "max_position_embeddings": context, **({"torch_dtype": torch_dtype} if torch_dtype else {}), **extra}
    return ArchitecturePreset(repo, int(round(params * 1e9)), config)


_LLAMA_70B = dict(layers=80, hidden=8192, heads=64, kv=8, inter=28672, vocab=128256, context=131072)
_QWEN25 = dict(vocab=152064, context=32768)
_QWEN25_SMALL = dict(vocab=151936, context=32768, tie_word_embeddings=True)
_QWEN3 = dict(vocab=151936, context=40960, head_dim=128)
_GEMMA2 = dict(vocab=256000, context=8192, sliding_window=4096, model_type="gemma2", tie_word_embeddings=True)
_GEMMA3 = dict(vocab=262208, context=131072, sliding_window=1024, sliding_window_pattern=6, tie_word_embeddings=True)
_DEEPSEEK_V3 = {
    "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128,
    "intermediate_size": 18432, "vocab_size": 129280, "max_position_embeddings": 163840,
    "n_routed_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "n_shared_experts": 1,
    "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128, "v_head_dim": 128, "torch_dtype": "bfloat16",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
}
_GPT_OSS = {"hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
            "intermediate_size": 2880, "vocab_size": 201088, "max_position_embeddings": 131072,
            "num_experts_per_tok": 4, "sliding_window": 128, "torch_dtype": "bfloat16",
            "quantization_config": {"quant_method": "mxfp4"}}


def _gpt_oss(repo: str, params: float, layers: int, experts: int) -> ArchitecturePreset:
    # Every other layer attends to a 128-token window (config.json's layer_types), starting with a windowed one.
    types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    return ArchitecturePreset(repo, int(round(params * 1e9)), {**_GPT_OSS, "num_hidden_layers": layers,
                                                                "num_local_experts": experts, "layer_types": types})


LLM_PRESETS: dict[str, ArchitecturePreset] = {
    # Llama 3.x (meta-llama)
    "llama-3.2-1b": _dense("meta-llama/Llama-3.2-1B-Instruct", 1.24, 16, 2048, 32, 8, 8192, 128256, 131072,
                           head_dim=64, tie_word_embeddings=True),
    "llama-3.2-3b": _dense("meta-llama/Llama-3.2-3B-Instruct", 3.21, 28, 3072, 24, 8, 8192, 128256, 131072,
                           head_dim=128, tie_word_embeddings=True),
    "llama-3.1-8b": _dense("meta-llama/Llama-3.1-8B-Instruct", 8.03, 32, 4096, 32, 8, 14336, 128256, 131072),
    "llama-3.1-70b": _dense("meta-llama/Llama-3.1-70B-Instruct", 70.55, **_LLAMA_70B),
    "llama-3.3-70b": _dense("meta-llama/Llama-3.3-70B-Instruct", 70.55, **_LLAMA_70B),
    "llama-3.1-405b": _dense("meta-llama/Llama-3.1-405B-Instruct", 405.85, 126, 16384, 128, 8, 53248, 128256, 131072),
    # Qwen2.5 (Qwen), 0.5B to 72B
    "qwen2.5-0.5b": _dense("Qwen/Qwen2.5-0.5B-Instruct", 0.49, 24, 896, 14, 2, 4864, **_QWEN25_SMALL),
    "qwen2.5-1.5b": _dense("Qwen/Qwen2.5-1.5B-Instruct", 1.54, 28, 1536, 12, 2, 8960, **_QWEN25_SMALL),
    "qwen2.5-3b": _dense("Qwen/Qwen2.5-3B-Instruct", 3.09, 36, 2048, 16, 2, 11008, **_QWEN25_SMALL),
    "qwen2.5-7b": _dense("Qwen/Qwen2.5-7B-Instruct", 7.62, 28, 3584, 28, 4, 18944, **_QWEN25),
    "qwen2.5-14b": _dense("Qwen/Qwen2.5-14B-Instruct", 14.77, 48, 5120, 40, 8, 13824, **_QWEN25),
    "qwen2.5-32b": _dense("Qwen/Qwen2.5-32B-Instruct", 32.76, 64, 5120, 40, 8, 27648, **_QWEN25),
    "qwen2.5-72b": _dense("Qwen/Qwen2.5-72B-Instruct", 72.71, 80, 8192, 64, 8, 29568, **_QWEN25),
    # Qwen3 (Qwen): dense, and the two MoE models (every layer routed, 8 of 128 experts, no shared expert)
    "qwen3-0.6b": _dense("Qwen/Qwen3-0.6B", 0.6, 28, 1024, 16, 8, 3072, **_QWEN3, tie_word_embeddings=True),
    "qwen3-1.7b": _dense("Qwen/Qwen3-1.7B", 1.7, 28, 2048, 16, 8, 6144, **_QWEN3, tie_word_embeddings=True),
    "qwen3-4b": _dense("Qwen/Qwen3-4B", 4.0, 36, 2560, 32, 8, 9728, **_QWEN3, tie_word_embeddings=True),
    "qwen3-8b": _dense("Qwen/Qwen3-8B", 8.19, 36, 4096, 32, 8, 12288, **_QWEN3),
    "qwen3-14b": _dense("Qwen/Qwen3-14B", 14.77, 40, 5120, 40, 8, 17408, **_QWEN3),
    "qwen3-32b": _dense("Qwen/Qwen3-32B", 32.76, 64, 5120, 64, 8, 25600, **_QWEN3),
    "qwen3-30b-a3b": _dense("Qwen/Qwen3-30B-A3B", 30.53, 48, 2048, 32, 4, 6144, **_QWEN3, num_experts=128,
                            num_experts_per_tok=8, moe_intermediate_size=768),
    "qwen3-235b-a22b": _dense("Qwen/Qwen3-235B-A22B", 235.09, 94, 4096, 64, 4, 12288, **_QWEN3, num_experts=128,
                              num_experts_per_tok=8, moe_intermediate_size=1536),
    # Mistral and Mixtral (mistralai)
    "mistral-7b": _dense("mistralai/Mistral-7B-Instruct-v0.3", 7.25, 32, 4096, 32, 8, 14336, 32768, 32768),
    "mixtral-8x7b": _dense("mistralai/Mixtral-8x7B-Instruct-v0.1", 46.7, 32, 4096, 32, 8, 14336, 32000, 32768,
                           num_local_experts=8, num_experts_per_tok=2),
    "mixtral-8x22b": _dense("mistralai/Mixtral-8x22B-Instruct-v0.1", 140.6, 56, 6144, 48, 8, 16384, 32768, 65536,
                            num_local_experts=8, num_experts_per_tok=2),
    # Gemma 2 (local and global layers alternate) and Gemma 3 (five local layers to one global; 4B and up
    # are multimodal: params include the vision tower)
    "gemma-2-2b": _dense("google/gemma-2-2b-it", 2.61, 26, 2304, 8, 4, 9216, **_GEMMA2, head_dim=256, torch_dtype=None),
    "gemma-2-9b": _dense("google/gemma-2-9b-it", 9.24, 42, 3584, 16, 8, 14336, **_GEMMA2, head_dim=256,
                         torch_dtype=None),
    "gemma-2-27b": _dense("google/gemma-2-27b-it", 27.23, 46, 4608, 32, 16, 36864, **_GEMMA2, head_dim=128),
    "gemma-3-1b": _dense("google/gemma-3-1b-it", 1.0, 26, 1152, 4, 1, 6912, 262144, 32768, head_dim=256,
                         sliding_window=512, sliding_window_pattern=6, tie_word_embeddings=True),
    "gemma-3-4b": _dense("google/gemma-3-4b-it", 4.3, 34, 2560, 8, 4, 10240, **_GEMMA3, head_dim=256),
    "gemma-3-12b": _dense("google/gemma-3-12b-it", 12.2, 48, 3840, 16, 8, 15360, **_GEMMA3, head_dim=256),
    "gemma-3-27b": _dense("google/gemma-3-27b-it", 27.4, 62, 5376, 32, 16, 21504, **_GEMMA3, head_dim=128),
    # Phi-3 and Phi-4 (microsoft)
    "phi-3-mini": _dense("microsoft/Phi-3-mini-128k-instruct", 3.82, 32, 3072, 32, 32, 8192, 32064, 131072),
    "phi-3-medium": _dense("microsoft/Phi-3-medium-128k-instruct", 13.96, 40, 5120, 40, 10, 17920, 32064, 131072),
    "phi-4-mini": _dense("microsoft/Phi-4-mini-instruct", 3.84, 32, 3072, 24, 8, 8192, 200064, 131072,
                         tie_word_embeddings=True),
    "phi-4": _dense("microsoft/phi-4", 14.66, 40, 5120, 40, 10, 17920, 100352, 16384),
    # DeepSeek-V3 and R1 (deepseek-ai): MLA attention, 256 routed experts (8 per token) and one shared
    "deepseek-v3": ArchitecturePreset("deepseek-ai/DeepSeek-V3", 671_000_000_000, _DEEPSEEK_V3),
    "deepseek-r1": ArchitecturePreset("deepseek-ai/DeepSeek-R1", 671_000_000_000, _DEEPSEEK_V3),
    # gpt-oss (openai): MoE, 4 experts per token, alternating 128-token windows
    "gpt-oss-20b": _gpt_oss("openai/gpt-oss-20b", 20.91, 24, 32),
    "gpt-oss-120b": _gpt_oss("openai/gpt-oss-120b", 116.83, 36, 128),
}


# ---------------------------------------------------------------------------------------------- sizes in names
_SIZE = re.compile(r"(?<![a-z0-9.])((?:\d+x)?\d+(?:\.\d+)?)b(?![a-z0-9])")


def sizes_named(text: str) -> set[str]:
    """The sizes a model name states (``Qwen2.5-32B-Instruct`` -> {"32"}, ``Mixtral-8x7B`` -> {"8x7"}), as
    written; an active-parameter tag (``A22B``) is not a size."""
    return {_normal(s) for s in _SIZE.findall(text.lower().rsplit("/", 1)[-1])}


def _normal(size: str) -> str:
    head, _, tail = size.rpartition("x")
    return f"{head}x{float(tail):g}" if head else f"{float(tail):g}"


def family(name: str) -> str:
    """A preset's family: its name before the size (``qwen2.5-32b`` -> ``qwen2.5``)."""
    return _SIZE.split(name)[0].rstrip("-")


def presets_of_size(size: str, near: str) -> list[str]:
    """Presets that state ``size``, those of ``near``'s family first."""
    found = sorted(name for name in LLM_PRESETS if size in sizes_named(name))
    return sorted(found, key=lambda name: family(name) != family(near))
