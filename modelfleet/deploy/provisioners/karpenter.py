"""Karpenter: each plan group as an EC2NodeClass and a NodePool (karpenter.sh/v1, karpenter.k8s.aws/v1), the node
role they name, and the interruption queue spot pools need.

A pool offers the plan's allowed types (the chosen one and its fit-checked equivalents,
plan/capacity/provisioning.py) on its capacity types: ``reserved`` first where the stack has reservations
(the EC2NodeClass's ``capacityReservationSelectorTerms`` names them; Karpenter 1.3+ for ODCRs, 1.6+ for
Capacity Blocks), then spot falling back to on-demand. Its nodes carry the group's labels and, on GPUs, the
``nvidia.com/gpu`` taint; its ``nvidia.com/gpu`` limit is the plan's maximum (HPA max plus rollout surge).

Disruption. ``WhenEmpty``, not ``WhenEmptyOrUnderutilized``: the plan sizes every node for the pods it hosts,
so an underutilized GPU node is rare, and moving a loaded model to a cheaper node costs a cold start of
minutes (weights read again) under live traffic, for a saving that lasts until the next scale-out. An empty
node goes after ``CONSOLIDATE_AFTER`` (what scale to zero saves). The budget lets one replica's nodes go at
once (a multi-node replica's together), so drift and expiry keep every workload's floor as its
PodDisruptionBudget does; serving and staging pods carry ``karpenter.sh/do-not-disrupt`` (they load weights:
a voluntary move costs a cold start), so only expiry (``expireAfter``) replaces their nodes, forcefully after
``TERMINATION_GRACE``.

A spot group's on-demand base (plan: ``on_demand_base_nodes``) is a second NodePool, on-demand only, of
higher weight and limited to the base's GPUs: Karpenter fills the heavier pool first, so the floor's nodes
are on-demand and only what scales above it rides on spot.

Multi-node replicas: one pool over the stack's zones; the LeaderWorkerSet's required pod affinity on
``topology.kubernetes.io/zone`` (render/k8s/vllm.py), which Karpenter's scheduler honours when it launches
nodes, keeps each replica's nodes in one zone (the reservation's, where reserved nodes come first).
"""

from __future__ import annotations

import json
from typing import Any

from ...plan.names import base_pool_name, interruption_queue_name, karpenter_node_role_name
from ...plan.types import FleetPlan, NodeGroupPlan, VllmModelPlan
from ...render.iam import NODE_POLICY_ARNS, node_trust_policy
from ...render.k8s.common import GPU_RESOURCE, MANAGED_BY, NODE_GROUP_LABEL
from ...spec.environment import EnvironmentSpec
from ..cluster import cluster_name
from ..types import AppliedObject, EventRuleDeploy, KarpenterDeploy, RoleDeploy, object_key

NODEPOOL_API, NODECLASS_API = "karpenter.sh/v1", "karpenter.k8s.aws/v1"
GPU_LABEL, STACK_TAG = "modelfleet.io/gpu", "modelfleet.io/stack"
CONSOLIDATE_AFTER = "10m"  # an empty GPU node waits this long for a pod (a rollout's, a scale-out's) before it goes
TERMINATION_GRACE = "2h"  # after expiry starts draining a node, do-not-disrupt pods are evicted at most this late
BASE_WEIGHT = 100  # the on-demand base pool is filled first
# AL2023 and Bottlerocket aliases: Karpenter picks the NVIDIA variant for GPU types itself; @latest follows AWS's
# releases, and the budget paces the drift each release starts.
AMI_ALIAS = {"AL2023_x86_64_NVIDIA": "al2023@latest", "BOTTLEROCKET_x86_64_NVIDIA": "bottlerocket@latest"}
DATA_DEVICE = {"AL2023_x86_64_NVIDIA": "/dev/xvda", "BOTTLEROCKET_x86_64_NVIDIA": "/dev/xvdb"}
CAPACITY = {"reserved": "reserved", "spot": "spot", "on-demand": "on-demand"}
INTERRUPTION_EVENTS = (  # as Karpenter's own CloudFormation template routes them
    ("scheduled-change", {"source": ["aws.health"], "detail-type": ["AWS Health Event"]}),
    ("spot-interruption", {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]}),
    ("rebalance", {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]}),
    ("instance-state-change", {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]}),
)


def _labels(group: NodeGroupPlan) -> dict[str, str]:
    return {NODE_GROUP_LABEL: group.name} | ({GPU_LABEL: group.gpu_model.replace(" ", "-")} if group.device == "gpu" else {})


def node_class(group: NodeGroupPlan, env: EnvironmentSpec) -> dict[str, Any]:
    volume = group.root_volume
    ebs = {"volumeSize": f"{volume.size_gib}Gi", "volumeType": "gp3", "iops": volume.iops,
           "throughput": volume.throughput_mibps, "encrypted": True, "deleteOnTermination": True}
    device = DATA_DEVICE[env.deploy.ami_type]
    mapping: dict[str, Any] = {"deviceName": device, "ebs": ebs} | ({"rootVolume": True} if device == "/dev/xvda" else {})
    subnets = ([{"id": s} for s in env.cluster.subnet_ids] if env.cluster.subnet_ids
               else [{"tags": {"karpenter.sh/discovery": cluster_name(env)}}])
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": AMI_ALIAS[env.deploy.ami_type]}],
        "role": karpenter_node_role_name(cluster_name(env), env.name),
        "subnetSelectorTerms": subnets,
        # EKS tags the cluster security group it creates with the cluster's name
        "securityGroupSelectorTerms": [{"tags": {"aws:eks:cluster-name": cluster_name(env)}}],
        "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1,
                            "httpTokens": "required"},
        "blockDeviceMappings": [mapping],
        "tags": _labels(group) | {STACK_TAG: env.name}}
    if group.ephemeral_storage_on == "instance-store":
        spec["instanceStorePolicy"] = "RAID0"
    if group.reservations:
        spec["capacityReservationSelectorTerms"] = [{"id": r.id} for r in group.reservations]
    return {"apiVersion": NODECLASS_API, "kind": "EC2NodeClass",
            "metadata": {"name": group.name, "labels": dict(MANAGED_BY)}, "spec": spec}


