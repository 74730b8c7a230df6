"""NVIDIA's DCGM exporter on the fleet's GPU nodes, where the stack creates its cluster: a DaemonSet, its
Service and a ServiceMonitor (a joined cluster must run one already, or the GPU Operator's:
deploy/prerequisites.py).

As NVIDIA's example manifest (dcgm-exporter's deployment/examples/dcgm-exporter.yaml) runs it: root with
SYS_ADMIN only (the profiling fields), the kubelet's pod-resources socket read-only (which pod holds which GPU),
``DCGM_EXPORTER_KUBERNETES=true`` (those pods' names on the series). It reads the default counters file named
explicitly, the one render/observability/gpu_metrics.py checks every series against. Its requests are the ones the
node groups' DaemonSet allowance counts (spec/environment.py), so the fit check leaves them free.
"""

from __future__ import annotations

from typing import Any

from ...plan.types import FleetPlan
from ...spec.environment import DCGM_EXPORTER_CPU, DCGM_EXPORTER_MEMORY_GIB
from . import common as c

DCGM_EXPORTER = "dcgm-exporter"
# DCGM 4.5.3 with exporter 4.8.2: the release whose etc/default-counters.csv modelfleet/data ships.
DCGM_EXPORTER_VERSION = "4.5.3-4.8.2"
DCGM_EXPORTER_IMAGE = f"nvcr.io/nvidia/k8s/dcgm-exporter:{DCGM_EXPORTER_VERSION}-ubuntu22.04"
# NVIDIA's Helm chart of that exporter version, for a joined cluster (deploy/prerequisites.py)
DCGM_EXPORTER_CHARTS = "https://nvidia.github.io/dcgm-exporter/helm-charts"
DCGM_EXPORTER_CHART_VERSION = DCGM_EXPORTER_VERSION.split("-")[1]
COUNTERS_FILE = "/etc/dcgm-exporter/default-counters.csv"  # in the image, as etc/default-counters.csv
METRICS_PORT = 9400
POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources"
NAMESPACE = "kube-system"
SKIPS = {
    "CKV_K8S_43": "pinned by release tag, as NVIDIA publishes it",
    "CKV_K8S_15": "IfNotPresent: a DaemonSet on every GPU node must not depend on the registry to restart",
    "CKV_K8S_23": "root, as NVIDIA runs it: DCGM's host engine opens the GPUs' device files and profiling counters",
    "CKV_K8S_40": "root, as NVIDIA runs it: DCGM's host engine opens the GPUs' device files and profiling counters",
    "CKV_K8S_22": "writable, as NVIDIA's manifest leaves it: DCGM's host engine writes its socket and log in the image",
    "CKV_K8S_25": "SYS_ADMIN only, as NVIDIA's manifest adds it: the profiling fields (DCGM_FI_PROF_*) need it",
    "CKV_K8S_37": "SYS_ADMIN only, as NVIDIA's manifest adds it: the profiling fields (DCGM_FI_PROF_*) need it",
    "CKV_K8S_39": "SYS_ADMIN only, as NVIDIA's manifest adds it: the profiling fields (DCGM_FI_PROF_*) need it",
}
PSS_EXCEPTIONS = {
    "volumeTypes": f"hostPath {POD_RESOURCES_DIR} (read-only), the kubelet's pod-resources socket: which pod holds "
                   "which GPU, so that a GPU's series carry its pod",
    "capabilities": "SYS_ADMIN, for the profiling fields NVIDIA's default counters include",
    "runAsNonRoot": "DCGM's host engine runs as root (NVIDIA's manifest)",
}


def _labels() -> dict[str, str]:
    return c.labels(DCGM_EXPORTER, "gpu-metrics")


def _gpu_nodes(plan: FleetPlan) -> dict[str, Any]:
    """On the nodes of the fleet's GPU node groups only, by the group label every one of their nodes carries
    (a Karpenter pool's several types too); not on CPU or system nodes, which have no GPU to watch."""
    groups = sorted(g.name for g in plan.node_groups if g.device == "gpu")
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": c.NODE_GROUP_LABEL, "operator": "In", "values": groups}]}]}}}


