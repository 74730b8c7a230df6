"""Scale to zero: a KEDA ScaledObject (keda.sh/v1alpha1) instead of the HPA for a workload at a minimum of 0
replicas (plan/capacity/cold_start.py). KEDA manages an HPA of its own for 1..max, so the two are never both
rendered.

Its triggers are the HPA's own queue metrics (vLLM's waiting requests, each Triton model's pending requests),
read from Prometheus by PromQL instead of through the metrics adapter, at the same per-pod target
(``metricType: AverageValue``). ``activationThreshold`` 0: the workload wakes from zero as soon as any request
is queued. At zero replicas the engine exports no queue of its own, so the wake-up needs requests to queue
somewhere a metric sees them (a request buffer such as KEDA's HTTP add-on, or a gateway that retries), or an
explicit scale; the plan's cold start says how long the first request then waits.
"""

from __future__ import annotations

from typing import Any

from ...plan.types import FleetPlan
from .common import PROMETHEUS_PORT, PROMETHEUS_URL, metadata

SCALED_OBJECT_API = "keda.sh/v1alpha1"
POLLING_S = 15  # KEDA reads the queue every 15 s (the ServiceMonitors' scrape interval)
COOLDOWN_S = 900  # idle this long before the last replica goes: a quiet quarter hour, not a pause between requests


def queue_query(metric: str, namespace: str, service: str, extra: dict[str, str] | None = None) -> str:
    """The queue summed over the workload's pods (0 when none reports: KEDA then sees an idle workload)."""
    labels = {"namespace": namespace, "service": service, **(extra or {})}
    selector = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"sum({metric}{{{selector}}}) or vector(0)"


def trigger(query: str, per_pod: int, name: str) -> dict[str, Any]:
    return {"type": "prometheus", "name": name, "metricType": "AverageValue",
            "metadata": {"serverAddress": f"{PROMETHEUS_URL}:{PROMETHEUS_PORT}", "query": query,
                         "threshold": str(max(1, per_pod)), "activationThreshold": "0"}}


def scaled_object(name: str, plan: FleetPlan, target: dict[str, str], triggers: list[dict[str, Any]],
                  high: int) -> dict[str, Any]:
    """0 replicas while idle, up to ``high`` on the queue ``triggers``."""
    return {"apiVersion": SCALED_OBJECT_API, "kind": "ScaledObject", "metadata": metadata(name, plan, "autoscaling"),
            "spec": {"scaleTargetRef": target, "minReplicaCount": 0, "maxReplicaCount": high,
                     "pollingInterval": POLLING_S, "cooldownPeriod": COOLDOWN_S, "triggers": triggers}}
