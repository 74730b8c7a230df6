"""Karpenter's side of a stack, exactly as the deploy plan lists it (``KarpenterDeploy``): the node role its
EC2NodeClasses name (with the EKS access entry that lets its nodes join), the spot interruption queue and the
EventBridge rules that feed it, and the EC2NodeClasses and NodePools themselves."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from modelfleet.deploy.types import KarpenterDeploy, node_group_key

from .kubernetes import apply_objects
from .registry import Registry


class KarpenterNodes(pulumi.ComponentResource):
    def __init__(self, name: str, spec: KarpenterDeploy, cluster_name: pulumi.Input[str],
                 provider: pulumi.ProviderResource, registry: Registry,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:KarpenterNodes", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(f"{name}-{spec.node_role.name}", name=spec.node_role_name,
                            assume_role_policy=spec.node_role.trust_policy, opts=child)
        attachments = [aws.iam.RolePolicyAttachment(f"{name}-{arn.rsplit('/', 1)[1]}", role=role.name, policy_arn=arn,
                                                    opts=child) for arn in spec.node_role.policy_arns]
        access = aws.eks.AccessEntry(f"{name}-nodes", cluster_name=cluster_name, principal_arn=role.arn,
                                     type="EC2_LINUX", opts=pulumi.ResourceOptions(parent=self, depends_on=attachments))
        if spec.queue_name is not None:
            self._queue(name, spec)
        objects = apply_objects(spec.objects, self, provider, registry)
        by_name = {obj.name: created for obj, created in zip(spec.objects, objects)}
        for group, pool in spec.pools:
            registry.add(node_group_key(group), by_name[pool], access)
        self.register_outputs({"node_role": role.name})

    def _queue(self, name: str, spec: KarpenterDeploy) -> None:
        child = pulumi.ResourceOptions(parent=self)
        queue = aws.sqs.Queue(f"{name}-interruptions", name=spec.queue_name, message_retention_seconds=300,
                              sqs_managed_sse_enabled=True, opts=child)
        aws.sqs.QueuePolicy(f"{name}-interruptions", queue_url=queue.url, policy=spec.queue_policy, opts=child)
        for rule in spec.rules:
            created = aws.cloudwatch.EventRule(rule.name, event_pattern=rule.event_pattern, opts=child)
            aws.cloudwatch.EventTarget(rule.name, rule=created.name, arn=queue.arn, opts=child)
