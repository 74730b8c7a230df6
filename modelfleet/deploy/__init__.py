"""What ``pulumi up`` creates, decided from the plan, the stack and what already runs (pure: no pulumi, no I/O).

``compile_deploy_plan`` turns a compiled, rendered stack (:class:`Deployment`, built by ``project.py``) and the node groups EKS
reports (read by the program: ``components/live.py``) into a ``DeployPlan``; the components in
``components/`` only create what it lists. Types: ``types.py``; checks before anything is created:
``checks.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..cost.fleet import FleetCost
from ..plan.names import refuse_twice
from ..plan.capacity.disk import staged
from ..plan.types import FleetPlan
from ..render.k8s import model_repository_bucket, vllm_models, workload_endpoints
from ..spec.environment import EnvironmentSpec
from .addons import releases
from .cluster import cluster_deploy, cluster_name, node_role
from ..render.k8s.cluster import DEVICE_PLUGIN
from ..render.k8s.prerequisites import KARPENTER
from .node_groups import protected_changes, system_node_group
from .provisioners import provision
from .provisioners.karpenter import joined_cluster_notes
from .types import (BucketDeploy, DeployPlan, KarpenterDeploy, LiveCluster, LiveNodeGroup, NodeGroupDeploy, object_key,
                    release_key)
from .workloads import Context, cluster_objects, workloads

__all__ = ["DeployPlan", "Deployment", "LiveCluster", "LiveNodeGroup", "cluster_deploy", "compile_deploy_plan"]


class Deployment(NamedTuple):
    """One stack compiled, priced and rendered: what the Pulumi program deploys (``Project.deployment``)."""

    env: EnvironmentSpec
    plan: FleetPlan
    cost: FleetCost
    files: dict[str, bytes]
    manifests: dict[str, list[dict[str, Any]]]


def _context(deployment: Deployment, release_names: frozenset[str]) -> Context:
    objects = cluster_objects(deployment.manifests)
    namespace = next(o.name for o in objects if o.manifest["kind"] == "Namespace")
    return Context(namespace=object_key(namespace), releases=release_names,
                   cluster_objects=frozenset(object_key(o.name) for o in objects if o.manifest["kind"] == "DaemonSet"
                                             and o.manifest["metadata"]["name"] == DEVICE_PLUGIN),
                   cluster_ready=deployment.env.cluster.create)


def _warnings(deployment: Deployment, groups: Sequence[NodeGroupDeploy], live: Sequence[LiveNodeGroup],
              project: str) -> tuple[str, ...]:
    env = deployment.env
    warnings = [f"{w.model}: {w.message}" for w in deployment.plan.warnings]
    if not env.cluster.create and not env.cluster.subnet_ids and groups:
        warnings.append(f"node groups will use the subnets of cluster {cluster_name(env)}'s control plane, public "
                        "ones included if it has any: set modelfleet:cluster.subnetIds to its private subnets")
    return tuple(warnings + protected_changes(groups, live, env, project))


def needs_repository(plan: FleetPlan) -> bool:
    """The stack's bucket holds Triton's configs and the staged Hub checkpoints (plan/llm/weights.py)."""
    return bool(plan.triton_servers) or any(staged(m) for m in vllm_models(plan))


def _outputs(deployment: Deployment, groups: Sequence[NodeGroupDeploy],
             karpenter: KarpenterDeploy | None = None) -> dict[str, Any]:
    plan, cost = deployment.plan, deployment.cost.monthly_usd  # None when a price is unknown
    outputs: dict[str, Any] = {
        "endpoints": workload_endpoints(plan),
        "node_groups": {g.name: {"instance_type": g.instance_type, "min": g.scaling.min_size,
                                 "desired": g.scaling.desired_size, "max": g.scaling.max_size} for g in groups},
        "monthly_cost_usd": None if cost is None else {k: round(v, 2) for k, v in cost.model_dump().items()}}
    if needs_repository(plan):
        outputs["model_repository"] = model_repository_bucket(plan, deployment.env.deploy)
    if karpenter is not None:
        outputs["node_pools"] = {o.manifest["metadata"]["name"]: {
            "instance_types": o.manifest["spec"]["template"]["spec"]["requirements"][0]["values"],
            "capacity_types": o.manifest["spec"]["template"]["spec"]["requirements"][1]["values"],
            "limits": o.manifest["spec"]["limits"]} for o in karpenter.objects if o.manifest["kind"] == "NodePool"}
    return outputs


def compile_deploy_plan(deployment: Deployment, live: Sequence[LiveNodeGroup] = (), project: str = "modelfleet",
                        cluster: LiveCluster | None = None) -> DeployPlan:
    """``live``: the cluster's node groups now (none for a new cluster); ``project``: the Pulumi project's name;
    ``cluster``: its version and subnets' zones as the program read them (checks.py refuses what they lack)."""
    env, plan = deployment.env, deployment.plan
    subnets = cluster.subnets if cluster else ()
    charts = releases(plan, env)
    karpenter_crds = tuple(release_key(r.name) for r in charts if r.name == KARPENTER.release)
    groups, karpenter = provision(plan, env, live, subnets, karpenter_crds)
    system = system_node_group(env, live) if env.cluster.create else None
    every_group = (*groups, *((system,) if system else ()))
    servers, models = workloads(plan, env, deployment.files, deployment.manifests,
                                _context(deployment, frozenset(r.name for r in charts)))
    repository = (BucketDeploy(name="model-repository", bucket=model_repository_bucket(plan, env.deploy), protect=env.protect)
                  if needs_repository(plan) else None)
    return _created_once(DeployPlan(stack=env.name, project=project, cluster=cluster_deploy(env), node_role=node_role(),
                      system_node_group=system, node_groups=groups, cluster_objects=cluster_objects(deployment.manifests, frozenset(r.name for r in charts)),
                      releases=charts, repository=repository, triton_servers=servers, vllm_models=models,
                      outputs=_outputs(deployment, groups, karpenter),
                      warnings=_warnings(deployment, every_group, live, project) + tuple(
                          joined_cluster_notes(env, karpenter) if karpenter else ()),
                      notes=tuple(f"node group {g.name}: {g.scaling.note}" for g in every_group if g.scaling.note),
                      karpenter=karpenter))


def _created_once(fleet: DeployPlan) -> DeployPlan:
    """The second line of defence (plan/names.py): every applied object, pod identity association, role, node
    group and S3 object once, or a CompileError naming both producers (never a silent replacement)."""
    entries = [(("object", o.name), "the cluster-wide objects") for o in fleet.cluster_objects]
    for workload in (*fleet.triton_servers, *fleet.vllm_models):
        owner = f"workload {workload.name}"
        entries += [(("object", o.name), owner) for o in workload.manifests]
        secret = getattr(workload, "hf_secret", None)
        entries += [(("object", secret.name), owner)] if secret is not None else []
        identities = [getattr(workload, "identity", None), getattr(workload, "stage_identity", None)]
        for identity in (i for i in identities if i is not None):
            entries += [(("pod identity of service account", identity.namespace, identity.service_account), owner),
                        (("IAM role", f"{identity.name}-pod"), owner)]
        entries += [(("S3 object", o.key), owner) for o in getattr(workload, "objects", ())]
    entries += [(("object", o.name), "Karpenter's pools") for o in (fleet.karpenter.objects if fleet.karpenter else ())]
    groups = (*fleet.node_groups, *((fleet.system_node_group,) if fleet.system_node_group else ()))
    entries += [(("node group", g.name), f"node group {g.instance_type}") for g in groups]
    refuse_twice(entries, "the deploy plan")
    return fleet
