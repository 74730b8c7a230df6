"""What a stack needs its cluster to run, derived from what `pulumi up` would apply, and the check of a cluster
against it: pure, with the cluster read through an injected ``ClusterReader`` (``modelfleet doctor``'s kubectl
adapter in commands/doctor_cluster.py; tests pass a dictionary).

Each prerequisite is needed because an object of the stack's render needs it (a ``Rollout`` needs the Argo
Rollouts controller and its CRD, an ``HTTPRoute`` the Gateway API CRDs, the named Gateway and the Rollouts
plugin, a ``LeaderWorkerSet`` the LWS controller, a ``ServiceMonitor`` or ``PrometheusRule`` the Prometheus
operator, an HPA on a per-pod metric prometheus-adapter, the GPU alerts a DCGM exporter), or because every stack's node groups and pod
identities do (the cluster autoscaler, the EKS Pod Identity agent). docs/operations/deploying.md's "Joining a
cluster" list is this list (tests/deploy/test_prerequisites.py compares them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..render.k8s import dcgm_exporter as d
from ..render.k8s import prerequisites as p
from ..spec.environment import EnvironmentSpec
from .addons import releases
from .cluster import cluster_name

ARGO_ROLLOUTS_VERSION = "v1.8.3"  # the controller whose Rollout and AnalysisTemplate fields render/k8s writes
GATEWAY_API_VERSION = "v1.2.1"  # HTTPRoute gateway.networking.k8s.io/v1 (standard channel; v1 since v1.0.0)
GATEWAY_PLUGIN_VERSION = "v0.4.0"  # argoproj-labs/gatewayAPI, rollouts-plugin-trafficrouter-gatewayapi


@dataclass(frozen=True)
class Probe:
    """What shows a prerequisite is there: a CRD, an aggregated API, a Deployment or DaemonSet whose name contains
    ``name`` in ``namespace`` (any namespace when it is empty), a Gateway, or an Argo Rollouts plugin in its
    ConfigMap."""

    kind: Literal["crd", "apiservice", "workload", "gateway", "plugin"]
    name: str
    namespace: str = ""

    def __str__(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else (" in any namespace" if self.kind == "workload"
                                                                            else "")
        return {"crd": f"CRD {self.name}", "apiservice": f"APIService {self.name}",
                "workload": f"a Deployment or DaemonSet named *{self.name}*{where}",
                "gateway": f"Gateway {self.name}{where}",
                "plugin": f"{self.name} among the trafficRouterPlugins of ConfigMap argo-rollouts-config{where}"}[self.kind]


@dataclass(frozen=True)
class Prerequisite:
    name: str
    version: str  # the version required (or tested), as the install command pins it
    when: str  # the feature that needs it, in any stack
    why: str  # what in this stack needs it
    probe: Probe
    install: str  # the command that installs it
    installed_by_stack: bool = False  # a created cluster's release (deploy/addons.py)


class ClusterReader(Protocol):
    def exists(self, probe: Probe) -> bool: ...


def _helm(chart: p.Chart, extra: str = "") -> str:
    source = chart.chart if chart.repository is None else f"{chart.chart} --repo {chart.repository}"
    return (f"helm install {chart.release} {source} --version {chart.version} -n {chart.namespace} "
            f"--create-namespace{extra}")


def kinds_of(objects: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Kind -> the names of the stack's objects of that kind (HPAs on per-pod metrics as ``HPA/Pods``)."""
    found: dict[str, list[str]] = {}
    for obj in objects:
        kind = obj.get("kind", "")
        if kind == "HorizontalPodAutoscaler" and any(m.get("type") == "Pods" for m in obj["spec"].get("metrics", [])):
            kind = "HPA/Pods"
        found.setdefault(kind, []).append(obj.get("metadata", {}).get("name", ""))
    return found


def _names(kinds: dict[str, list[str]], *wanted: str) -> str:
    names = sorted({n for k in wanted for n in kinds.get(k, [])})
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"{'/'.join(wanted)}: {shown}"


