"""A created cluster's prerequisites (``modelfleet.render.k8s.prerequisites``) as Helm releases on its system nodes.

Each waits for the system node group (Helm waits for its pods, which need an untainted node); the adapter
waits for Prometheus. What the workloads' objects wait for: ServiceMonitors for the Prometheus stack (its
CRD), LeaderWorkerSets for the LWS controller, HPAs for the adapter (workloads.py).
"""

from __future__ import annotations

from dataclasses import replace

from ..plan.types import FleetPlan
from ..plan.names import interruption_queue_name, karpenter_node_role_name
from ..render.iam import cluster_autoscaler_policy, karpenter_controller_policy, pod_identity_trust_policy
from ..render.k8s import prerequisites as p
from ..spec.environment import EnvironmentSpec
from .cluster import cluster_name
from .types import CLUSTER_READY, SYSTEM_NODES, HelmReleaseDeploy, PodIdentityDeploy, release_key


def _release(chart: p.Chart, values: dict, waits_for: tuple[str, ...] = (),
             identity: PodIdentityDeploy | None = None) -> HelmReleaseDeploy:
    return HelmReleaseDeploy(name=chart.release, chart=chart.chart, version=chart.version, repository=chart.repository,
                             namespace=chart.namespace, identity=identity, values=values,
                             waits_for=(SYSTEM_NODES, *waits_for, *((CLUSTER_READY,) if identity else ())))


def autoscaler_identity(env: EnvironmentSpec) -> PodIdentityDeploy:
    return PodIdentityDeploy(name=p.CLUSTER_AUTOSCALER.release, namespace=p.CLUSTER_AUTOSCALER.namespace,
                             service_account=p.AUTOSCALER_SERVICE_ACCOUNT,
                             policy=cluster_autoscaler_policy(cluster_name(env), env.region),
                             trust_policy=pod_identity_trust_policy(), policy_name="autoscaling")


def _karpenter_release(plan: FleetPlan, env: EnvironmentSpec) -> HelmReleaseDeploy:
    """Karpenter instead of the cluster autoscaler, at the stack's version, with its pod identity."""
    name = cluster_name(env)
    spot = any("spot" in g.capacity_types for g in plan.node_groups)
    queue = interruption_queue_name(name, env.name) if spot else None
    identity = PodIdentityDeploy(name=p.KARPENTER.release, namespace=p.KARPENTER.namespace,
                                 service_account=p.KARPENTER_SERVICE_ACCOUNT,
                                 policy=karpenter_controller_policy(name, env.region,
                                                                    karpenter_node_role_name(name, env.name), queue),
                                 trust_policy=pod_identity_trust_policy(), policy_name="provisioning")
    chart = replace(p.KARPENTER, version=env.nodes.karpenter_version)
    return _release(chart, p.karpenter_values(name, queue), identity=identity)


def releases(plan: FleetPlan, env: EnvironmentSpec) -> tuple[HelmReleaseDeploy, ...]:
    """What a created cluster needs before the workloads: none for a joined cluster (docs/operations/deploying.md lists them)."""
    if not env.cluster.create:
        return ()
    name = cluster_name(env)
    scaler = (_karpenter_release(plan, env) if env.nodes.provisioner == "karpenter" else
              _release(p.CLUSTER_AUTOSCALER, p.autoscaler_values(name, env.region, env.kubernetes_version),
                       identity=autoscaler_identity(env)))
    charts = [
        scaler,
        _release(p.PROMETHEUS_STACK, p.prometheus_stack_values()),
        _release(p.PROMETHEUS_ADAPTER, p.adapter_values(), (release_key(p.PROMETHEUS_STACK.release),)),
    ]
    if p.needs_lws(plan):
        charts.append(_release(p.LWS, {}))
    if p.needs_keda(plan):
        charts.append(_release(p.KEDA, {}))
    return tuple(charts)