def _container() -> dict[str, Any]:
    security = c.container_security(read_only_root=False, non_root=False)
    security["capabilities"] = {"add": ["SYS_ADMIN"], "drop": ["ALL"]}
    cpu, memory = f"{round(DCGM_EXPORTER_CPU * 1000)}m", f"{round(DCGM_EXPORTER_MEMORY_GIB * 1024)}Mi"
    probe = {"httpGet": {"path": "/health", "port": METRICS_PORT}, "periodSeconds": 30, "timeoutSeconds": 5}
    return {"name": DCGM_EXPORTER, "image": DCGM_EXPORTER_IMAGE, "imagePullPolicy": "IfNotPresent",
            "args": ["-f", COUNTERS_FILE],
            "env": [{"name": "DCGM_EXPORTER_LISTEN", "value": f":{METRICS_PORT}"},
                    {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
            "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
            "securityContext": security,
            "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": "200m", "memory": "512Mi"}},
            "readinessProbe": probe, "livenessProbe": {**probe, "initialDelaySeconds": 60},
            "volumeMounts": [{"name": "pod-resources", "mountPath": POD_RESOURCES_DIR, "readOnly": True}]}


def daemon_set(plan: FleetPlan) -> dict[str, Any]:
    exceptions = c.checkov_skips(SKIPS) | {
        "pod-security.modelfleet.io/" + control: reason for control, reason in PSS_EXCEPTIONS.items()}
    pod = {"priorityClassName": "system-node-critical", "automountServiceAccountToken": False,
           "securityContext": c.pod_security(None), "affinity": _gpu_nodes(plan),
           # every GPU node's taint (node groups: deploy/node_groups.py), whatever its effect
           "tolerations": [{"key": c.GPU_RESOURCE, "operator": "Exists"}],
           "containers": [_container()],
           "volumes": [{"name": "pod-resources", "hostPath": {"path": POD_RESOURCES_DIR, "type": "Directory"}}]}
    meta = {"name": DCGM_EXPORTER, "namespace": NAMESPACE, "labels": _labels(), "annotations": exceptions}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
            "spec": {"selector": {"matchLabels": c.selector(DCGM_EXPORTER)}, "updateStrategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": _labels(), "annotations": exceptions}, "spec": pod}}}


def service() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": DCGM_EXPORTER, "namespace": NAMESPACE, "labels": _labels()},
            "spec": {"type": "ClusterIP", "selector": c.selector(DCGM_EXPORTER),
                     "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}]}}


def _node_label(key: str) -> str:
    """Prometheus' discovery label for a node label (every character outside [a-zA-Z0-9_] becomes _)."""
    return "__meta_kubernetes_node_label_" + "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in key)


def service_monitor() -> dict[str, Any]:
    """Scraped every 15 s like the workloads; the exporter's own ``namespace``/``pod`` labels (the GPU's pod) win
    over the target's (the exporter's pod), and every series gets its node's plan group as ``node_group``."""
    relabel = [{"action": "replace", "sourceLabels": [_node_label(c.NODE_GROUP_LABEL)], "targetLabel": c.NODE_GROUP_METRIC_LABEL},
               {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}]
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": {"name": DCGM_EXPORTER, "namespace": NAMESPACE, "labels": _labels()},
            "spec": {"selector": {"matchLabels": c.selector(DCGM_EXPORTER)}, "attachMetadata": {"node": True},
                     "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "15s", "honorLabels": True,
                                    "relabelings": relabel}]}}


def network_policy() -> dict[str, Any]:
    """Only Prometheus (the monitoring namespace) reaches the exporter."""
    source = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": c.MONITORING_NAMESPACE}}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": DCGM_EXPORTER, "namespace": NAMESPACE, "labels": c.labels(DCGM_EXPORTER, "network")},
            "spec": {"podSelector": {"matchLabels": c.selector(DCGM_EXPORTER)}, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [source], "ports": [{"port": METRICS_PORT, "protocol": "TCP"}]}]}}


def render_dcgm_exporter(plan: FleetPlan) -> list[dict[str, Any]]:
    """The exporter's objects, in apply order; none for a fleet without GPU node groups."""
    if not any(g.device == "gpu" for g in plan.node_groups):
        return []
    return [daemon_set(plan), service(), service_monitor(), network_policy()]
