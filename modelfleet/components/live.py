"""What runs now, read at preview and up time (AWS reads, no changes): the cluster's node groups as EKS
reports them, so the deploy plan can send a scaling config EKS accepts (modelfleet.deploy.node_groups); and
the cluster's Kubernetes version and its subnets' zones, so the deploy plan refuses features the cluster
lacks and places each zone's node group in its zone (modelfleet.deploy.checks)."""

from __future__ import annotations

import pulumi_aws as aws

from modelfleet.deploy.types import ClusterDeploy, LiveCluster, LiveNodeGroup, LiveSubnet


def _live(cluster: str, name: str) -> LiveNodeGroup:
    group = aws.eks.get_node_group(cluster_name=cluster, node_group_name=name)
    scaling = group.scaling_configs[0]
    return LiveNodeGroup(name=name, min_size=scaling.min_size, desired_size=scaling.desired_size,
                         max_size=scaling.max_size, ami_type=group.ami_type, capacity_type=group.capacity_type,
                         instance_types=tuple(group.instance_types), subnet_ids=tuple(group.subnet_ids),
                         tags=dict(group.tags or {}))


def read_live_node_groups(cluster: ClusterDeploy) -> tuple[LiveNodeGroup, ...]:
    """Every node group of the cluster (the deploy plan picks this stack's by their tags); none when this
    stack creates the cluster and it does not exist yet."""
    if cluster.create and cluster.name not in aws.eks.get_clusters().names:
        return ()
    names = aws.eks.get_node_groups(cluster_name=cluster.name).names
    return tuple(_live(cluster.name, n) for n in sorted(names))


def _subnets(ids: list[str]) -> tuple[LiveSubnet, ...]:
    return tuple(LiveSubnet(id=i, zone=aws.ec2.get_subnet(id=i).availability_zone) for i in sorted(ids))


def read_live_cluster(cluster: ClusterDeploy) -> LiveCluster:
    """The joined (or already created) cluster's version, and the zones of the subnets node groups use: the
    stack's ``cluster.subnetIds``, else the cluster's own. A cluster this stack has yet to create has no
    version yet (it gets the stack's)."""
    if cluster.create and cluster.name not in aws.eks.get_clusters().names:
        return LiveCluster(kubernetes_version=None, subnets=_subnets(list(cluster.subnet_ids)))
    found = aws.eks.get_cluster(name=cluster.name)
    return LiveCluster(kubernetes_version=found.version,
                       subnets=_subnets(list(cluster.subnet_ids) or list(found.vpc_config.subnet_ids)))
