"""Kubernetes manifests as plain data, from the plan (pure: no pulumi, no I/O).

``modelfleet render`` writes exactly these objects, and the Pulumi components apply exactly these objects,
so what a reviewer reads is what runs.

Autoscaling is ``autoscaling/v2`` HPAs on per-pod Prometheus metrics (Triton's
``nv_inference_pending_request_count`` per model, vLLM's ``vllm:num_requests_waiting``), served by
prometheus-adapter: the HPA is built in (schema-checked like every other object) and the adapter comes with
the usual Prometheus stack. A workload the stack lets scale to zero gets a KEDA ScaledObject instead
(keda.py). Every object of a fleet, with the alert rules and dashboards beside them: render/manifests.py.
"""

from __future__ import annotations

from ...plan.names import CLUSTER
from ...plan.serving.engine_args import TRITON_GRPC_PORT, TRITON_HTTP_PORT, VLLM_PORT
from ...plan.types import FleetPlan, VllmModelPlan
from ...spec.environment import DeploySettings
from .cluster import AMIS_WITHOUT_DEVICE_PLUGIN, render_cluster_manifests
from .triton import model_repository_prefix, render_triton_manifests, repository_files, repository_objects
from .vllm import from_hub, hf_secret_metadata, hf_secret_name, render_vllm_manifests
from .yaml_dump import dump_yaml

__all__ = ["AMIS_WITHOUT_DEVICE_PLUGIN", "CLUSTER", "dump_yaml", "from_hub", "hf_secret_metadata",
           "hf_secret_name", "model_repository_bucket", "model_repository_prefix",
           "render_cluster_manifests", "render_triton_manifests",
           "render_vllm_manifests", "repository_files", "repository_objects", "vllm_models", "workload_endpoints"]


def model_repository_bucket(plan: FleetPlan, deploy: DeploySettings) -> str:
    return deploy.model_repository_bucket or f"modelfleet-{plan.environment}-model-repository"


def vllm_models(plan: FleetPlan) -> list[VllmModelPlan]:
    """LLMs served by vLLM itself (one served by Triton's vLLM backend belongs to its Triton server)."""
    return [m for m in plan.models if isinstance(m, VllmModelPlan)]


def workload_endpoints(plan: FleetPlan) -> dict[str, str]:
    """In-cluster addresses: Triton's HTTP and gRPC, vLLM's OpenAI-compatible base URL."""
    def host(name: str) -> str:
        return f"{name}.{plan.namespace}.svc.cluster.local"

    endpoints = {s.name: f"http://{host(s.kube_name)}:{TRITON_HTTP_PORT} grpc://{host(s.kube_name)}:{TRITON_GRPC_PORT}"
                 for s in plan.triton_servers}
    endpoints |= {m.name: f"http://{host(m.name)}:{VLLM_PORT}/v1" for m in vllm_models(plan)}
    return dict(sorted(endpoints.items()))
