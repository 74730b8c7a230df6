"""GPU node groups: one aws.eks.NodeGroup per NodeGroupPlan, and the node role they share."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from modelfleet.iam import NODE_POLICY_ARNS, node_trust_policy
from modelfleet.plan import NodeGroupPlan

# The volume that holds images and emptyDirs: AL2023 has one root volume; Bottlerocket keeps its OS on
# /dev/xvda and containers on the data volume /dev/xvdb.
DATA_DEVICE = {"AL2023_x86_64_NVIDIA": "/dev/xvda", "BOTTLEROCKET_x86_64_NVIDIA": "/dev/xvdb"}
GPU_TAINT = aws.eks.NodeGroupTaintArgs(key="nvidia.com/gpu", value="true", effect="NO_SCHEDULE")


class NodeRole(pulumi.ComponentResource):
    """The worker role with exactly the three EKS worker policies."""

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:NodeRole", name, None, opts)
        self.role = aws.iam.Role(f"{name}-role", assume_role_policy=node_trust_policy(),
                                 opts=pulumi.ResourceOptions(parent=self))
        self.attachments = [
            aws.iam.RolePolicyAttachment(f"{name}-{arn.rsplit('/', 1)[1]}", role=self.role.name, policy_arn=arn,
                                         opts=pulumi.ResourceOptions(parent=self))
            for arn in NODE_POLICY_ARNS]
        self.arn = self.role.arn
        self.register_outputs({"arn": self.arn})


class GpuNodeGroup(pulumi.ComponentResource):
    """A managed node group exactly as planned: GPU AMI, taint, labels, IMDSv2-only launch template.

    The EKS name is ``<plan name>-<suffix>``, so a change AWS can only make by replacing the group (AMI
    type, subnets) creates the new group before the old one is deleted.
    """

    def __init__(self, plan: NodeGroupPlan, cluster_name: pulumi.Input[str], subnet_ids: pulumi.Input[list[str]],
                 role: NodeRole, ami_type: str, disk_gib: int, protect: bool,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:GpuNodeGroup", plan.name, None, opts)
        labels = {"modelfleet.io/node-group": plan.name, "modelfleet.io/gpu": plan.gpu_model.replace(" ", "-")}
        template = aws.ec2.LaunchTemplate(
            f"{plan.name}-lt",
            # IMDSv2 only, one hop: pods cannot reach the node role's credentials (they use Pod Identity).
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=DATA_DEVICE[ami_type], ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=disk_gib, volume_type="gp3", encrypted="true", delete_on_termination="true"))],
            tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type="instance", tags=labels)],
            opts=pulumi.ResourceOptions(parent=self))
        autoscaled = plan.max_size > plan.min_size
        self.node_group = aws.eks.NodeGroup(
            plan.name, cluster_name=cluster_name, node_group_name_prefix=f"{plan.name}-", node_role_arn=role.arn,
            subnet_ids=subnet_ids, instance_types=[plan.instance_type], ami_type=ami_type,
            capacity_type="SPOT" if plan.capacity_type == "spot" else "ON_DEMAND",
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=plan.min_size, desired_size=plan.desired_size, max_size=plan.max_size),
            labels=labels, taints=[GPU_TAINT], tags=labels,
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str)),
            opts=pulumi.ResourceOptions(
                parent=self, protect=protect, depends_on=role.attachments,  # nodes cannot join without the policies
                # once the cluster autoscaler runs, it owns the desired size; `pulumi up` must not reset it
                ignore_changes=["scalingConfig.desiredSize"] if autoscaled else []))
        self.register_outputs({"name": self.node_group.node_group_name})
