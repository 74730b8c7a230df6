"""Kubernetes objects for one vLLM model: a Deployment (one node per replica) or a LeaderWorkerSet with Ray
(pipeline parallel across nodes), Service, PDB, HPA on vllm:num_requests_waiting, metrics, network."""

from __future__ import annotations

import math
import shlex
from typing import Any

from ..engine_args import VLLM_PORT, startup_budget_s
from ..plan import FleetPlan, VllmModelPlan
from . import common as c

HF_CACHE = "/root/.cache/huggingface"
HF_TOKEN_DIR = "/var/run/secrets/huggingface"
RAY_PORT = 6379
SKIPS = {
    "CKV_K8S_23": "the vLLM image runs as root (no non-root user in vllm/vllm-openai)",
    "CKV_K8S_40": "the vLLM image runs as root (no non-root user in vllm/vllm-openai)",
    "CKV_K8S_22": "vLLM and Ray write torch.compile, Triton-kernel and Ray session files under / at start-up",
    "CKV_K8S_43": "images are pinned by release tag in the stack file; digests are resolved by the registry mirror",
    "CKV_K8S_15": "IfNotPresent: multi-GB serving images are not pulled again on every restart",
}


def hf_secret_name(model: VllmModelPlan) -> str:
    return f"{model.name}-hf-token"


def _container(model: VllmModelPlan, plan: FleetPlan, command: list[str], serving: bool) -> dict[str, Any]:
    group = plan.node_group(model.node_group)
    cpu = str(max(1, group.vcpu * model.gpus_per_pod // group.gpus_per_node - 2))
    memory = f"{math.ceil(model.memory_request_gib * 1024)}Mi"
    container: dict[str, Any] = {
        "name": "vllm", "image": model.image, "imagePullPolicy": "IfNotPresent", "command": command,
        "env": [{"name": "HF_HOME", "value": HF_CACHE}, {"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_DIR}/token"}],
        "resources": {"requests": {"cpu": cpu, "memory": memory, c.GPU_RESOURCE: model.gpus_per_pod},
                      "limits": {"cpu": cpu, "memory": memory, c.GPU_RESOURCE: model.gpus_per_pod}},
        "securityContext": c.container_security(read_only_root=False, non_root=False),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "hf-cache", "mountPath": HF_CACHE},
                         {"name": "hf-token", "mountPath": HF_TOKEN_DIR, "readOnly": True}],
    }
    if serving:
        container["ports"] = [{"name": "http", "containerPort": VLLM_PORT}]
        budget = startup_budget_s(model.weights_gib / model.nodes_per_replica)
        container.update(c.http_probes("http", "/health", "/health", budget))
    else:
        container["ports"] = [{"name": "ray", "containerPort": RAY_PORT}]
        probe = {"exec": {"command": ["ray", "health-check"]}, "periodSeconds": 15, "timeoutSeconds": 10}
        container.update(livenessProbe=dict(probe, initialDelaySeconds=60), readinessProbe=dict(probe))
    return container


def _pod(model: VllmModelPlan, plan: FleetPlan, container: dict[str, Any]) -> dict[str, Any]:
    group = plan.node_group(model.node_group)
    pod: dict[str, Any] = {
        "serviceAccountName": model.name, "automountServiceAccountToken": False,
        "securityContext": c.pod_security(None), **c.gpu_placement(group.instance_type, group.capacity_type),
        "containers": [container],
        "volumes": [c.memory_volume("dshm", int(model.shm_size_gib * 1024**3)),
                    c.disk_volume("hf-cache", model.weights_gib / model.nodes_per_replica * 1.1 + 5),
                    {"name": "hf-token", "secret": {"secretName": hf_secret_name(model), "defaultMode": 0o400}}],
        "terminationGracePeriodSeconds": 60,
    }
    if model.spread_zones and model.nodes_per_replica == 1:
        pod["topologySpreadConstraints"] = c.zone_spread(model.name)
    return pod


def _template(model: VllmModelPlan, plan: FleetPlan, pod: dict[str, Any], role: str | None = None) -> dict[str, Any]:
    labels = c.labels(model.name, "vllm") | ({"role": role} if role else {})
    return {"metadata": {"labels": labels, "annotations": c.checkov_skips(SKIPS)}, "spec": pod}


def workload(model: VllmModelPlan, plan: FleetPlan) -> dict[str, Any]:
    meta = c.metadata(model.name, plan, "vllm", c.checkov_skips(SKIPS))
    if model.nodes_per_replica == 1:
        pod = _pod(model, plan, _container(model, plan, list(model.args), serving=True))
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                "spec": {"replicas": model.replicas, "selector": {"matchLabels": c.selector(model.name)},
                         "template": _template(model, plan, pod)}}
    leader = ["/bin/sh", "-c", f"ray start --head --port={RAY_PORT} && exec {shlex.join(model.args)}"]
    worker = ["/bin/sh", "-c", f"exec ray start --address=$(LWS_LEADER_ADDRESS):{RAY_PORT} --block"]
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta,
            "spec": {"replicas": model.replicas, "startupPolicy": "LeaderCreated",
                     "leaderWorkerTemplate": {
                         "size": model.nodes_per_replica, "restartPolicy": "RecreateGroupOnPodRestart",
                         "leaderTemplate": _template(model, plan, _pod(model, plan, _container(model, plan, leader, True)), "leader"),
                         "workerTemplate": _template(model, plan, _pod(model, plan, _container(model, plan, worker, False)), "worker")}}}


def service(model: VllmModelPlan, plan: FleetPlan) -> dict[str, Any]:
    select = c.selector(model.name) | ({"role": "leader"} if model.nodes_per_replica > 1 else {})
    return {"apiVersion": "v1", "kind": "Service", "metadata": c.metadata(model.name, plan, "vllm"),
            "spec": {"type": "ClusterIP", "selector": select,
                     "ports": [{"name": "http", "port": VLLM_PORT, "targetPort": "http", "protocol": "TCP"}]}}


def vllm_manifests(model: VllmModelPlan, plan: FleetPlan) -> list[dict[str, Any]]:
    """Everything one vLLM model needs except its HF token Secret (a Pulumi secret, made by the component)."""
    kind = "Deployment" if model.nodes_per_replica == 1 else "LeaderWorkerSet"
    api = "apps/v1" if kind == "Deployment" else "leaderworkerset.x-k8s.io/v1"
    target = {"apiVersion": api, "kind": kind, "name": model.name}
    waiting_per_replica = str(max(1, model.max_num_seqs // 4))  # a quarter of a replica's batch waiting: scale out
    scaler = c.autoscaler(model.name, plan, target, "vllm:num_requests_waiting", waiting_per_replica,
                          (model.min_replicas, model.max_replicas))
    pdb = c.pdb(model.name, plan, model.min_replicas)
    if model.nodes_per_replica > 1:
        pdb["spec"]["selector"]["matchLabels"] = c.selector(model.name) | {"role": "leader"}
    objects = [c.service_account(model.name, plan), workload(model, plan), service(model, plan), pdb,
               c.network_policy(model.name, plan, [VLLM_PORT], peers=model.nodes_per_replica > 1), c.service_monitor(model.name, plan, "http")]
    return objects + ([scaler] if scaler else [])
