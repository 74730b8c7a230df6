"""A workload's AWS identity: a role only EKS Pod Identity can assume, bound to the workload's service account."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from modelfleet.iam import pod_identity_trust_policy


def pod_role(name: str, policy: pulumi.Input[str], cluster_name: pulumi.Input[str], namespace: str,
             parent: pulumi.Resource) -> aws.eks.PodIdentityAssociation:
    """Role ``<name>-pod`` with the inline read-only ``policy``, associated with service account ``name``."""
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(f"{name}-pod", assume_role_policy=pod_identity_trust_policy(), opts=child)
    grant = aws.iam.RolePolicy(f"{name}-read", role=role.id, policy=policy, opts=child)
    return aws.eks.PodIdentityAssociation(
        f"{name}-identity", cluster_name=cluster_name, namespace=namespace, service_account=name, role_arn=role.arn,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[grant]))
