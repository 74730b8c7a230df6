"""Kubernetes objects for one Triton server: identity, Deployment, Service, PDB, HPA, metrics, network."""

from __future__ import annotations

import math
import shlex
from typing import Any

from ..engine_args import MODEL_REPOSITORY_DIR, TRITON_GRPC_PORT, TRITON_HTTP_PORT, TRITON_METRICS_PORT, startup_budget_s
from ..plan import FleetPlan, TritonModelPlan, TritonServerPlan
from . import common as c

TRITON_UID = 1000  # the image's triton-server user (the image has no USER line, so we say it)
SKIPS = {
    "CKV_K8S_40": "the Triton image's own user triton-server is uid 1000; a higher uid has no home or libraries",
    "CKV_K8S_43": "images are pinned by release tag in the stack file; digests are resolved by the registry mirror",
    "CKV_K8S_15": "IfNotPresent: multi-GB serving images are not pulled again on every restart",
}


def model_repository_prefix(server: TritonServerPlan) -> str:
    """Where the server's config.pbtxt objects live in the model-repository bucket."""
    return f"triton/{server.name}"


def sync_script(bucket: str, server: TritonServerPlan, plan: FleetPlan) -> str:
    """The init container's shell: the server's configs, then each model's versions from where they live."""
    steps = [f"aws s3 sync --only-show-errors {shlex.quote(f's3://{bucket}/{model_repository_prefix(server)}/')} "
             f"{MODEL_REPOSITORY_DIR}/"]
    for name in server.models:
        model = plan.model(name)
        if isinstance(model, TritonModelPlan):
            source = model.artifact.rstrip("/") + "/"
            steps.append(f"aws s3 sync --only-show-errors --exclude config.pbtxt {shlex.quote(source)} "
                         f"{shlex.quote(f'{MODEL_REPOSITORY_DIR}/{name}/')}")
    return "set -eu\n" + "\n".join(steps) + "\n"


def _exit_timeout_s(server: TritonServerPlan) -> int:
    flag = next(a for a in server.args if a.startswith("--exit-timeout-secs="))
    return int(flag.split("=", 1)[1])


def _container(server: TritonServerPlan, cpu: str) -> dict[str, Any]:
    memory = f"{math.ceil(server.memory_request_gib * 1024)}Mi"
    return {
        "name": "triton", "image": server.image, "imagePullPolicy": "IfNotPresent",
        "command": [server.args[0]], "args": list(server.args[1:]),
        "ports": [{"name": "http", "containerPort": TRITON_HTTP_PORT}, {"name": "grpc", "containerPort": TRITON_GRPC_PORT},
                  {"name": "metrics", "containerPort": TRITON_METRICS_PORT}],
        "resources": {"requests": {"cpu": cpu, "memory": memory, c.GPU_RESOURCE: server.gpus_per_replica},
                      "limits": {"cpu": cpu, "memory": memory, c.GPU_RESOURCE: server.gpus_per_replica}},
        **c.http_probes("http", "/v2/health/live", "/v2/health/ready", startup_budget_s(server.gpu_memory_used_gib)),
        "securityContext": c.container_security(read_only_root=True, non_root=True),
        "volumeMounts": [{"name": "models", "mountPath": MODEL_REPOSITORY_DIR}, {"name": "dshm", "mountPath": "/dev/shm"},
                         {"name": "tmp", "mountPath": "/tmp"}],
    }


def _init_container(script: str, image: str) -> dict[str, Any]:
    return {"name": "model-repository", "image": image, "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/sh", "-c", script],
            "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
            "securityContext": c.container_security(read_only_root=True, non_root=True),
            "env": [{"name": "HOME", "value": "/tmp"}],
            "volumeMounts": [{"name": "models", "mountPath": MODEL_REPOSITORY_DIR}, {"name": "tmp", "mountPath": "/tmp"}]}


def deployment(server: TritonServerPlan, plan: FleetPlan, bucket: str, aws_cli_image: str, cpu: str) -> dict[str, Any]:
    group = plan.node_group(server.node_group)
    repository_gib = 2 + sum(plan.model(n).weights_gib * 2 for n in server.models)
    pod: dict[str, Any] = {
        "serviceAccountName": server.name, "automountServiceAccountToken": False,
        "securityContext": c.pod_security(TRITON_UID), **c.gpu_placement(group.instance_type, group.capacity_type),
        "initContainers": [_init_container(sync_script(bucket, server, plan), aws_cli_image)],
        "containers": [_container(server, cpu)],
        "volumes": [c.disk_volume("models", repository_gib), c.memory_volume("dshm", max(server.python_shm_bytes * 2, 64 * 1024**2)),
                    c.disk_volume("tmp", 1)],
        "terminationGracePeriodSeconds": _exit_timeout_s(server) + 10,  # Triton drains, then the kubelet kills
    }
    if server.spread_zones:
        pod["topologySpreadConstraints"] = c.zone_spread(server.name)
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": c.metadata(server.name, plan, "triton", c.checkov_skips(SKIPS)),
            "spec": {"replicas": server.replicas, "selector": {"matchLabels": c.selector(server.name)},
                     "template": {"metadata": {"labels": c.labels(server.name, "triton"),
                                               "annotations": c.checkov_skips(SKIPS)}, "spec": pod}}}


def service(server: TritonServerPlan, plan: FleetPlan) -> dict[str, Any]:
    ports = [("http", TRITON_HTTP_PORT), ("grpc", TRITON_GRPC_PORT), ("metrics", TRITON_METRICS_PORT)]
    return {"apiVersion": "v1", "kind": "Service", "metadata": c.metadata(server.name, plan, "triton"),
            "spec": {"type": "ClusterIP", "selector": c.selector(server.name),
                     "ports": [{"name": n, "port": p, "targetPort": n, "protocol": "TCP"} for n, p in ports]}}


def triton_manifests(server: TritonServerPlan, plan: FleetPlan, bucket: str, aws_cli_image: str) -> list[dict[str, Any]]:
    """Everything one Triton server needs, in apply order. ``bucket`` holds the server's configs."""
    group = plan.node_group(server.node_group)
    cpu = str(max(1, group.vcpu // group.gpus_per_node - 1))  # the node's CPU share, one core left to the system
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": server.name}
    scaler = c.autoscaler(server.name, plan, target, "nv_inference_pending_request_count", "8",
                          (server.min_replicas, server.max_replicas))
    objects = [c.service_account(server.name, plan), deployment(server, plan, bucket, aws_cli_image, cpu),
               service(server, plan), c.pdb(server.name, plan, server.min_replicas),
               c.network_policy(server.name, plan, [TRITON_HTTP_PORT, TRITON_GRPC_PORT, TRITON_METRICS_PORT]),
               c.service_monitor(server.name, plan, "metrics")]
    return objects + ([scaler] if scaler else [])
