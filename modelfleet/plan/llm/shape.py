"""An LLM as the planner weighs it: its shape for the speed model, and what it holds in GPU memory.

- Weights count every expert of a MoE model (all stay resident); compute and decode reads count the active
  ones (llm/speed/performance.py does, from the shape).
- The KV cache of one sequence: MLA keeps one latent vector of ``kv_lora_rank + qk_rope_head_dim`` elements per
  token and layer, whole on every tensor-parallel rank; GQA keeps K and V of each KV head (a rank holds
  ``kv_heads / tp`` of them, at least one: vLLM replicates heads when there are fewer than ranks); a
  sliding-window layer keeps at most its window (vLLM's hybrid KV-cache manager frees the rest).
- LoRA: vLLM preallocates, on every GPU, ``max_loras`` slots of ``max_rank`` for each adapted projection.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from typing import TYPE_CHECKING

from ...spec.architecture import ResolvedArchitecture
from ...spec.models import LlmModelSpec
from ...spec.units import DTYPE_BYTES, GIB
from .speed.performance import LlmShape, shape_from_fields

if TYPE_CHECKING:
    from .precision import Precision


def weight_dtype(model: LlmModelSpec) -> str:
    return model.size.dtype or "bf16"  # memory_gib without a dtype: a 16-bit checkpoint, as most are


def model_params(model: LlmModelSpec) -> int:
    """Parameters the weights hold: declared, the preset's published count, or counted from the config's
    figures (every expert)."""
    return model.resolved_params() or _shape(model.resolved_architecture(), None, 2.0, 2.0, False).params()


def llm_weights_gib(model: LlmModelSpec) -> float:
    """Weights in GPU memory, GiB: declared memory, or the parameters x the dtype's bytes."""
    if model.size.memory_gib is not None:
        return model.size.memory_gib
    return model_params(model) * DTYPE_BYTES[weight_dtype(model)] / GIB


def model_shape(model: LlmModelSpec, precision: Precision) -> LlmShape:
    """The model's LlmShape at the precision it is served at (weights' and KV cache's bytes)."""
    wb = DTYPE_BYTES[weight_dtype(model)]
    return _shape(model.resolved_architecture(), params_hint(model), wb, precision.kv_bytes,
                  precision.weights == "fp8")


def params_hint(model: LlmModelSpec) -> int | None:
    """Parameters the figures' widths must add up to: declared, or what size.memory_gib holds at the dtype."""
    if model.size.params is not None:
        return model.size.params
    if model.size.memory_gib is not None:
        return max(1, int(model.size.memory_gib * GIB / DTYPE_BYTES[weight_dtype(model)]))
    return None


@functools.lru_cache(maxsize=4096)
def _shape(arch: ResolvedArchitecture, params: int | None, weight_bytes: float, kv_bytes: float,
           fp8: bool) -> LlmShape:
    fields = arch.fields
    if not fields.get("intermediate"):
        fields["intermediate"] = _derived_mlp(fields, params or arch.params)
    shape = shape_from_fields(fields, weight_bytes=weight_bytes, kv_bytes=kv_bytes)
    return shape if fp8 or weight_bytes > 1.0 else _no_fp8(shape)


def _no_fp8(shape: LlmShape) -> LlmShape:
    """int8 checkpoints (GPTQ, W8A16) compute at 16-bit: only fp8 weights use FP8 tensor cores."""
    return dataclasses.replace(shape, fp8_weights=False)


def _derived_mlp(fields: dict, params: int | None) -> int:
    """The MLP width that makes the explicit figures add up to ``params`` (SwiGLU: 3 x hidden x width per
    layer); 4 x hidden when the parameters are unknown too."""
    hidden, layers = fields["hidden"], fields["layers"]
    if not params:
        return 4 * hidden
    heads, kv, head_dim = fields["heads"], fields["kv_heads"], fields["head_dim"]
    attention = hidden * (heads + 2 * kv) * head_dim + heads * head_dim * hidden
    rest = params - 2 * fields["vocab"] * hidden - layers * attention
    return max(hidden, int(rest / (3 * hidden * layers)))


def kv_bytes_per_sequence(shape: LlmShape, tokens: int, tp: int, pp: int) -> float:
    """One GPU's share of the KV cache of a sequence of ``tokens``: its stage's layers (see the docstring)."""
    per_token_layer = shape.kv_elements_per_token_per_layer(tp) * shape.kv_bytes
    windowed = shape.sliding_window_layers if shape.sliding_window else 0
    full = shape.layers - windowed
    total = (full * tokens + windowed * min(tokens, shape.sliding_window)) * per_token_layer
    return total * math.ceil(shape.layers / pp) / shape.layers


def lora_gib_per_gpu(model: LlmModelSpec, shape: LlmShape, tp: int, pp: int) -> float:
    """vLLM's LoRA buffers on one GPU: for each adapted projection (q, k, v, o, gate, up, down), ``max_loras``
    x ``max_rank`` x (inputs + outputs) at 16-bit, the outputs of column-parallel ones and the inputs of
    row-parallel ones split over ``tp``; MoE experts are not adapted."""
    if model.lora is None:
        return 0.0
    h, q, kv = shape.hidden, shape.heads * shape.qk_head_dim, max(1, shape.kv_heads) * shape.head_dim
    inner = shape.intermediate if not shape.is_moe else shape.shared_expert_intermediate
    per_rank = (h + q / tp) + 2 * (h + kv / tp) + (q / tp + h) + 2 * (h + inner / tp) + (inner / tp + h)
    layers = math.ceil(shape.layers / pp)
    return model.lora.loras * model.lora.max_rank * per_rank * layers * 2.0 / GIB
