"""A created cluster's prerequisites (``modelfleet.render.k8s.prerequisites``) as Helm releases on its system nodes.

Each waits for the system node group (Helm waits for its pods, which need an untainted node); the adapter
waits for Prometheus. What the workloads' objects wait for: ServiceMonitors for the Prometheus stack (its
CRD), LeaderWorkerSets for the LWS controller, HPAs for the adapter (workloads.py).
"""

from __future__ import annotations

from ..plan.types import FleetPlan
from ..render.iam import cluster_autoscaler_policy, pod_identity_trust_policy
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


def releases(plan: FleetPlan, env: EnvironmentSpec) -> tuple[HelmReleaseDeploy, ...]:
    """What a created cluster needs before the workloads: none for a joined cluster (docs/operations/deploying.md lists them)."""
    if not env.cluster.create:
        return ()
    name = cluster_name(env)
    charts = [
        _release(p.CLUSTER_AUTOSCALER, p.autoscaler_values(name, env.region, env.kubernetes_version),
                 identity=autoscaler_identity(env)),
        _release(p.PROMETHEUS_STACK, p.prometheus_stack_values()),
        _release(p.PROMETHEUS_ADAPTER, p.adapter_values(), (release_key(p.PROMETHEUS_STACK.release),)),
    ]
    if p.needs_lws(plan):
        charts.append(_release(p.LWS, {}))
    return tuple(charts)
