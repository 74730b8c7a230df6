"""What the cluster must run for the workloads' objects to work, as pinned Helm charts and their values.

- the LeaderWorkerSet controller (its CRD) for multi-node models;
- the Prometheus operator (the ServiceMonitor CRD) and a Prometheus that selects every ServiceMonitor;
- prometheus-adapter serving the two queue metrics the HPAs scale on, per pod;
- the cluster autoscaler, which gives the node groups' min..max a meaning.

A stack that creates its cluster installs them (``modelfleet.deploy.addons``); a stack that joins one lists
them as prerequisites, and ``render`` writes the adapter's values to ``prerequisites/`` for the platform team.
Versions are pinned: a chart upgrade is a reviewed change, like an engine image.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from ...plan.types import FleetPlan, VllmModelPlan
from .triton import PENDING_METRIC
from .vllm import WAITING_METRIC

MONITORING_NAMESPACE = "monitoring"
PROMETHEUS_URL = f"http://kube-prometheus-stack-prometheus.{MONITORING_NAMESPACE}.svc"  # fullnameOverride below
PROMETHEUS_PORT = 9090
AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"
ADAPTER_VALUES_FILE = "prerequisites/prometheus-adapter-values.yaml"


@dataclass(frozen=True)
class Chart:
    release: str  # the release name (service names derive from it)
    chart: str
    version: str
    repository: str | None  # None: ``chart`` is an oci:// reference
    namespace: str


LWS = Chart("lws", "oci://registry.k8s.io/lws/charts/lws", "0.7.0", None, "lws-system")
PROMETHEUS_STACK = Chart("kube-prometheus-stack", "kube-prometheus-stack", "77.12.0",
                         "https://prometheus-community.github.io/helm-charts", MONITORING_NAMESPACE)
PROMETHEUS_ADAPTER = Chart("prometheus-adapter", "prometheus-adapter", "5.3.0",
                           "https://prometheus-community.github.io/helm-charts", MONITORING_NAMESPACE)
CLUSTER_AUTOSCALER = Chart("cluster-autoscaler", "cluster-autoscaler", "9.50.1", "https://kubernetes.github.io/autoscaler",
                           "kube-system")


def needs_lws(plan: FleetPlan) -> bool:
    return any(isinstance(m, VllmModelPlan) and m.nodes_per_replica > 1 for m in plan.models)


def adapter_rules() -> list[dict[str, Any]]:
    """Each queue metric per pod under its own name, summed over the pod's series (Triton labels its
    pending count per model; the HPA's metric selector narrows to one model)."""
    return [{"seriesQuery": f'{{__name__="{metric}",namespace!="",pod!=""}}',
             "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
             "name": {"matches": f"^{metric}$", "as": metric},
             "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"}
            for metric in (PENDING_METRIC, WAITING_METRIC)]


def adapter_values() -> dict[str, Any]:
    return {"prometheus": {"url": PROMETHEUS_URL, "port": PROMETHEUS_PORT},
            "rules": {"default": False, "custom": adapter_rules()}}


# What Grafana's dashboard sidecar loads: ConfigMaps with this label, from every namespace, each into the
# folder its annotation names (render/observability: the fleet's dashboards carry both).
GRAFANA_SIDECAR = {"enabled": True, "label": "grafana_dashboard", "labelValue": "1", "searchNamespace": "ALL",
                   "folderAnnotation": "grafana_folder", "provider": {"foldersFromFilesStructure": True}}


def prometheus_stack_values() -> dict[str, Any]:
    """The operator, its CRDs and one Prometheus that scrapes every ServiceMonitor and evaluates every
    PrometheusRule (not only those with the chart's release label); Alertmanager for the SLO alerts (its
    receivers are the platform team's: docs/operations/observability.md); Grafana with the dashboard sidecar. Grafana's
    admin password is left to the chart to generate (the kube-prometheus-stack default is a published one)."""
    return {"fullnameOverride": "kube-prometheus-stack",
            "grafana": {"enabled": True, "adminPassword": "", "sidecar": {"dashboards": GRAFANA_SIDECAR}},
            "alertmanager": {"enabled": True},
            "prometheus": {"prometheusSpec": {"serviceMonitorSelectorNilUsesHelmValues": False,
                                              "podMonitorSelectorNilUsesHelmValues": False,
                                              "ruleSelectorNilUsesHelmValues": False, "retention": "7d"}}}


def autoscaler_values(cluster_name: str, region: str, kubernetes_version: str) -> dict[str, Any]:
    """Auto-discovers the managed node groups' ASGs (EKS tags them); the autoscaler's minor version must be
    the cluster's. Pods with emptyDirs (every model cache) must not pin their nodes forever."""
    return {"cloudProvider": "aws", "awsRegion": region, "autoDiscovery": {"clusterName": cluster_name},
            "image": {"tag": f"v{kubernetes_version}.0"},
            "rbac": {"serviceAccount": {"name": AUTOSCALER_SERVICE_ACCOUNT}},
            "extraArgs": {"balance-similar-node-groups": True, "skip-nodes-with-local-storage": False,
                          "expander": "least-waste"}}


def render_adapter_values() -> bytes:
    """The adapter's values as a file a platform team can install from (``helm install ... -f``)."""
    header = (f"# prometheus-adapter {PROMETHEUS_ADAPTER.version} ({PROMETHEUS_ADAPTER.repository}): serves "
              f"{PENDING_METRIC} and {WAITING_METRIC}\n# per pod for the HPAs. Point prometheus.url at your "
              "cluster's Prometheus.\n")
    return (header + yaml.safe_dump(adapter_values(), sort_keys=True, default_flow_style=False)).encode()
