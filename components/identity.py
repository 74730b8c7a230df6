"""A workload's AWS identity: a role only EKS Pod Identity can assume, bound to the workload's service account."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from modelfleet.deploy.types import PodIdentityDeploy


def pod_role(spec: PodIdentityDeploy, cluster_name: pulumi.Input[str],
             parent: pulumi.Resource) -> aws.eks.PodIdentityAssociation:
    """Role ``<name>-pod`` with its one inline policy, associated with the service account."""
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(f"{spec.name}-pod", assume_role_policy=spec.trust_policy, opts=child)
    grant = aws.iam.RolePolicy(f"{spec.name}-{spec.policy_name}", role=role.id, policy=spec.policy, opts=child)
    return aws.eks.PodIdentityAssociation(
        f"{spec.name}-identity", cluster_name=cluster_name, namespace=spec.namespace,
        service_account=spec.service_account, role_arn=role.arn, opts=pulumi.ResourceOptions(parent=parent, depends_on=[grant]))
