"""Pieces every workload's manifests share: labels, placement on GPU nodes, security, probes, rollouts."""

from __future__ import annotations

import math
from typing import Any

from ...plan.names import kube_name  # noqa: F401  (c.kube_name: the workloads' modules read it here)
from ...plan.capacity.node_volume import disk_gib
from ...plan.teams import TEAM_LABEL
from ...plan.types import ContainerResourcesPlan, FleetPlan, NodeGroupPlan, RolloutPlan

GPU_RESOURCE = "nvidia.com/gpu"
ZONE_KEY = "topology.kubernetes.io/zone"
MANAGED_BY = {"app.kubernetes.io/managed-by": "modelfleet"}
# The plan's name for a Triton server, on its objects and pods: its objects' names and selector labels may be a
# former name (deploy.formerServerNames), so this label is how a reader of the cluster tells what it is.
SERVER_LABEL = "modelfleet.io/server"
NODE_GROUP_LABEL = "modelfleet.io/node-group"  # every node of the fleet's node groups (deploy/node_groups.py)
# ...and the label the DCGM exporter's ServiceMonitor copies it to on every GPU series (dcgm_exporter.py)
NODE_GROUP_METRIC_LABEL = "node_group"
POD_SECURITY = {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "restricted"}
# pulumi-kubernetes waits for a Deployment to become available (and a Service to get endpoints) for 10
# minutes by default; a GPU rollout needs a node (about 5 min) and a 10-20 GB image (about 10 min) per pod
# before the model even starts loading.
NODE_AND_IMAGE_S = 900
AWAIT_TIMEOUT = "pulumi.com/timeoutSeconds"
# The Prometheus a created cluster runs (render/k8s/prerequisites.py), which HPAs (through the adapter) and KEDA read.
MONITORING_NAMESPACE = "monitoring"
PROMETHEUS_URL = f"http://kube-prometheus-stack-prometheus.{MONITORING_NAMESPACE}.svc"  # its fullnameOverride
PROMETHEUS_PORT = 9090


