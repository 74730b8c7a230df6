"""Memory, speed and replica arithmetic: small pure functions whose numbers a reviewer can check by hand."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..spec.models import ArchitectureSpec
from ..spec.units import DTYPE_BYTES, GIB

# CUDA context, NCCL buffers, activations of one chunked-prefill step and CUDA graphs: vLLM needs a few GiB
# per GPU beyond weights and KV cache. 1.5 GiB per GPU is what vLLM's profiler reports for 8B-70B models
# with default chunked prefill (max_num_batched_tokens 8192) at bf16.
LLM_RUNTIME_OVERHEAD_GIB_PER_GPU = 1.5

# Pipeline stages (whole nodes) per replica at most: beyond 8, cross-node latency dominates; nobody serves so.
MAX_PIPELINE_STAGES = 8

# Prefill runs at roughly 40% of the GPU's dense FP16 peak (model FLOPs utilisation) in vLLM.
PREFILL_MFU = 0.4

# Triton: the CUDA context and the server's own device allocations, once per GPU.
TRITON_GPU_OVERHEAD_GIB = 0.75
# Activations and framework workspace for a classic model instance, relative to its weights
# (ONNX Runtime / TensorRT arenas); plus a fixed floor for tiny models.
CLASSIC_ACTIVATION_FACTOR = 0.5
CLASSIC_WORKSPACE_GIB = 0.25


def weights_gib(params: int, dtype: str) -> float:
    """Weights in GiB: params x bytes per parameter. 70.55B at bf16 -> 131.4 GiB."""
    return params * DTYPE_BYTES[dtype] / GIB


def kv_bytes_per_token(arch: ArchitectureSpec, kv_dtype_bytes: float) -> float:
    """KV cache for one token of one sequence, whole model: 2 (K and V) x layers x kv_heads x head_dim x bytes."""
    return 2 * arch.layers * arch.kv_heads * arch.head_dim * kv_dtype_bytes


def kv_bytes_per_token_per_gpu(arch: ArchitectureSpec, kv_dtype_bytes: float, tp: int, pp: int) -> float:
    """One GPU's share: its pipeline stage's layers and its KV heads (replicated when kv_heads < tp)."""
    layers = math.ceil(arch.layers / pp)
    heads = max(1, arch.kv_heads // tp)
    return 2 * layers * heads * arch.head_dim * kv_dtype_bytes


def tensor_parallel_ok(arch: ArchitectureSpec, tp: int) -> bool:
    """vLLM's rule: heads divide by tp; kv heads divide by tp, or tp by kv heads when there are fewer."""
    if arch.attention_heads % tp:
        return False
    return arch.kv_heads % tp == 0 if arch.kv_heads >= tp else tp % arch.kv_heads == 0


def prefill_ms(params: int, tokens: int, tp: int, fp16_tflops: float) -> float:
    """Time to first token for a ``tokens``-long prompt: 2 x params FLOPs per token on ``tp`` GPUs.

    Pipeline stages run one after another for a single prompt, so only tensor parallelism shortens it.
    """
    flops = 2.0 * params * tokens
    return flops / (tp * fp16_tflops * 1e12 * PREFILL_MFU) * 1000.0


def availability_floor(availability: float, ha: float, ha3: float) -> int:
    """Replicas that availability alone demands: 3 at ``ha3`` or above, 2 at ``ha`` or above, else 1."""
    if availability >= ha3:
        return 3
    return 2 if availability >= ha else 1


def nodes_for_pods(pods: Mapping[int, int], gpus_per_node: int) -> int:
    """Nodes needed to hold pods (GPUs per pod -> how many), first-fit decreasing; pods never span nodes.

    When the pod sizes divide one another and the node (1, 2, 4, 8 GPUs on nodes of 1, 4 or 8: every
    catalogue instance), first-fit decreasing leaves no gaps, so it needs exactly ceil(GPUs / GPUs per
    node): computed without listing the pods, which a load of millions of requests/s would make slow."""
    counts = {size: count for size, count in pods.items() if count > 0}
    sizes = sorted(counts)
    if all(big % small == 0 for small, big in zip(sizes, sizes[1:] + [gpus_per_node])):
        return math.ceil(sum(size * count for size, count in counts.items()) / gpus_per_node)
    free: list[int] = []
    for need in sorted((size for size, count in counts.items() for _ in range(count)), reverse=True):
        for index, room in enumerate(free):
            if room >= need:
                free[index] -= need
                break
        else:
            free.append(gpus_per_node - need)
    return len(free)
