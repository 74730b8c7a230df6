"""Cluster-wide objects: the namespace, and the NVIDIA device plugin where the node AMI lacks it."""

from __future__ import annotations

from typing import Any

from ..plan import FleetPlan
from . import common as c

DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"
DEVICE_PLUGIN_SKIPS = {
    "CKV_K8S_43": "pinned by release tag, as NVIDIA publishes it",
    "CKV_K8S_23": "the device plugin registers with the kubelet through a root-owned hostPath socket",
    "CKV_K8S_40": "the device plugin registers with the kubelet through a root-owned hostPath socket",
    "CKV_K8S_15": "IfNotPresent: a DaemonSet on every GPU node must not depend on the registry to restart",
}


def namespace(plan: FleetPlan) -> dict[str, Any]:
    """Baseline Pod Security enforced (the vLLM image runs as root), restricted reported as warnings."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": plan.namespace, "labels": {**c.MANAGED_BY, **c.POD_SECURITY}}}


def device_plugin_network_policy() -> dict[str, Any]:
    """The device plugin talks to the kubelet over a socket; nothing needs to reach it over the network."""
    name = "nvidia-device-plugin"
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": "kube-system", "labels": c.labels(name, "network")},
            "spec": {"podSelector": {"matchLabels": c.selector(name)}, "policyTypes": ["Ingress"], "ingress": []}}


def device_plugin(plan: FleetPlan) -> dict[str, Any]:
    """NVIDIA's device plugin on GPU nodes only (AL2023 NVIDIA AMIs have the driver, not the plugin)."""
    name = "nvidia-device-plugin"
    meta = {"name": name, "namespace": "kube-system", "labels": c.labels(name, "device-plugin"),
            "annotations": c.checkov_skips(DEVICE_PLUGIN_SKIPS)}
    container = {
        "name": name, "image": DEVICE_PLUGIN_IMAGE, "imagePullPolicy": "IfNotPresent",
        "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
        "securityContext": c.container_security(read_only_root=True, non_root=False),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "128Mi"}},
        "livenessProbe": {"exec": {"command": ["test", "-S", "/var/lib/kubelet/device-plugins/nvidia-gpu.sock"]},
                          "periodSeconds": 30, "initialDelaySeconds": 30},
        "readinessProbe": {"exec": {"command": ["test", "-S", "/var/lib/kubelet/device-plugins/nvidia-gpu.sock"]},
                           "periodSeconds": 30},
        "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}]}
    instance_types = sorted({g.instance_type for g in plan.node_groups})
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types}]}]}}}
    pod = {"priorityClassName": "system-node-critical", "automountServiceAccountToken": False,
           "securityContext": c.pod_security(None), "affinity": affinity,
           "tolerations": [{"key": c.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
           "containers": [container],
           "volumes": [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins",
                                                              "type": "Directory"}}]}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
            "spec": {"selector": {"matchLabels": c.selector(name)}, "updateStrategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": c.labels(name, "device-plugin"),
                                               "annotations": c.checkov_skips(DEVICE_PLUGIN_SKIPS)}, "spec": pod}}}
