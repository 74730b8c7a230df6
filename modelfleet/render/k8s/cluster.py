"""Cluster-wide objects: the namespace, the NVIDIA device plugin where the node AMI lacks it, and the DCGM
exporter where the stack creates the cluster."""

from __future__ import annotations

from typing import Any

from ...plan.types import FleetPlan
from . import common as c
from .dcgm_exporter import render_dcgm_exporter

DEVICE_PLUGIN = "nvidia-device-plugin"
DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"
DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
# AMIs that ship the NVIDIA driver but not the device plugin (Bottlerocket NVIDIA ships both).
AMIS_WITHOUT_DEVICE_PLUGIN = ("AL2023_x86_64_NVIDIA",)
DEVICE_PLUGIN_SKIPS = {
    "CKV_K8S_43": "pinned by release tag, as NVIDIA publishes it",
    "CKV_K8S_23": "the device plugin registers with the kubelet through a root-owned hostPath socket",
    "CKV_K8S_40": "the device plugin registers with the kubelet through a root-owned hostPath socket",
    "CKV_K8S_15": "IfNotPresent: a DaemonSet on every GPU node must not depend on the registry to restart",
    "CKV_K8S_8": "no health endpoint (NVIDIA's manifests have no probes); the kubelet drops a dead plugin's GPUs "
                 "and the DaemonSet restarts it",
    "CKV_K8S_9": "no health endpoint (NVIDIA's manifests have no probes); it serves the kubelet, not traffic",
}
# Restricted Pod Security controls the plugin cannot meet (kube-system, outside the fleet's namespace and its
# Pod Security labels), written down as ``pod-security.modelfleet.io/<control>`` like the checkov skips.
POD_SECURITY_EXCEPTION = "pod-security.modelfleet.io/"
DEVICE_PLUGIN_PSS_EXCEPTIONS = {
    "volumeTypes": f"hostPath {DEVICE_PLUGIN_DIR}, the kubelet's device-plugin directory, where the plugin "
                   "creates its socket and registers the node's GPUs; no other volume type reaches it",
}


def namespace(plan: FleetPlan) -> dict[str, Any]:
    """Baseline Pod Security enforced (the vLLM image runs as root), restricted reported as warnings."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": plan.namespace, "labels": {**c.MANAGED_BY, **c.POD_SECURITY}}}


def device_plugin_network_policy() -> dict[str, Any]:
    """The device plugin talks to the kubelet over a socket; nothing needs to reach it over the network."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": DEVICE_PLUGIN, "namespace": "kube-system", "labels": c.labels(DEVICE_PLUGIN, "network")},
            "spec": {"podSelector": {"matchLabels": c.selector(DEVICE_PLUGIN)}, "policyTypes": ["Ingress"], "ingress": []}}


def _device_plugin_pod(plan: FleetPlan) -> dict[str, Any]:
    container = {
        "name": DEVICE_PLUGIN, "image": DEVICE_PLUGIN_IMAGE, "imagePullPolicy": "IfNotPresent",
        "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
        "securityContext": c.container_security(read_only_root=True, non_root=False),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "128Mi"}},
        "volumeMounts": [{"name": "device-plugin", "mountPath": DEVICE_PLUGIN_DIR}]}
    instance_types = sorted({g.instance_type for g in plan.node_groups if g.device == "gpu"})  # not on CPU nodes
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types}]}]}}}
    return {"priorityClassName": "system-node-critical", "automountServiceAccountToken": False,
            "securityContext": c.pod_security(None), "affinity": affinity,
            "tolerations": [{"key": c.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [container],
            "volumes": [{"name": "device-plugin", "hostPath": {"path": DEVICE_PLUGIN_DIR, "type": "Directory"}}]}


def device_plugin(plan: FleetPlan) -> dict[str, Any]:
    """NVIDIA's device plugin (as in its static manifest) on this fleet's GPU instance types only."""
    exceptions = c.checkov_skips(DEVICE_PLUGIN_SKIPS) | {
        POD_SECURITY_EXCEPTION + control: reason for control, reason in DEVICE_PLUGIN_PSS_EXCEPTIONS.items()}
    meta = {"name": DEVICE_PLUGIN, "namespace": "kube-system", "labels": c.labels(DEVICE_PLUGIN, "device-plugin"),
            "annotations": exceptions}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
            "spec": {"selector": {"matchLabels": c.selector(DEVICE_PLUGIN)}, "updateStrategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": c.labels(DEVICE_PLUGIN, "device-plugin"), "annotations": exceptions},
                                  "spec": _device_plugin_pod(plan)}}}


def render_cluster_manifests(plan: FleetPlan, ami_type: str, install_device_plugin: bool = True,
                             dcgm_exporter: bool = False) -> list[dict[str, Any]]:
    """The namespace, and the device plugin (with its network policy) when the nodes' AMI lacks it and the
    stack has not said the cluster runs one already (``deploy.installDevicePlugin: false``); with
    ``dcgm_exporter`` (a stack that creates its cluster), NVIDIA's DCGM exporter on the GPU nodes."""
    objects = [namespace(plan)]
    if install_device_plugin and ami_type in AMIS_WITHOUT_DEVICE_PLUGIN and any(g.device == "gpu" for g in plan.node_groups):
        objects += [device_plugin(plan), device_plugin_network_policy()]
    if dcgm_exporter:
        objects += render_dcgm_exporter(plan)
    return objects
