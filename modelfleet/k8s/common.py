"""Pieces every workload's manifests share: labels, placement on GPU nodes, security, probes."""

from __future__ import annotations

from typing import Any

from ..plan import FleetPlan

GPU_RESOURCE = "nvidia.com/gpu"
MANAGED_BY = {"app.kubernetes.io/managed-by": "modelfleet"}
POD_SECURITY = {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "restricted"}


def labels(name: str, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": component, **MANAGED_BY}


def selector(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name}


def metadata(name: str, plan: FleetPlan, component: str, annotations: dict[str, str] | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": plan.namespace, "labels": labels(name, component)}
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    return meta


def checkov_skips(reasons: dict[str, str]) -> dict[str, str]:
    """``checkov.io/skipN: CHECK=reason`` annotations: every exception to a check is written down."""
    return {f"checkov.io/skip{i}": f"{check}={reason}" for i, (check, reason) in enumerate(sorted(reasons.items()), 1)}


def gpu_placement(instance_type: str, capacity_type: str) -> dict[str, Any]:
    """Only on this node group's nodes, tolerating the GPU taint every GPU node carries."""
    return {
        "nodeSelector": {"node.kubernetes.io/instance-type": instance_type,
                         "eks.amazonaws.com/capacityType": "SPOT" if capacity_type == "spot" else "ON_DEMAND"},
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
    }


def zone_spread(name: str) -> list[dict[str, Any]]:
    """Replicas in different availability zones: what an availability of 99.9% and above needs."""
    return [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": selector(name)}}]


def pod_security(run_as_user: int | None) -> dict[str, Any]:
    context: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if run_as_user is not None:
        context.update(runAsNonRoot=True, runAsUser=run_as_user, runAsGroup=run_as_user, fsGroup=run_as_user)
    return context


def container_security(read_only_root: bool, non_root: bool) -> dict[str, Any]:
    context: dict[str, Any] = {"allowPrivilegeEscalation": False, "privileged": False,
                               "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": read_only_root,
                               "seccompProfile": {"type": "RuntimeDefault"}}
    if non_root:
        context["runAsNonRoot"] = True
    return context


def http_probes(port: str, live: str, ready: str, startup_budget_s: int) -> dict[str, Any]:
    """Liveness and readiness, and a startup probe that gives a cold start ``startup_budget_s``."""
    def get(path: str) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": port}}

    return {
        "startupProbe": {**get(ready), "periodSeconds": 10, "failureThreshold": max(3, startup_budget_s // 10)},
        "livenessProbe": {**get(live), "periodSeconds": 10, "failureThreshold": 3, "timeoutSeconds": 5},
        "readinessProbe": {**get(ready), "periodSeconds": 5, "failureThreshold": 3, "timeoutSeconds": 5},
    }


def memory_volume(name: str, size_bytes: int) -> dict[str, Any]:
    return {"name": name, "emptyDir": {"medium": "Memory", "sizeLimit": f"{max(1, size_bytes // 1024**2)}Mi"}}


def disk_volume(name: str, size_gib: float) -> dict[str, Any]:
    return {"name": name, "emptyDir": {"sizeLimit": f"{max(1, int(size_gib + 0.999))}Gi"}}


def pdb(name: str, plan: FleetPlan, min_replicas: int) -> dict[str, Any]:
    """Voluntary disruptions (node drains, upgrades) never take the last HA replica; one at a time else."""
    budget = {"minAvailable": min_replicas - 1} if min_replicas >= 2 else {"maxUnavailable": 1}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": metadata(name, plan, "pdb"),
            "spec": {**budget, "selector": {"matchLabels": selector(name)}}}


def service_account(name: str, plan: FleetPlan) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(name, plan, "identity"),
            "automountServiceAccountToken": False}


def network_policy(name: str, plan: FleetPlan, ports: list[int], peers: bool = False) -> dict[str, Any]:
    """Ingress only to the serving and metrics ports (and, with ``peers``, anything between the workload's
    own pods: Ray's object store and workers use ports of their own choosing)."""
    rules: list[dict[str, Any]] = [{"ports": [{"protocol": "TCP", "port": p} for p in ports]}]
    if peers:
        rules.append({"from": [{"podSelector": {"matchLabels": selector(name)}}]})
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata(name, plan, "network"),
            "spec": {"podSelector": {"matchLabels": selector(name)}, "policyTypes": ["Ingress"], "ingress": rules}}


def service_monitor(name: str, plan: FleetPlan, port: str) -> dict[str, Any]:
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": metadata(name, plan, "metrics"),
            "spec": {"selector": {"matchLabels": selector(name)},
                     "endpoints": [{"port": port, "path": "/metrics", "interval": "15s"}]}}


def autoscaler(name: str, plan: FleetPlan, target: dict[str, str], metric: str, per_pod: str,
               bounds: tuple[int, int]) -> dict[str, Any] | None:
    """HPA on a per-pod queue metric served by prometheus-adapter; none when min == max."""
    low, high = bounds
    if low >= high:
        return None
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": metadata(name, plan, "autoscaling"),
            "spec": {"scaleTargetRef": target, "minReplicas": low, "maxReplicas": high,
                     "metrics": [{"type": "Pods", "pods": {"metric": {"name": metric},
                                                           "target": {"type": "AverageValue", "averageValue": per_pod}}}]}}