def labels(name: str, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": component, **MANAGED_BY}


def with_team(obj: dict[str, Any], team: str) -> dict[str, Any]:
    """The object, and every pod template in it, labelled with its team (plan/teams.py). Pods carry it too, so
    cost tools that read pod labels see it; a change of team therefore rolls the pods. Selectors never use it."""
    return with_label(obj, TEAM_LABEL, team)


def with_label(obj: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    """The object and every pod template in it with the label ``key: value`` (never in a selector)."""
    out = {**obj, "metadata": {**obj["metadata"], "labels": {**obj["metadata"].get("labels", {}), key: value}}}
    spec = obj.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("template"), dict) and "metadata" in spec["template"]:
        out["spec"] = {**spec, "template": with_label(spec["template"], key, value)}
    lws = spec.get("leaderWorkerTemplate") if isinstance(spec, dict) else None
    if isinstance(lws, dict):
        out["spec"] = {**spec, "leaderWorkerTemplate": {
            **lws, **{k: with_label(lws[k], key, value) for k in ("leaderTemplate", "workerTemplate") if k in lws}}}
    return out


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


def image_skips(image: str) -> dict[str, str]:
    """Exceptions every serving image shares; the digest one only while the stack pins a tag."""
    skips = {"CKV_K8S_15": "IfNotPresent: multi-GB serving images are not pulled again on every restart"}
    if "@sha256:" not in image:
        skips["CKV_K8S_43"] = ("pinned by release tag in the stack file (the version the engine tests ran); "
                               "write image@sha256:... there to pin a digest")
    return skips


def await_budget_s(replicas: int, startup_s: int) -> int:
    """How long Pulumi may wait for a rollout: one pod at a time, each on a fresh node with a cold image."""
    return max(1, replicas) * (NODE_AND_IMAGE_S + startup_s)


def gpu_placement(group: NodeGroupPlan) -> dict[str, Any]:
    """Only on this node group's nodes, tolerating the GPU taint every GPU node carries."""
    return {**cpu_placement(group),
            "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]}


def cpu_placement(group: NodeGroupPlan) -> dict[str, Any]:
    """Only on this node group's nodes (a CPU node group carries no taint, so nothing to tolerate). A group of
    one managed node group is selected by its instance and capacity type, as it always was; a group whose nodes
    come from several (a Karpenter pool's types and capacity types, a managed group's reservations or on-demand
    base: modelfleet/deploy/provisioners) by the plan group's label, which all of them carry."""
    if group.provisioner == "karpenter" or group.reservations or group.on_demand_base_nodes:
        return {"nodeSelector": {NODE_GROUP_LABEL: group.name}}
    return {"nodeSelector": {"node.kubernetes.io/instance-type": group.instance_type,
                             "eks.amazonaws.com/capacityType": "SPOT" if group.capacity_type == "spot" else "ON_DEMAND"}}


DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}


def disruption_annotations(group: NodeGroupPlan) -> dict[str, str]:
    """On a Karpenter pool, a pod that loads weights is never voluntarily disrupted (a move costs a cold start);
    expiry still replaces its node (deploy/provisioners/karpenter.py)."""
    return dict(DO_NOT_DISRUPT) if group.provisioner == "karpenter" else {}


def zone_spread(match: dict[str, str], rolling: bool = True) -> list[dict[str, Any]]:
    """Replicas in different availability zones (availability of 99.9% and above). ``pod-template-hash``
    keeps a rollout's new pods from being counted against the old ones."""
    constraint: dict[str, Any] = {"maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule",
                                  "labelSelector": {"matchLabels": match}}
    if rolling:
        constraint["matchLabelKeys"] = ["pod-template-hash"]
    return [constraint]


def rolling_update(rollout: RolloutPlan) -> dict[str, Any]:
    """The plan's choice (modelfleet.plan.capacity.rollout): surge one replica into the node group's headroom above
    the HPA's max, or replace one at a time where availability allows."""
    return {"maxSurge": rollout.max_surge, "maxUnavailable": rollout.max_unavailable}


def resources(container: ContainerResourcesPlan, gpus: int = 0, cpu_limit_millis: int | None = None) -> dict[str, Any]:
    """A container's requests and limits, as the plan decided them (modelfleet.plan.capacity.pod_resources)."""
    memory = f"{container.memory_mib}Mi"
    requests: dict[str, Any] = {"cpu": f"{container.cpu_millis}m", "memory": memory}
    limits: dict[str, Any] = {"cpu": f"{cpu_limit_millis or container.cpu_millis}m", "memory": memory}
    if container.ephemeral_storage_gib:
        requests["ephemeral-storage"] = f"{container.ephemeral_storage_gib}Gi"
    if gpus:
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = gpus
    return {"requests": requests, "limits": limits}


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


# Readiness takes a pod out of its Service within 15 s of not answering; liveness restarts it only after
# LIVENESS_WINDOW_S of silence. An engine at saturation answers its health endpoint late (vLLM's /health runs on
# the API server's event loop, which a full batch of tokenising and detokenising keeps busy; Triton's HTTP
# threads queue behind inference requests), and a restart there throws away a loaded model under the very
# load that made it slow: so a busy engine is taken out of rotation, never killed. A multi-node replica's
# restart recreates its whole group (RecreateGroupOnPodRestart) and reloads on every node: longer still.
READINESS = {"periodSeconds": 5, "failureThreshold": 3, "timeoutSeconds": 5}
LIVENESS_WINDOW_S = {False: 120, True: 300}  # keyed by multi-node
LIVENESS_PERIOD_S, LIVENESS_TIMEOUT_S = 15, 10
# Before SIGTERM: the endpoint controller and every node's kube-proxy drop the terminating pod from its
# Service within a few seconds; until then new requests still arrive and must be served, not refused.
PRE_STOP_S = 15


def liveness(check: dict[str, Any], multi_node: bool = False) -> dict[str, Any]:
    return {**check, "periodSeconds": LIVENESS_PERIOD_S, "timeoutSeconds": LIVENESS_TIMEOUT_S,
            "failureThreshold": math.ceil(LIVENESS_WINDOW_S[multi_node] / LIVENESS_PERIOD_S)}


def http_probes(port: str, live: str, ready: str, startup_budget_s: int, multi_node: bool = False) -> dict[str, Any]:
    """Liveness far more tolerant than readiness, and a startup probe that gives a cold start
    ``startup_budget_s`` (liveness and readiness start once it passes)."""
    def get(path: str) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": port}}

    return {
        "startupProbe": {**get(ready), "periodSeconds": 10, "timeoutSeconds": 5,
                         "failureThreshold": max(3, math.ceil(startup_budget_s / 10))},
        "livenessProbe": liveness(get(live), multi_node),
        "readinessProbe": {**get(ready), **READINESS},
    }


def pre_stop() -> dict[str, Any]:
    """Keep serving while the pod leaves its Service's endpoints, then let SIGTERM start the engine's drain."""
    return {"preStop": {"exec": {"command": ["/bin/sh", "-c", f"sleep {PRE_STOP_S}"]}}}


def memory_volume(name: str, size_bytes: int) -> dict[str, Any]:
    return {"name": name, "emptyDir": {"medium": "Memory", "sizeLimit": f"{max(1, math.ceil(size_bytes / 1024**2))}Mi"}}


def disk_volume(name: str, size_gib: float) -> dict[str, Any]:
    return {"name": name, "emptyDir": {"sizeLimit": f"{disk_gib(size_gib)}Gi"}}


def pdb(name: str, plan: FleetPlan, match: dict[str, str] | None = None) -> dict[str, Any]:
    """Voluntary disruptions (node drains, upgrades) take at most one replica at a time: with
    ``minAvailable: min_replicas - 1`` a workload the HPA had scaled to 4 of a minimum of 2 could lose 3 at
    once. One is also the most an availability floor of two zones survives."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": metadata(name, plan, "pdb"),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": match or selector(name)}}}


def group_pdb(name: str, plan: FleetPlan) -> dict[str, Any]:
    """A LeaderWorkerSet's budget covers every pod of every group, leaders and workers: evicting any one
    pod restarts its whole group (RecreateGroupOnPodRestart), so at most one pod may be evicted at a time,
    and while that group is coming back (its pods unready) the budget holds every other eviction. The
    leader and worker StatefulSets LWS creates give the disruption controller the expected pod count."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": metadata(name, plan, "pdb"),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector(name)}}}