def required_prerequisites(env: EnvironmentSpec, plan, objects: Iterable[Mapping[str, Any]]) -> tuple[Prerequisite, ...]:
    """Every prerequisite of the stack, in install order; those its created cluster installs are marked."""
    kinds, cluster = kinds_of(objects), cluster_name(env)
    by_stack = {r.name for r in releases(plan, env)}
    found = [
        Prerequisite("EKS Pod Identity agent", "EKS add-on", "always (pod roles)", "the pod roles of the workloads and the staging Jobs",
                     Probe("workload", "eks-pod-identity-agent", "kube-system"),
                     f"aws eks create-addon --cluster-name {cluster} --addon-name eks-pod-identity-agent",
                     installed_by_stack=env.cluster.create),
        _node_provisioner(env, by_stack)]
    if {"ServiceMonitor", "PrometheusRule"} & kinds.keys():
        found.append(Prerequisite("prometheus-operator (kube-prometheus-stack)", p.PROMETHEUS_STACK.version,
                                  "metrics and SLO alerts (ServiceMonitor, PrometheusRule)",
                                  _names(kinds, "ServiceMonitor", "PrometheusRule"),
                                  Probe("crd", "servicemonitors.monitoring.coreos.com"), _helm(p.PROMETHEUS_STACK),
                                  p.PROMETHEUS_STACK.release in by_stack))
    if "HPA/Pods" in kinds:
        found.append(Prerequisite("prometheus-adapter", p.PROMETHEUS_ADAPTER.version,
                                  "autoscaling on queue length (an HPA on a per-pod metric; `modelfleet render` writes its values)", _names(kinds, "HPA/Pods"),
                                  Probe("apiservice", "v1beta1.custom.metrics.k8s.io"),
                                  _helm(p.PROMETHEUS_ADAPTER, f" -f {p.ADAPTER_VALUES_FILE}"),
                                  p.PROMETHEUS_ADAPTER.release in by_stack))
    if any(g.device == "gpu" for g in plan.node_groups):
        found.append(_dcgm_exporter(env, plan))
    if "ScaledObject" in kinds:
        found.append(Prerequisite("KEDA", p.KEDA.version, "scale to zero (`replicas.minimum: 0`: ScaledObject)",
                                  _names(kinds, "ScaledObject"), Probe("crd", "scaledobjects.keda.sh"), _helm(p.KEDA),
                                  p.KEDA.release in by_stack))
    if "LeaderWorkerSet" in kinds:
        found.append(Prerequisite("LeaderWorkerSet controller", p.LWS.version, "a multi-node LLM (LeaderWorkerSet)",
                                  _names(kinds, "LeaderWorkerSet"),
                                  Probe("crd", "leaderworkersets.leaderworkerset.x-k8s.io"), _helm(p.LWS),
                                  p.LWS.release in by_stack))
    return (*found, *_canary_prerequisites(env, kinds))


def _dcgm_exporter(env: EnvironmentSpec, plan) -> Prerequisite:
    """The GPUs' metrics (utilisation, memory, power, XID errors) the GPU panels and alerts read: a created cluster
    runs ours (render/k8s/dcgm_exporter.py); a joined one NVIDIA's chart, or the GPU Operator's
    (``nvidia-dcgm-exporter``, in its own namespace), with the ServiceMonitor docs/operations/observability.md
    describes."""
    groups = sorted(g.name for g in plan.node_groups if g.device == "gpu")
    shown = ", ".join(groups[:4]) + (f" and {len(groups) - 4} more" if len(groups) > 4 else "")
    install = (f"helm install {d.DCGM_EXPORTER} {d.DCGM_EXPORTER} --repo {d.DCGM_EXPORTER_CHARTS} --version "
               f"{d.DCGM_EXPORTER_CHART_VERSION} -n {d.NAMESPACE} --set serviceMonitor.enabled=true "
               "--set serviceMonitor.honorLabels=true")
    return Prerequisite("NVIDIA DCGM exporter (or the GPU Operator's)", d.DCGM_EXPORTER_VERSION,
                        "GPU panels and alerts (any GPU node group)", f"the GPU node groups: {shown}",
                        Probe("workload", d.DCGM_EXPORTER), install, installed_by_stack=env.cluster.create)


def _node_provisioner(env: EnvironmentSpec, by_stack: set[str]) -> Prerequisite:
    """What scales the stack's nodes: the cluster autoscaler for managed node groups, or Karpenter (at least the
    stack's version: Capacity Blocks need 1.6) for NodePools (deploy/provisioners)."""
    cluster = cluster_name(env)
    if env.nodes.provisioner == "karpenter":
        chart = p.KARPENTER
        return Prerequisite("Karpenter", env.nodes.karpenter_version, "`nodes.provisioner: karpenter` (NodePool, "
                            "EC2NodeClass)", "the stack's NodePools and EC2NodeClasses",
                            Probe("crd", "nodepools.karpenter.sh"),
                            f"helm install {chart.release} {chart.chart} --version {env.nodes.karpenter_version} -n "
                            f"{chart.namespace} --set settings.clusterName={cluster}", chart.release in by_stack)
    return Prerequisite("cluster autoscaler", p.CLUSTER_AUTOSCALER.version, "always (node groups)", "the node groups' min..max",
                        Probe("workload", "cluster-autoscaler", p.CLUSTER_AUTOSCALER.namespace),
                        _helm(p.CLUSTER_AUTOSCALER, f" --set autoDiscovery.clusterName={cluster} --set awsRegion={env.region}"),
                        p.CLUSTER_AUTOSCALER.release in by_stack)


