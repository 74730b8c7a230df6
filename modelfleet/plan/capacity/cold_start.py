"""Scale to zero: which workloads may sit at zero replicas when idle, and what their first request then waits.

A stack that sets ``replicas.minimum: 0`` lets every workload whose availability floor is one replica (every
workload of a single-replica stack; elsewhere those below the high-availability threshold) scale to zero:
KEDA's ScaledObject activates it on the first queued request (render/k8s/keda.py) and its node group or
NodePool has a minimum of 0 nodes. A workload whose floor is two or more replicas keeps it: an availability
promise cannot be kept by a workload that is sometimes absent.

The cold start is the sum of four steps, each from the basis it states (expected figures, not the probes'
budgets, which are far larger):

- node launch: ``NODE_LAUNCH_S``, a GPU instance from launch to a Ready node whose device plugin has
  registered its GPUs (EC2 boot, the AL2023 nodeadm join, the NVIDIA plugin): an assumption, typical of the
  2 to 4 minutes EKS GPU nodes take; p4d/p5 boot slower;
- image pull: the compressed serving image (``IMAGE_PULL_GIB``) at ``IMAGE_PULL_GIB_PER_S``, pull and unpack;
- weights: what each pod reads (plan/llm/weights.py: S3 or the Hub at DOWNLOAD_GIB_PER_S, the documented
  0.5 GiB/s; a Triton pod's artifacts at its share of the node's disk, capacity/disk.py);
- engine start: vLLM's CUDA graph capture and warmup (``VLLM_ENGINE_START_S``), Triton's model load
  (``TRITON_ENGINE_START_S``);

and then the first request's own latency: an LLM's prefill of the average prompt on an idle replica, a Triton
model's full batch.
"""

from __future__ import annotations

import math

from ...spec.environment import EnvironmentSpec
from ..serving.engine_args import DOWNLOAD_GIB_PER_S
from ..types import ColdStartPlan, FleetPlan, TritonModelPlan, TritonServerPlan, VllmModelPlan
from . import disk

NODE_LAUNCH_S = 180  # assumed: EC2 launch to a Ready GPU node with its GPUs registered
IMAGE_PULL_GIB = 10.0  # a serving image's compressed layers (about 20 GB unpacked: capacity/node_volume.IMAGE_GIB)
IMAGE_PULL_GIB_PER_S = 0.125  # containerd pulling and unpacking one large image (about 128 MiB/s)
VLLM_ENGINE_START_S = 90  # vLLM after its weights: profiling run, KV cache allocation, CUDA graph capture
TRITON_ENGINE_START_S = 20  # Triton after its artifacts are local: loading each model and its warmup
BASIS = (f"node launch {NODE_LAUNCH_S} s (assumed, typical for EKS GPU nodes), image {IMAGE_PULL_GIB:g} GiB at "
         f"{IMAGE_PULL_GIB_PER_S:g} GiB/s, weights at the pod's read rate ({DOWNLOAD_GIB_PER_S:g} GiB/s from S3 or "
         "the Hub, or its disk share), engine start (vLLM "
         f"{VLLM_ENGINE_START_S} s, Triton {TRITON_ENGINE_START_S} s, assumed), then the first request itself")


def scales_to_zero(env: EnvironmentSpec, min_replicas: int) -> bool:
    """A workload idles at zero when the stack allows it and its availability floor is one replica."""
    return env.replicas.minimum == 0 and min_replicas == 1


def _image_s() -> int:
    return math.ceil(IMAGE_PULL_GIB / IMAGE_PULL_GIB_PER_S)


def vllm_cold_start(model: VllmModelPlan, plan: FleetPlan) -> ColdStartPlan:
    weights = model.weights
    assert weights is not None  # set by the compiler
    rate = DOWNLOAD_GIB_PER_S if not disk.from_hub(model) else disk.pod_download_gib_s(plan, model.node_group)
    weights_s = math.ceil(weights.pod_read_gib / rate)
    first_ms = model.estimates.prefill_ms if model.estimates else 0.0
    return _plan(weights_s, VLLM_ENGINE_START_S, first_ms)


def triton_cold_start(server: TritonServerPlan, plan: FleetPlan) -> ColdStartPlan:
    weights_s = math.ceil(disk.triton_download_gib(server, plan) / disk.pod_download_gib_s(plan, server.node_group))
    models = [plan.model(n) for n in server.models]
    first_ms = max((m.compute_ms for m in models if isinstance(m, TritonModelPlan)), default=0.0)
    return _plan(weights_s, TRITON_ENGINE_START_S, first_ms)


def _plan(weights_s: int, engine_s: int, first_ms: float) -> ColdStartPlan:
    total = NODE_LAUNCH_S + _image_s() + weights_s + engine_s + math.ceil(first_ms / 1000)
    return ColdStartPlan(node_launch_s=NODE_LAUNCH_S, image_pull_s=_image_s(), weights_s=weights_s,
                         engine_start_s=engine_s, first_request_ms=round(first_ms, 1), total_s=total, basis=BASIS)


def with_cold_starts(plan: FleetPlan) -> FleetPlan:
    """Every workload at a minimum of 0 replicas, with its cold start."""
    servers = tuple(s.model_copy(update={"cold_start": triton_cold_start(s, plan)}) if s.min_replicas == 0 else s
                    for s in plan.triton_servers)
    models = tuple(m.model_copy(update={"cold_start": vllm_cold_start(m, plan)})
                   if isinstance(m, VllmModelPlan) and m.min_replicas == 0 else m for m in plan.models)
    return plan.model_copy(update={"triton_servers": servers, "models": models})
