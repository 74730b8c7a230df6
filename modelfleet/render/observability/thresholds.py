"""The plan's figures the alerts compare against: a model's queue bound, whether Triton reports its request
latency, how long a workload's pods may take to become ready."""

from __future__ import annotations

import math

from ...plan.types import FleetPlan, TritonModelPlan, TritonServerPlan, VllmModelPlan
from ..k8s import common as c
from ..k8s import triton as triton_k8s
from ..k8s import vllm as vllm_k8s


def queue_bound(model: TritonModelPlan) -> int:
    """The queue length past which Triton answers with REJECT: the compiled max_queue_size (each priority
    level's, added up), or what the model's instances drain within its queue timeout, whichever is smaller;
    0 when nothing bounds it (the sequence batcher has no queue policy)."""
    if model.sequence is not None:
        return 0
    sizes = [level.max_queue_size for level in model.priority_levels] or [model.max_queue_size]
    bounds = [sum(sizes)] if all(sizes) else []
    if model.queue_timeout_us and not model.decoupled:  # a decoupled model's requests take their own time
        bounds.append(math.floor(model.rps_per_instance * model.instance_count * model.queue_timeout_us / 1e6))
    return max(1, min(bounds)) if bounds else 0


def triton_cached(model: TritonModelPlan) -> bool:
    """Triton omits the request-latency summary of a model with the response cache."""
    return model.response_cache


def pod_ready_budget_s(plan: FleetPlan, workload: TritonServerPlan | VllmModelPlan) -> int:
    """What a new pod may take before it is ready: a node, the image, the artifacts' copy and the cold start
    (the same figures the probes and Pulumi's wait are given)."""
    if isinstance(workload, TritonServerPlan):
        cold = triton_k8s.copy_s(workload, plan) + triton_k8s.startup_s(workload, plan)
    else:
        cold = vllm_k8s.cold_start_s(workload, plan)
    return c.NODE_AND_IMAGE_S + cold
