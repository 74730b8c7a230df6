"""GPU node groups: one aws.eks.NodeGroup per NodeGroupPlan, and the node role they share."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from modelfleet.environment import DeploySettings
from modelfleet.iam import NODE_POLICY_ARNS, node_trust_policy
from modelfleet.plan import NodeGroupPlan


class NodeRole(pulumi.ComponentResource):
    """The worker role with exactly the three EKS worker policies."""

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:NodeRole", name, None, opts)
        self.role = aws.iam.Role(f"{name}-role", assume_role_policy=node_trust_policy(),
                                 opts=pulumi.ResourceOptions(parent=self))
        for arn in NODE_POLICY_ARNS:
            aws.iam.RolePolicyAttachment(f"{name}-{arn.rsplit('/', 1)[1]}", role=self.role.name, policy_arn=arn,
                                         opts=pulumi.ResourceOptions(parent=self))
        self.arn = self.role.arn
        self.register_outputs({"arn": self.arn})


class GpuNodeGroup(pulumi.ComponentResource):
    """A managed node group exactly as planned: GPU AMI, taint, labels, IMDSv2-only launch template."""

    def __init__(self, plan: NodeGroupPlan, cluster_name: pulumi.Input[str], subnet_ids: pulumi.Input[list[str]],
                 node_role_arn: pulumi.Input[str], deploy: DeploySettings,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:GpuNodeGroup", plan.name, None, opts)
        template = aws.ec2.LaunchTemplate(
            f"{plan.name}-lt",
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/xvda", ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=deploy.node_disk_gib, volume_type="gp3", encrypted="true"))],
            opts=pulumi.ResourceOptions(parent=self))
        self.node_group = aws.eks.NodeGroup(
            plan.name, cluster_name=cluster_name, node_group_name=plan.name, node_role_arn=node_role_arn,
            subnet_ids=subnet_ids, instance_types=[plan.instance_type], ami_type=deploy.ami_type,
            capacity_type="SPOT" if plan.capacity_type == "spot" else "ON_DEMAND",
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=plan.min_size, desired_size=plan.desired_size, max_size=plan.max_size),
            labels={"modelfleet.io/node-group": plan.name, "modelfleet.io/gpu": plan.gpu_model.replace(" ", "-")},
            taints=[aws.eks.NodeGroupTaintArgs(key="nvidia.com/gpu", value="true", effect="NO_SCHEDULE")],
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str)),
            opts=pulumi.ResourceOptions(parent=self, protect=deploy.protect,
                                        # the cluster autoscaler owns the desired size once it runs
                                        ignore_changes=["scalingConfig.desiredSize"] if plan.max_size > plan.min_size else []))
        self.register_outputs({"name": self.node_group.node_group_name})