def service_account(name: str, plan: FleetPlan) -> dict[str, Any]:
    """The pod identity's anchor (EKS Pod Identity binds the IAM role to it); no Kubernetes API token."""
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


ServicePort = tuple[str, int] | tuple[str, int, str]  # (name, port[, the container port's name it goes to])


def service(name: str, plan: FleetPlan, component: str, ports: list[ServicePort], budget_s: int,
            match: dict[str, str] | None = None) -> dict[str, Any]:
    """ClusterIP; Pulumi waits for its first ready endpoint, so it gets the workload's await budget. A port goes
    to the container port of its own name, or of the name its third element gives."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": metadata(name, plan, component, {AWAIT_TIMEOUT: str(budget_s)}),
            "spec": {"type": "ClusterIP", "selector": match or selector(name),
                     "ports": [{"name": p[0], "port": p[1], "targetPort": p[-1] if len(p) > 2 else p[0],
                                "protocol": "TCP"} for p in ports]}}


def service_monitor(name: str, plan: FleetPlan, port: str, extra: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    """The workload's /metrics on ``port`` every 15 s, and ``extra`` endpoints."""
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
            "metadata": metadata(name, plan, "metrics"),
            "spec": {"selector": {"matchLabels": selector(name)},
                     "endpoints": [{"port": port, "path": "/metrics", "interval": "15s"}, *extra]}}


def pods_metric(metric: str, per_pod: int, match: dict[str, str] | None = None) -> dict[str, Any]:
    """A per-pod Prometheus metric served through prometheus-adapter's custom metrics API."""
    identifier: dict[str, Any] = {"name": metric}
    if match:
        identifier["selector"] = {"matchLabels": match}
    return {"type": "Pods", "pods": {"metric": identifier,
                                     "target": {"type": "AverageValue", "averageValue": str(max(1, per_pod))}}}


def autoscaler(name: str, plan: FleetPlan, target: dict[str, str], metrics: list[dict[str, Any]],
               bounds: tuple[int, int]) -> dict[str, Any] | None:
    """HPA between the plan's min and max replicas (it scales on whichever metric asks for more); none when
    min == max."""
    low, high = bounds
    if low >= high:
        return None
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": metadata(name, plan, "autoscaling"),
            "spec": {"scaleTargetRef": target, "minReplicas": low, "maxReplicas": high, "metrics": metrics}}
