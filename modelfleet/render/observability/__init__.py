"""Observability compiled from the SLAs: a PrometheusRule per workload and Grafana dashboards as ConfigMaps
for the dashboard sidecar, beside each workload's other objects (docs/operations/observability.md).

The rules are plain data built here. The dashboards are described here (dashboards.py) and turned into
Grafana's JSON by a builder the caller injects (``modelfleet.grafana.build_dashboard``, which uses
grafana-foundation-sdk): the compiler stays free of that optional library, and without a builder no
dashboard is rendered.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ...cost.fleet import FleetCost
from ...plan.names import dashboard_name
from ...plan.types import FleetPlan, TritonServerPlan, VllmModelPlan
from ..k8s import common as c
from .alerts import triton_server_groups, vllm_model_groups
from .dashboards import FOLDER, Dashboard, fleet_dashboard, triton_server_dashboard, vllm_model_dashboard

DashboardBuilder = Callable[[Dashboard], dict[str, Any]]
# The Grafana chart's dashboard sidecar loads ConfigMaps carrying this label (its default label and value)
# into the folder named by this annotation (with sidecar.dashboards.folderAnnotation set to it).
DASHBOARD_LABEL = {"grafana_dashboard": "1"}
FOLDER_ANNOTATION = "grafana_folder"
RULES_COMPONENT, DASHBOARD_COMPONENT = "alerts", "dashboard"

__all__ = ["DASHBOARD_LABEL", "FOLDER_ANNOTATION", "Dashboard", "DashboardBuilder", "dashboard_config_map",
           "prometheus_rule", "rule_groups", "workload_dashboard", "fleet_dashboard"]


def rule_groups(plan: FleetPlan, workload: TritonServerPlan | VllmModelPlan, scale: int = 1,
                docs_url: str | None = None) -> list[dict[str, Any]]:
    """The workload's rule groups, as a Prometheus rules file holds them (``{"groups": ...}``)."""
    if isinstance(workload, TritonServerPlan):
        return triton_server_groups(plan, workload, scale, docs_url)
    return vllm_model_groups(plan, workload, scale, docs_url)


def prometheus_rule(plan: FleetPlan, name: str, groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The prometheus-operator object for a workload's rules (a created cluster's Prometheus selects every
    PrometheusRule; docs/operations/observability.md says what a joined cluster's must select)."""
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": c.metadata(name, plan, RULES_COMPONENT), "spec": {"groups": groups}}


def workload_dashboard(plan: FleetPlan, workload: TritonServerPlan | VllmModelPlan) -> Dashboard:
    if isinstance(workload, TritonServerPlan):
        return triton_server_dashboard(plan, workload)
    return vllm_model_dashboard(plan, workload)


def dashboard_config_map(plan: FleetPlan, dashboard: Dashboard, build: DashboardBuilder) -> dict[str, Any]:
    """The dashboard's JSON (one line, keys sorted: the same bytes every render) in a ConfigMap the sidecar
    picks up."""
    name = dashboard_name(dashboard.workload)
    meta = c.metadata(name, plan, DASHBOARD_COMPONENT, {FOLDER_ANNOTATION: FOLDER})
    meta["labels"] = {**meta["labels"], **DASHBOARD_LABEL}
    text = json.dumps(build(dashboard), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {f"{dashboard.uid}.json": text}}


def fleet_config_map(plan: FleetPlan, cost: FleetCost, build: DashboardBuilder) -> dict[str, Any]:
    return dashboard_config_map(plan, fleet_dashboard(plan, cost), build)