def replica_nodes(plan: FleetPlan, group: NodeGroupPlan) -> int:
    """The most nodes one replica of the group's workloads holds (a multi-node replica's all at once)."""
    return max((m.nodes_per_replica for m in plan.models if isinstance(m, VllmModelPlan) and m.node_group == group.name),
               default=1)


def node_pool(plan: FleetPlan, group: NodeGroupPlan, env: EnvironmentSpec, name: str,
              capacity: tuple[str, ...], nodes: int, weight: int | None = None) -> dict[str, Any]:
    """A NodePool of ``group``'s types on ``capacity``, limited to ``nodes`` nodes' GPUs (or CPUs)."""
    requirements = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(group.allowed_types)},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [CAPACITY[c] for c in capacity]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    template: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": group.name},
        "requirements": requirements, "expireAfter": f"{env.nodes.expire_after_hours}h",
        "terminationGracePeriod": TERMINATION_GRACE}
    if group.device == "gpu":
        template["taints"] = [{"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}]
    limits = ({GPU_RESOURCE: str(nodes * group.gpus_per_node)} if group.device == "gpu" else {"cpu": str(nodes * group.vcpu)})
    spec: dict[str, Any] = {
        "template": {"metadata": {"labels": _labels(group)}, "spec": template}, "limits": limits,
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": CONSOLIDATE_AFTER,
                       "budgets": [{"nodes": str(replica_nodes(plan, group))}]}}
    if weight is not None:
        spec["weight"] = weight
    return {"apiVersion": NODEPOOL_API, "kind": "NodePool", "metadata": {"name": name, "labels": dict(MANAGED_BY)},
            "spec": spec}


def node_pools(plan: FleetPlan, group: NodeGroupPlan, env: EnvironmentSpec) -> list[dict[str, Any]]:
    """The group's pool, and its on-demand base pool when it has one."""
    base = group.on_demand_base_nodes
    pools = [node_pool(plan, group, env, group.name, group.capacity_types or (group.capacity_type,),
                       max(1, group.max_size - base))]
    if base:
        pools.append(node_pool(plan, group, env, base_pool_name(group.name), ("on-demand",), base, BASE_WEIGHT))
    return pools


def _applied(obj: dict[str, Any], waits_for: tuple[str, ...]) -> AppliedObject:
    return AppliedObject(name=f"{obj['kind']}-{obj['metadata']['name']}", manifest=obj, waits_for=waits_for)


def queue_policy(queue_arn_hint: str) -> str:
    """EventBridge and SQS itself may send to the queue (as Karpenter's CloudFormation template allows)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "EventBridgeAndSqsSend", "Effect": "Allow",
        "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
        "Action": "sqs:SendMessage", "Resource": queue_arn_hint}]}, sort_keys=True)


def karpenter_deploy(plan: FleetPlan, env: EnvironmentSpec, waits_for: tuple[str, ...]) -> KarpenterDeploy:
    """Every plan group as an EC2NodeClass and its NodePool(s); the node role; the queue when a pool uses spot."""
    cluster = cluster_name(env)
    classes = [_applied(node_class(g, env), waits_for) for g in plan.node_groups]
    owned = [(g.name, _applied(p, (*waits_for, object_key(f"EC2NodeClass-{g.name}"))))
             for g in plan.node_groups for p in node_pools(plan, g, env)]
    pools = [pool for _, pool in owned]
    spot = any("spot" in g.capacity_types for g in plan.node_groups)
    queue = interruption_queue_name(cluster, env.name) if spot else None
    rules = tuple(EventRuleDeploy(name=f"karpenter-{kind}", event_pattern=json.dumps(pattern, sort_keys=True))
                  for kind, pattern in INTERRUPTION_EVENTS) if spot else ()
    return KarpenterDeploy(version=env.nodes.karpenter_version, node_role_name=karpenter_node_role_name(cluster, env.name),
                           node_role=RoleDeploy(name="karpenter-node", trust_policy=node_trust_policy(),
                                                policy_arns=NODE_POLICY_ARNS),
                           queue_name=queue, queue_policy=queue_policy(f"arn:aws:sqs:{env.region}:*:{queue}") if queue else None,
                           rules=rules, objects=tuple(classes + pools),
                           pools=tuple((group, pool.name) for group, pool in owned))


def joined_cluster_notes(env: EnvironmentSpec, deploy: KarpenterDeploy) -> list[str]:
    """What a joined cluster must already run: this stack installs Karpenter only in a cluster it creates."""
    if env.cluster.create:
        return []
    queue = (f"; its settings.interruptionQueue must be {deploy.queue_name} (created here) for spot interruptions "
             "to drain nodes before EC2 takes them") if deploy.queue_name else ""
    return [(f"nodes.provisioner is karpenter: cluster {cluster_name(env)} must run Karpenter {deploy.version} or "
             "later (karpenter.sh/v1 NodePools; Capacity Blocks need 1.6) with its controller allowed to pass role "
             f"{deploy.node_role_name}{queue}; `pulumi up` applies NodePools the cluster must have the CRDs for")]
