"""Memory and replica arithmetic: small pure functions whose numbers a reviewer can check by hand."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..spec.architecture import ArchitectureSpec, ResolvedArchitecture
from ..spec.environment import EnvironmentSpec
from ..spec.units import DTYPE_BYTES, GIB

# CUDA context, NCCL buffers, activations of one chunked-prefill step and CUDA graphs: vLLM needs a few GiB
# per GPU beyond weights and KV cache. 1.5 GiB per GPU is what vLLM's profiler reports for 8B-70B models
# with default chunked prefill (max_num_batched_tokens 8192) at bf16.
LLM_RUNTIME_OVERHEAD_GIB_PER_GPU = 1.5

# Pipeline stages (whole nodes) per replica at most: beyond 8, cross-node latency dominates; nobody serves so.
MAX_PIPELINE_STAGES = 8

# Triton: the CUDA context and the server's own device allocations, once per GPU.
TRITON_GPU_OVERHEAD_GIB = 0.75
# Activations and framework workspace for a classic model instance, relative to its weights
# (ONNX Runtime / TensorRT arenas); plus a fixed floor for tiny models.
CLASSIC_ACTIVATION_FACTOR = 0.5
CLASSIC_WORKSPACE_GIB = 0.25


def weights_gib(params: int, dtype: str) -> float:
    """Weights in GiB: params x bytes per parameter. 70.55B at bf16 -> 131.4 GiB."""
    return params * DTYPE_BYTES[dtype] / GIB


def tensor_parallel_ok(arch: ArchitectureSpec | ResolvedArchitecture, tp: int) -> bool:
    """vLLM's rule: heads divide by tp; kv heads divide by tp, or tp by kv heads when there are fewer."""
    if arch.attention_heads % tp:
        return False
    return arch.kv_heads % tp == 0 if arch.kv_heads >= tp else tp % arch.kv_heads == 0


def availability_floor(availability: float, ha: float, ha3: float) -> int:
    """Replicas that availability alone demands: 3 at ``ha3`` or above, 2 at ``ha`` or above, else 1."""
    if availability >= ha3:
        return 3
    return 2 if availability >= ha else 1


def replica_floor(env: EnvironmentSpec, availability: float) -> int:
    """The one replica floor of every workload (LLM, Triton server, CPU server): what the availability SLA
    demands under the stack's thresholds, and 1 in a single-replica stack."""
    if env.replicas.single_replica:
        return 1
    return availability_floor(availability, env.replicas.ha_availability, env.replicas.ha3_availability)


def spreads_over_zones(min_replicas: int) -> bool:
    """Whether a workload's replicas are spread over zones (a topology constraint, a PDB that keeps one): when
    its floor holds two or more, so that losing a zone leaves one serving."""
    return min_replicas >= 2


def on_demand_replicas(env: EnvironmentSpec, min_replicas: int) -> int:
    """Replicas held on on-demand nodes: on a spot stack, a floor spread over zones (a spot reclaim can take every
    spot node of a type at once, which would break the availability the floor is for); else none."""
    return min_replicas if env.capacity_type == "spot" and spreads_over_zones(min_replicas) else 0


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