def _canary_prerequisites(env: EnvironmentSpec, kinds: dict[str, list[str]]) -> list[Prerequisite]:
    found = []
    if "Rollout" in kinds:
        found.append(Prerequisite(
            "Argo Rollouts controller", ARGO_ROLLOUTS_VERSION, "a canary (`rollout: {strategy: canary}`: Rollout, "
            "AnalysisTemplate)", _names(kinds, "Rollout", "AnalysisTemplate"),
            Probe("crd", "rollouts.argoproj.io"),
            "kubectl create namespace argo-rollouts && kubectl apply -n argo-rollouts -f https://github.com/argoproj/"
            f"argo-rollouts/releases/download/{ARGO_ROLLOUTS_VERSION}/install.yaml"))
    if "HTTPRoute" in kinds and env.gateway is not None:
        namespace = env.gateway.namespace or env.namespace
        found += [
            Prerequisite("Gateway API CRDs", GATEWAY_API_VERSION, "a canary behind `modelfleet:gateway` (HTTPRoute)",
                         _names(kinds, "HTTPRoute"),
                         Probe("crd", "httproutes.gateway.networking.k8s.io"),
                         "kubectl apply -f https://github.com/kubernetes-sigs/gateway-api/releases/download/"
                         f"{GATEWAY_API_VERSION}/standard-install.yaml"),
            Prerequisite("the stack's Gateway", "Gateway API v1", "`modelfleet:gateway`",
                         f"modelfleet:gateway {env.gateway.name}",
                         Probe("gateway", env.gateway.name, namespace),
                         f"your gateway controller's Gateway named {env.gateway.name} in namespace {namespace}"),
            Prerequisite("Argo Rollouts Gateway API plugin (argoproj-labs/gatewayAPI)", GATEWAY_PLUGIN_VERSION,
                         "a canary behind `modelfleet:gateway` (HTTPRoute weights)", "the canaries' HTTPRoute weights", Probe("plugin", "argoproj-labs/gatewayAPI", "argo-rollouts"),
                         "add argoproj-labs/gatewayAPI (rollouts-plugin-trafficrouter-gatewayapi "
                         f"{GATEWAY_PLUGIN_VERSION}) to trafficRouterPlugins in the argo-rollouts-config ConfigMap")]
    return found


def prerequisites_markdown(required: Iterable[Prerequisite], placeholders: Mapping[str, str]) -> str:
    """The docs' table (docs/operations/deploying.md, "Joining a cluster"): every prerequisite of a stack that uses
    every feature, its own names (cluster, region, gateway) replaced by ``placeholders``."""
    def general(text: str) -> str:
        for value, placeholder in placeholders.items():
            text = text.replace(value, placeholder)
        return text

    rows = ["| what | version | needed for | `modelfleet doctor` looks for | install |", "|---|---|---|---|---|"]
    for req in required:
        install = general(req.install)
        install = f"`{install}`" if install.split()[0] in ("helm", "kubectl", "aws") else install
        rows.append(f"| {req.name} | {req.version} | {req.when} | {general(str(req.probe))} | {install} |")
    return "\n".join(rows) + "\n"


@dataclass(frozen=True)
class Finding:
    prerequisite: Prerequisite
    present: bool | None  # None: not checked (no cluster access)


def check_prerequisites(required: Iterable[Prerequisite], reader: ClusterReader | None) -> tuple[Finding, ...]:
    """Each prerequisite against the cluster; without a reader (no credentials) none is checked."""
    return tuple(Finding(req, None if reader is None else reader.exists(req.probe)) for req in required)


def doctor_report(stack: str, cluster: str, findings: tuple[Finding, ...], no_access: str | None = None) -> str:
    lines = [f"doctor {stack}: cluster {cluster}: {len(findings)} prerequisite(s) this stack's objects need"]
    if no_access is not None:
        lines.append(f"  not checked: {no_access}; with access to the cluster it would check:")
    for f in findings:
        req = f.prerequisite
        mark = {True: "ok     ", False: "MISSING", None: "check  "}[f.present]
        lines.append(f"  {mark} {req.name} {req.version}: {req.why}; {req.probe}")
        if req.installed_by_stack:
            lines.append("          installed by this stack (it creates the cluster)")
        elif f.present is not True:
            lines.append(f"          install: {req.install}")
    missing = [f.prerequisite.name for f in findings if f.present is False and not f.prerequisite.installed_by_stack]
    if no_access is None:
        lines.append(f"missing: {', '.join(missing)}" if missing else "every prerequisite is there")
    return "\n".join(lines) + "\n"
