"""Managed node groups exactly as the deploy plan lists them, and the node role they share."""

from __future__ import annotations

import base64

import pulumi
import pulumi_aws as aws

from modelfleet.deploy.types import (
    CPU_NODE_GROUP_TYPE,
    GPU_NODE_GROUP_TYPE,
    SYSTEM_NODE_GROUP_TYPE,
    NodeGroupDeploy,
    RoleDeploy,
)


class NodeRole(pulumi.ComponentResource):
    def __init__(self, name: str, spec: RoleDeploy, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:NodeRole", name, None, opts)
        self.role = aws.iam.Role(f"{name}-{spec.name}", assume_role_policy=spec.trust_policy,
                                 opts=pulumi.ResourceOptions(parent=self))
        self.attachments = [
            aws.iam.RolePolicyAttachment(f"{name}-{arn.rsplit('/', 1)[1]}", role=self.role.name, policy_arn=arn,
                                         opts=pulumi.ResourceOptions(parent=self))
            for arn in spec.policy_arns]
        self.arn = self.role.arn
        self.register_outputs({"arn": self.arn})


def _launch_template(spec: NodeGroupDeploy, parent: pulumi.Resource) -> aws.ec2.LaunchTemplate:
    lt = spec.launch_template
    return aws.ec2.LaunchTemplate(
        lt.name,
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
        block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
            device_name=lt.device_name, ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                volume_size=lt.volume_gib, volume_type="gp3", throughput=lt.throughput_mibps, iops=lt.iops,
                encrypted="true", delete_on_termination="true"))],
        tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type="instance", tags=lt.tags)],
        user_data=None if lt.user_data is None else base64.b64encode(lt.user_data.encode()).decode(),
        capacity_reservation_specification=None if lt.capacity_reservation_id is None else
        aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=lt.capacity_reservation_id)),
        instance_market_options=aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
        if lt.capacity_block else None,
        opts=pulumi.ResourceOptions(parent=parent))


class GpuNodeGroup(pulumi.ComponentResource):
    """A managed node group and its launch template. Its EKS name is ``<name>-<suffix>``: a change EKS can
    only make by a new group (AMI type, subnets) creates the new group before deleting the old one, which
    a protected group stops at (docs/operations/deploying.md, "Replacing a protected node group")."""

    TYPE = GPU_NODE_GROUP_TYPE

    def __init__(self, spec: NodeGroupDeploy, cluster_name: pulumi.Input[str], subnet_ids: pulumi.Input[list[str]],
                 role: NodeRole, opts: pulumi.ResourceOptions | None = None,
                 after: list[pulumi.Resource] | None = None) -> None:
        super().__init__(self.TYPE, spec.name, None, opts)
        template = _launch_template(spec, self)
        scaling = spec.scaling
        self.node_group = aws.eks.NodeGroup(
            spec.name, cluster_name=cluster_name, node_group_name_prefix=spec.name_prefix, node_role_arn=role.arn,
            subnet_ids=list(spec.subnet_ids) or subnet_ids, instance_types=[spec.instance_type], ami_type=spec.ami_type,
            capacity_type=spec.capacity_type,
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=scaling.min_size, desired_size=scaling.desired_size, max_size=scaling.max_size),
            labels=spec.labels, tags=spec.tags,
            taints=[aws.eks.NodeGroupTaintArgs(key=t.key, value=t.value, effect=t.effect) for t in spec.taints],
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str)),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=spec.update_max_unavailable),
            force_update_version=spec.force_update or None,
            opts=pulumi.ResourceOptions(
                # nodes cannot join without the role's policies; a zone's group updates after the previous zone's
                parent=self, protect=spec.protect, depends_on=[*role.attachments, *(after or [])],
                ignore_changes=["scalingConfig.desiredSize"] if scaling.ignore_desired else []))
        self.register_outputs({"name": self.node_group.node_group_name})


class CpuNodeGroup(GpuNodeGroup):
    """CPU-only nodes of KIND_CPU Triton servers: the spec carries their AMI without the NVIDIA driver and no
    taint (modelfleet.deploy.node_groups); the resources are the same."""

    TYPE = CPU_NODE_GROUP_TYPE


class SystemNodeGroup(GpuNodeGroup):
    """A created cluster's untainted nodes for CoreDNS and the controllers."""

    TYPE = SYSTEM_NODE_GROUP_TYPE
