"""A canary workload's objects: an Argo Rollouts ``Rollout`` in place of its Deployment, the analysis that
gates it (render/analysis.py), and, where the stack names a Gateway, the HTTPRoute whose weights it moves.

Why Argo Rollouts rather than Flagger: the Rollout carries the very pod template a Deployment would (so the
manifests a reviewer reads stay the pods that run, and the HPA and PDB target it unchanged), its basic canary
needs no mesh or gateway (the replica ratio splits the traffic, approximately), and its Gateway API plugin
moves HTTPRoute weights where a gateway exists. Flagger generates a second "primary" Deployment and its
Services at run time, so the rendered objects would no longer be the ones that serve; and it has no
replica-ratio mode without a mesh or ingress.

Abort and roll back: a failed analysis aborts the Rollout; Argo Rollouts then scales the canary down and
(with a gateway) sets the route's weights back to the stable Service, which never stopped serving.
"""

from __future__ import annotations

from typing import Any

from ...plan.names import canary_service
from ...plan.types import FleetPlan, RolloutPlan, TritonServerPlan, VllmModelPlan
from ..analysis import CANARY_HASH, analysis_name, analysis_template
from . import common as c

ROLLOUT_API = "argoproj.io/v1alpha1"
GATEWAY_PLUGIN = "argoproj-labs/gatewayAPI"  # rollouts-plugin-trafficrouter-gatewayapi
HTTPROUTE_API = "gateway.networking.k8s.io/v1"


def is_canary(rollout: RolloutPlan | None) -> bool:
    return rollout is not None and rollout.strategy == "canary"


def _steps(rollout: RolloutPlan) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for weight in rollout.steps:
        steps.append({"setWeight": weight})
        if weight < 100:
            steps.append({"pause": {"duration": f"{rollout.pause_s}s"}})
    return steps


def canary_strategy(name: str, plan: FleetPlan, rollout: RolloutPlan) -> dict[str, Any]:
    analysis = {"templates": [{"templateName": analysis_name(name)}], "startingStep": 1,
                "args": [{"name": CANARY_HASH, "valueFrom": {"podTemplateHashValue": "Latest"}}]}
    canary: dict[str, Any] = {"steps": _steps(rollout), "analysis": analysis, "abortScaleDownDelaySeconds": 30}
    if rollout.traffic == "gateway":
        canary |= {"canaryService": canary_service(name), "stableService": name, "dynamicStableScale": True,
                   "trafficRouting": {"plugins": {GATEWAY_PLUGIN: {"httpRoute": name, "namespace": plan.namespace}}}}
    else:  # the replica ratio: one pod above the desired count at most (plan/rollout.canary_replicas)
        canary |= {"maxSurge": 1, "maxUnavailable": 0}
    return {"canary": canary}


def as_rollout(deployment: dict[str, Any], plan: FleetPlan, rollout: RolloutPlan) -> dict[str, Any]:
    """The Deployment's own metadata, replicas, selector and pod template, under a canary strategy."""
    spec = deployment["spec"]
    return {"apiVersion": ROLLOUT_API, "kind": "Rollout", "metadata": deployment["metadata"],
            "spec": {"replicas": spec["replicas"], "selector": spec["selector"], "template": spec["template"],
                     "strategy": canary_strategy(deployment["metadata"]["name"], plan, rollout)}}


def http_route(name: str, plan: FleetPlan, port: int) -> dict[str, Any]:
    """All traffic to the stable Service; Argo Rollouts' plugin moves the weights during a canary (the
    Pulumi program ignores changes to them, c.f. deploy/workloads.py)."""
    gateway = plan_gateway(plan)
    assert gateway is not None
    parent = {"name": gateway[0]} | ({"namespace": gateway[1]} if gateway[1] else {})
    backends = [{"name": name, "port": port, "weight": 100}, {"name": canary_service(name), "port": port, "weight": 0}]
    return {"apiVersion": HTTPROUTE_API, "kind": "HTTPRoute", "metadata": c.metadata(name, plan, "traffic"),
            "spec": {"parentRefs": [parent], "rules": [{"backendRefs": backends}]}}


def _canary_service(name: str, plan: FleetPlan, component: str, ports: list[c.ServicePort],
                    match: dict[str, str]) -> dict[str, Any]:
    """The canary's Service (Argo Rollouts narrows its selector to the canary's pods). Empty outside a
    rollout, so Pulumi must not wait for an endpoint."""
    service = c.service(canary_service(name), plan, component, ports, 1, match)
    service["metadata"]["annotations"] = {"pulumi.com/skipAwait": "true"}
    return service


def plan_gateway(plan: FleetPlan) -> tuple[str, str | None] | None:
    return (plan.gateway_name, plan.gateway_namespace) if plan.gateway_name else None


def canary_objects(workload: TritonServerPlan | VllmModelPlan, plan: FleetPlan, objects: list[dict[str, Any]],
                   service_ports: tuple[str, list[c.ServicePort]], http_port: int) -> list[dict[str, Any]]:
    """``objects`` (a Deployment's, in apply order) made a canary's: the Deployment a Rollout in its place, its
    AnalysisTemplate before it, the HPA aimed at it, and with a gateway a canary Service and the HTTPRoute after
    its Service."""
    rollout, name = workload.rollout, c.kube_name(workload)
    assert rollout is not None
    out = []
    for obj in objects:
        if obj["kind"] == "Deployment":  # its analysis first: the Rollout names it (and Pulumi applies in order)
            out.append(analysis_template(plan, workload, c.metadata(analysis_name(name), plan, "analysis")))
            obj = as_rollout(obj, plan, rollout)
        elif obj["kind"] in ("HorizontalPodAutoscaler", "ScaledObject"):
            obj = {**obj, "spec": {**obj["spec"], "scaleTargetRef": {"apiVersion": ROLLOUT_API, "kind": "Rollout",
                                                                    "name": name}}}
        out.append(obj)
        if obj["kind"] == "Service" and rollout.traffic == "gateway":
            component, ports = service_ports
            out.append(_canary_service(name, plan, component, ports, obj["spec"]["selector"]))
            out.append(http_route(name, plan, http_port))
    return out
