"""Which metric names the generated alerts and dashboards use, and which the engines really export.

Engine names are checked against the real servers' ``/metrics`` (Triton here, vLLM in CI's vLLM step). The
cluster's own metrics (the HPA, pod readiness, GPU requests) come from kube-state-metrics, which
kube-prometheus-stack installs; they are pinned here from its documentation (docs/metrics/workload/
horizontalpodautoscaler-metrics.md and pod-metrics.md, stable since v2.0) and unit-tested with promtool.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from modelfleet.plan.types import FleetPlan
from modelfleet.render.k8s import vllm_models
from modelfleet.render.observability import fleet_dashboard, rule_groups, workload_dashboard

KUBE_STATE_METRICS = frozenset({"kube_horizontalpodautoscaler_status_current_replicas",
                                "kube_horizontalpodautoscaler_spec_max_replicas", "kube_pod_status_ready",
                                "kube_pod_container_resource_requests"})
_REFERENCE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{| )", re.MULTILINE)


def names_in(exprs: Iterable[str]) -> set[str]:
    """Every metric an expression selects (each has a label selector: slo_queries.Target always writes one)."""
    return {name for expr in exprs for name in _REFERENCE.findall(expr)}


def exported(metrics_text: str) -> set[str]:
    """The sample names of a /metrics page (a histogram's ``_bucket``, a summary's quantile series)."""
    return {match[0] for match in _SAMPLE.findall(metrics_text)}


def exprs(plan: FleetPlan, cost=None, workloads=None) -> list[str]:
    """The expressions of every rule and panel of ``plan``'s workloads (all of them by default)."""
    chosen = workloads if workloads is not None else [*plan.triton_servers, *vllm_models(plan)]
    found = [rule["expr"] for w in chosen for group in rule_groups(plan, w) for rule in group["rules"]]
    found += [q.expr for w in chosen for q in workload_dashboard(plan, w).queries()]
    if cost is not None:
        found += [q.expr for q in fleet_dashboard(plan, cost).queries()]
    return found


def by_source(names: set[str]) -> dict[str, set[str]]:
    """The names by exporter: Triton, vLLM, kube-state-metrics, NVIDIA's DCGM exporter (its counters file:
    test_gpu_metric_names.py), and any other (none may be)."""
    prefixes = ("nv_", "vllm:", "kube_", "DCGM_")
    return {"triton": {n for n in names if n.startswith("nv_")}, "vllm": {n for n in names if n.startswith("vllm:")},
            "cluster": {n for n in names if n.startswith("kube_")}, "dcgm": {n for n in names if n.startswith("DCGM_")},
            "other": {n for n in names if not n.startswith(prefixes)}}
